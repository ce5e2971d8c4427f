import RichText
import SeededRandom
import Testing

/// The state's binary form (version 2: origins by where they are, the text deflated, deletions from the
/// tombstones): what it reloads is the document it was written from, and it still reads version 1.
@Suite struct StateEncodingTests {
  @Test func everyStateOfSeededExchangesReloadsAsItWas() throws {
    for seed in UInt64(1)...20 {
      var random = SplitMix64(seed: seed)
      let names = ["ana", "bo", "cy"]
      var replicas = [TextDocument](repeating: TextDocument(text: "seed text", client: "origin"), count: 3)
      var seq: UInt64 = 0
      for step in 0..<150 {
        let who = Int(random.next(upperBound: UInt64(3)))
        let count = replicas[who].count
        let position = Int(random.next(upperBound: UInt64(count + 1)))
        let delete =
          count > position && random.next(upperBound: UInt64(3)) == 0
          ? Int(random.next(upperBound: UInt64(min(count - position, 4)))) + 1 : 0
        let insert = ["", "a", "bc", "dé€", "xyz xyz xyz"][Int(random.next(upperBound: UInt64(5)))]
        let update = try replicas[who].splice(
          at: position, delete: delete, insert: insert, client: names[who])
        for other in 0..<3 where other != who && random.next(upperBound: UInt64(2)) == 0 {
          seq += 1
          // Replica 0 plays the broker: what it applies gets a sequence.
          if other == 0 { replicas[other].apply(update, seq: seq) } else { replicas[other].apply(update) }
        }
        for replica in replicas {
          let reloaded = try TextDocument(encoded: replica.encoded())
          #expect(reloaded.update() == replica.update(), "seed \(seed), step \(step)")
          #expect(reloaded.text == replica.text, "seed \(seed), step \(step)")
        }
      }
    }
  }

  @Test func textsOfEveryKindReload() throws {
    var random = SplitMix64(seed: 7)
    let noise = String(
      String.UnicodeScalarView(
        (0..<3000).map { _ in Unicode.Scalar(UInt8(33 + random.next(upperBound: UInt64(90)))) }))
    let texts = [
      "", "a", "abc", "abcd", String(repeating: "a", count: 10_000),
      String(repeating: "the cat sat. ", count: 500),
      noise, noise + noise, "é€😀 " + String(repeating: "日本語", count: 300),
    ]
    for text in texts {
      let document = TextDocument(text: text, client: "me")
      let reloaded = try TextDocument(encoded: document.encoded())
      #expect(reloaded.text == text)
      #expect(reloaded.update() == document.update())
    }
  }

  @Test func damagedStatesAreRefusedOrReadWithoutTrapping() throws {
    var document = TextDocument(text: String(repeating: "a line of text, ", count: 40), client: "ana")
    _ = try document.splice(at: 30, delete: 100, insert: "and more", client: "bo")
    _ = try document.splice(at: 3, delete: 0, insert: "x", client: "ana")
    let bytes = document.encoded()
    for length in 1..<bytes.count {  // (no bytes at all: an empty document)
      #expect(throws: TextError.self) { try TextDocument(encoded: Array(bytes[..<length])) }
    }
    for index in bytes.indices {
      for flip: UInt8 in [1, 0x80, 0xFF] {
        var damaged = bytes
        damaged[index] ^= flip
        _ = try? TextDocument(encoded: damaged)
      }
    }
  }

  /// A version 2 state of one visible run of `length` characters by "me", its text `textBytes` long given as
  /// the raw deflate `stream` (text form 1).
  static func deflatedState(length: Int, textBytes: Int, stream: [UInt8]) -> [UInt8] {
    func varint(_ value: Int) -> [UInt8] {
      var value = value
      var bytes: [UInt8] = []
      while value >= 0x80 {
        bytes.append(UInt8(value & 0x7F) | 0x80)
        value >>= 7
      }
      return bytes + [UInt8(value)]
    }
    // Version 2, a state, one replica ("me"), one run: flags 0 (visible, no origin, no sequence), counter 0.
    var bytes: [UInt8] = [2, 1, 1, 2, 109, 101, 1, 0, 0] + varint(length)
    bytes += varint(textBytes) + [1] + varint(stream.count) + stream
    return bytes + [0, 0, 0]  // no deletions, marks or waiting runs
  }

