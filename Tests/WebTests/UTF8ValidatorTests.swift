import EventLoopTestKit
import Testing

@testable import Web

/// The streaming UTF-8 validator against known-good and known-bad sequences, chunked at every offset, and
/// against the standard library's own validation.
@Suite struct UTF8ValidatorTests {
  static func isValid(_ bytes: [UInt8]) -> Bool { bytes.withUnsafeBytes { UTF8Validator.isValid($0) } }

  static let valid: [[UInt8]] = [
    [],
    Array("plain ASCII, long enough to take the word-at-a-time path".utf8),
    hexBytes("00 7f"),
    hexBytes("c2 80"),  // U+0080, smallest 2-byte
    hexBytes("df bf"),  // U+07FF
    hexBytes("e0 a0 80"),  // U+0800, smallest 3-byte
    hexBytes("ed 9f bf"),  // U+D7FF, just below the surrogates
    hexBytes("ee 80 80"),  // U+E000, just above them
    hexBytes("ef bf bf"),  // U+FFFF
    hexBytes("f0 90 80 80"),  // U+10000, smallest 4-byte
    hexBytes("f0 9f 98 80"),  // U+1F600
    hexBytes("f4 8f bf bf"),  // U+10FFFF, the largest
    Array("κόσμε €😀 mixed with ASCII after eight bytes".utf8),
  ]

  static let invalid: [[UInt8]] = [
    hexBytes("c0 80"),  // overlong NUL
    hexBytes("c1 bf"),  // overlong U+007F
    hexBytes("e0 80 80"),  // overlong 3-byte
    hexBytes("e0 9f bf"),  // overlong U+07FF
    hexBytes("f0 80 80 80"),  // overlong 4-byte
    hexBytes("f0 8f bf bf"),  // overlong U+FFFF
    hexBytes("ed a0 80"),  // U+D800, first surrogate
    hexBytes("ed bf bf"),  // U+DFFF, last surrogate
    hexBytes("ed a0 bd ed b2 a9"),  // CESU-8 surrogate pair
    hexBytes("f4 90 80 80"),  // U+110000
    hexBytes("f5 80 80 80"),  // lead beyond U+10FFFF
    hexBytes("fe"), hexBytes("ff"),
    hexBytes("80"),  // lone continuation
    hexBytes("bf"),
    hexBytes("61 80 62"),  // stray continuation after ASCII
    hexBytes("c2 80 80"),  // one continuation too many
    hexBytes("c2"),  // truncated 2-byte
    hexBytes("e2 82"),  // truncated 3-byte
    hexBytes("f0 9f 98"),  // truncated 4-byte
    hexBytes("e2 82 61"),  // truncated, followed by ASCII
    hexBytes("c2 c2 80"),  // lead where a continuation is due
    Array("0123456789abcdef".utf8) + hexBytes("c0 80"),  // after the ASCII fast path
    Array("0123456789abcde".utf8) + hexBytes("e2 82"),  // truncated at the very end
  ]

  @Test(arguments: valid)
  func acceptsValidSequence(_ bytes: [UInt8]) {
    #expect(Self.isValid(bytes))
  }

  @Test(arguments: invalid)
  func rejectsInvalidSequence(_ bytes: [UInt8]) {
    #expect(!Self.isValid(bytes))
  }

  @Test(arguments: valid + invalid)
  func chunkingAtEveryOffsetGivesTheSameVerdict(_ bytes: [UInt8]) {
    let expected = Self.isValid(bytes)
    for split in 0...bytes.count {
      var validator = UTF8Validator()
      let first = validator.feed(Array(bytes[..<split]))
      let second = validator.feed(Array(bytes[split...]))
      #expect((first && second && validator.isComplete) == expected, "split at \(split)")
    }
    var validator = UTF8Validator()
    var ok = true
    for byte in bytes { ok = validator.feed([byte]) && ok }
    #expect((ok && validator.isComplete) == expected, "byte by byte")
  }

