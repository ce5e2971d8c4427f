import Testing

@testable import LoadCore

@Suite struct RESPTests {
  @Test func commandsAreArraysOfBulkStrings() {
    let bytes = RESPEncoder.command(["PUBLISH", "ch", "héllo"])
    #expect(String(decoding: bytes, as: UTF8.self) == "*3\r\n$7\r\nPUBLISH\r\n$2\r\nch\r\n$6\r\nhéllo\r\n")
  }

  static let stream =
    "+OK\r\n-ERR no\r\n:42\r\n$-1\r\n$5\r\nhe\r\no\r\n*3\r\n$7\r\nmessage\r\n$2\r\nch\r\n$3\r\nabc\r\n*-1\r\n*0\r\n"
  // Computed, not a stored global: LeakSanitizer reports the boxes of a lazily built global as leaked.
  static var values: [RESPValue] {
    [
      .simple("OK"), .error("ERR no"), .integer(42), .bulk(nil), .bulk(Array("he\r\no".utf8)),
      .array([.bulk(Array("message".utf8)), .bulk(Array("ch".utf8)), .bulk(Array("abc".utf8))]), .array(nil),
      .array([]),
    ]
  }

  @Test func decodesEveryTypeFromOneRead() throws {
    var decoder = RESPDecoder()
    decoder.feed(Array(Self.stream.utf8))
    var values: [RESPValue] = []
    while let value = try decoder.next() { values.append(value) }
    #expect(values == Self.values)
    #expect(decoder.bufferedBytes == 0)
  }

  @Test func decodesTheSameWhenSplitAtEveryOffset() throws {
    let bytes = Array(Self.stream.utf8)
    for split in 0...bytes.count {
      var decoder = RESPDecoder()
      var values: [RESPValue] = []
      decoder.feed(Array(bytes[..<split]))
      while let value = try decoder.next() { values.append(value) }
      decoder.feed(Array(bytes[split...]))
      while let value = try decoder.next() { values.append(value) }
      #expect(values == Self.values, "split at \(split)")
    }
  }

  @Test func decodesTheSameFedByteByByte() throws {
    var decoder = RESPDecoder()
    var values: [RESPValue] = []
    for byte in Self.stream.utf8 {
      decoder.feed([byte])
      while let value = try decoder.next() { values.append(value) }
    }
    #expect(values == Self.values)
  }

  @Test func malformedInputIsATypedError() {
    for (input, error) in [
      ("?x\r\n", RESPError.unknownType(UInt8(ascii: "?"))), (":4x\r\n", .badNumber("4x")),
      ("$3\r\nabcXY", .missingTerminator), ("$99999999999\r\n", .badNumber("99999999999")),
    ] {
      var decoder = RESPDecoder()
      decoder.feed(Array(input.utf8))
      #expect(throws: error) { _ = try decoder.next() }
    }
  }
}