  /// `data` as one stored deflate block (RFC 1951 3.2.4), the last.
  static func storedBlock(_ data: [UInt8]) -> [UInt8] {
    let length = UInt16(data.count)
    return [1, UInt8(length & 0xFF), UInt8(length >> 8), UInt8(~length & 0xFF), UInt8(~length >> 8)] + data
  }

  @Test func theTextIsExactlyOneDeflateStreamOfItsLength() throws {
    let text = String(repeating: "a line of text, ", count: 40)
    let utf8 = Array(text.utf8)
    // What encoded() writes is zlib's stream in this frame.
    let written = TextDocument(text: text, client: "me").encoded()
    let header = Self.deflatedState(length: utf8.count, textBytes: utf8.count, stream: [])
    #expect(Array(written.prefix(header.count - 4)) == Array(header.dropLast(4)))
    #expect(written.count < header.count + 100, "deflated: \(written.count) bytes for \(utf8.count)")
    // Any deflate stream of the text reads (a stored block here, not zlib's).
    let stored = Self.deflatedState(length: utf8.count, textBytes: utf8.count, stream: Self.storedBlock(utf8))
    #expect(try TextDocument(encoded: stored).text == text)
    // A stream of one byte more or less than the length said, bytes after the stream, a stream cut short or
    // damaged: refused.
    let refused: [[UInt8]] = [
      Self.deflatedState(
        length: utf8.count, textBytes: utf8.count, stream: Self.storedBlock(utf8.dropLast())),
      Self.deflatedState(length: utf8.count, textBytes: utf8.count, stream: Self.storedBlock(utf8 + [97])),
      Self.deflatedState(length: utf8.count, textBytes: utf8.count, stream: Self.storedBlock(utf8) + [0]),
      Self.deflatedState(
        length: utf8.count, textBytes: utf8.count, stream: Array(Self.storedBlock(utf8).dropLast())),
      Self.deflatedState(length: utf8.count, textBytes: utf8.count, stream: [7] + utf8),
      Self.deflatedState(length: utf8.count, textBytes: utf8.count, stream: []),
    ]
    for bytes in refused {
      #expect(throws: TextError.self) { try TextDocument(encoded: bytes) }
    }
    // A length no stream of that size could inflate to (deflate makes at most 1032 bytes of one) is refused
    // before any room is made for it: here 16 MiB claimed by 8 bytes.
    #expect(throws: TextError.malformed("compressed text: shorter than its length could come from")) {
      try TextDocument(
        encoded: Self.deflatedState(
          length: 1 << 24, textBytes: 1 << 24, stream: [0xED, 0xC1, 1, 1, 0, 0, 0, 0x80]))
    }
  }

  /// Written by dcd5cea (version 1): "Hello world" by ana, then ana's and bo's edits applied by a broker with
  /// sequences 7, 9 and 12.
  static let version1: [UInt8] = [
    1, 1, 2, 3, 97, 110, 97, 2, 98, 111, 7, 0, 0, 1, 17, 9, 1, 0, 1, 26, 0, 0, 0, 1, 9, 0, 0, 1, 6, 0, 0, 2,
    23, 12,
    0, 0, 1, 6, 0, 0, 6, 23, 7, 0, 0, 13, 22, 7, 16, 74, 101, 111, 44, 32, 100, 101, 97, 114, 32, 114, 101,
    97, 100,
    101, 114, 3, 0, 0, 1, 9, 0, 1, 2, 12, 0, 1, 6, 7, 0, 0,
  ]

  @Test func aVersion1StateStillReads() throws {
    let document = try TextDocument(encoded: Self.version1)
    #expect(document.text == "Jeo, dear reader")
    let update = document.update()
    #expect(update.runs.map(\.seq) == [9, 9, 0, 12, 0, 7, 7])
    #expect(update.runs.map(\.length) == [1, 1, 1, 2, 1, 6, 13])
    #expect(update.runs[1].left == CharacterID(client: "ana", counter: 0))
    #expect(update.runs[1].right == CharacterID(client: "ana", counter: 1))
    #expect(
      update.deletes == [
        DeletedRange(client: "ana", counter: 0, length: 1, seq: 9),
        DeletedRange(client: "ana", counter: 2, length: 2, seq: 12),
        DeletedRange(client: "ana", counter: 5, length: 6, seq: 7),
      ])
    // Written again, it is version 2, and reads the same.
    let again = try TextDocument(encoded: document.encoded())
    #expect(again.update() == update)
  }
}