  @Test func incompleteSequenceIsValidButNotComplete() {
    var validator = UTF8Validator()
    let prefixAccepted = validator.feed(hexBytes("61 f0 9f"))
    #expect(prefixAccepted)
    #expect(!validator.isComplete)
    let restAccepted = validator.feed(hexBytes("98 80"))
    #expect(restAccepted)
    #expect(validator.isComplete)
  }

  @Test(arguments: [
    (hexBytes("e0"), hexBytes("80")), (hexBytes("ed"), hexBytes("a0")), (hexBytes("f4"), hexBytes("90")),
    (hexBytes("f0"), hexBytes("8f")), (hexBytes("c2"), hexBytes("41")), (hexBytes("61 62"), hexBytes("80")),
  ])
  func failsAtTheFirstImpossibleByte(prefix: [UInt8], next: [UInt8]) {
    var validator = UTF8Validator()
    let prefixAccepted = validator.feed(prefix)
    let nextAccepted = validator.feed(next)
    #expect(prefixAccepted)
    #expect(!nextAccepted)
  }

  @Test func rejectionIsSticky() {
    var validator = UTF8Validator()
    let invalidAccepted = validator.feed(hexBytes("ff"))
    let laterAccepted = validator.feed(Array("fine".utf8))
    #expect(!invalidAccepted)
    #expect(!laterAccepted)
    #expect(!validator.isComplete)
  }

  @Test func emptyFeedsChangeNothing() {
    var validator = UTF8Validator()
    let empty = UnsafeRawBufferPointer(start: nil, count: 0)
    let first = validator.feed(empty)
    #expect(first)
    #expect(validator.isComplete)
    let lead = validator.feed(hexBytes("c3"))
    let second = validator.feed(empty)
    #expect(lead && second)
    #expect(!validator.isComplete)
  }

  @Test func acceptsEveryScalar() {
    // Every Unicode scalar, encoded by the standard library, is accepted; checked in blocks to keep it fast.
    var bytes: [UInt8] = []
    var checked = 0
    for value in UInt32(0)...0x10FFFF {
      guard let scalar = Unicode.Scalar(value) else { continue }
      UTF8.encode(scalar) { bytes.append($0) }
      checked += 1
      if bytes.count > 60_000 || value == 0x10FFFF {
        #expect(Self.isValid(bytes), "block ending at U+\(String(value, radix: 16))")
        bytes.removeAll(keepingCapacity: true)
      }
    }
    #expect(checked == 0x110000 - 0x800)
  }

  @Test func everySurrogateEncodingIsRejected() {
    for value in UInt32(0xD800)...0xDFFF {
      let bytes = [0xE0 | UInt8(value >> 12), 0x80 | UInt8((value >> 6) & 0x3F), 0x80 | UInt8(value & 0x3F)]
      #expect(!Self.isValid(bytes))
    }
  }

  @Test func agreesWithTheStandardLibraryOnRandomInput() {
    // Random bytes biased towards UTF-8 structure (leads, continuations, ASCII), so that both valid and
    // invalid inputs are common.
    var random = SplitMix64(seed: 0x5EED)
    let alphabet: [UInt8] = [
      0x41, 0x7F, 0x80, 0x8F, 0x90, 0x9F, 0xA0, 0xBF, 0xC0, 0xC2, 0xDF, 0xE0, 0xE1, 0xED, 0xEF, 0xF0, 0xF3,
      0xF4, 0xF5, 0xFF,
    ]
    var validCount = 0
    for _ in 0..<4000 {
      let length = Int.random(in: 0...12, using: &random)
      let bytes = (0..<length).map { _ in alphabet.randomElement(using: &random)! }
      let expected = String(validating: bytes, as: UTF8.self) != nil
      if expected { validCount += 1 }
      #expect(Self.isValid(bytes) == expected, "\(hexString(bytes))")
    }
    #expect(validCount > 100)
  }
}

extension UTF8Validator {
  mutating func feed(_ bytes: [UInt8]) -> Bool { bytes.withUnsafeBytes { feed($0) } }
}
