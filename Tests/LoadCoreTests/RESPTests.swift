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

  /// What `next(message:)` yields: message pushes as (channel, payload) text, other values as they are.
  private enum Item: Equatable {
    case message(String, String)
    case value(RESPValue)
  }

  private func items(_ decoder: inout RESPDecoder, into items: inout [Item]) throws {
    while let value = try decoder.next(message: { channel, payload in
      items.append(
        .message(String(decoding: channel, as: UTF8.self), String(decoding: payload, as: UTF8.self)))
    }) {
      items.append(.value(value))
    }
  }

  @Test func messagePushesComeAsBytesWhateverTheSplit() throws {
    // Messages between replies, with a payload holding CRLF and a channel of 0 bytes.
    let text =
      "+OK\r\n*3\r\n$7\r\nmessage\r\n$2\r\nch\r\n$5\r\nab\r\nc\r\n:7\r\n"
      + "*3\r\n$7\r\nmessage\r\n$0\r\n\r\n$3\r\nxyz\r\n*3\r\n$8\r\nmessages\r\n$0\r\n\r\n$0\r\n\r\n"
    let expected: [Item] = [
      .value(.simple("OK")), .message("ch", "ab\r\nc"), .value(.integer(7)), .message("", "xyz"),
      .value(.array([.bulk(Array("messages".utf8)), .bulk([]), .bulk([])])),
    ]
    let bytes = Array(text.utf8)
    for split in 0...bytes.count {
      var decoder = RESPDecoder()
      var got: [Item] = []
      decoder.feed(Array(bytes[..<split]))
      try items(&decoder, into: &got)
      decoder.feed(Array(bytes[split...]))
      try items(&decoder, into: &got)
      #expect(got == expected, "split at \(split)")
      #expect(decoder.bufferedBytes == 0)
    }
    var decoder = RESPDecoder()
    var got: [Item] = []
    for byte in bytes {
      decoder.feed([byte])
      try items(&decoder, into: &got)
    }
    #expect(got == expected)
  }

  @Test func aMalformedMessagePushIsATypedError() {
    for (input, error) in [
      ("*3\r\n$7\r\nmessage\r\n:2\r\n", RESPError.unknownType(UInt8(ascii: ":"))),
      ("*3\r\n$7\r\nmessage\r\n$2x\r\n", .badNumber("2x")),
      ("*3\r\n$7\r\nmessage\r\n$-1\r\n", .badNumber("-1")),
      ("*3\r\n$7\r\nmessage\r\n$2\r\nchXY", .missingTerminator),
    ] {
      var decoder = RESPDecoder()
      decoder.feed(Array(input.utf8))
      #expect(throws: error) { _ = try decoder.next(message: { _, _ in }) }
    }
  }

  @Test func numbersReadAsInt64ReadsThem() throws {
    for text in ["0", "-0", "42", "-1", "9223372036854775807", "-9223372036854775808"] {
      var decoder = RESPDecoder()
      decoder.feed(Array(":\(text)\r\n".utf8))
      #expect(try decoder.next() == .integer(Int64(text)!))
    }
    for text in ["", "-", "9223372036854775808", "-9223372036854775809", "1-", "+1", " 1", "1a"] {
      var decoder = RESPDecoder()
      decoder.feed(Array(":\(text)\r\n".utf8))
      #expect(throws: RESPError.badNumber(text)) { _ = try decoder.next() }
    }
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
