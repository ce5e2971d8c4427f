/// A streaming UTF-8 validator (RFC 3629): a small deterministic automaton fed any number of chunks.
///
/// It rejects overlong encodings, surrogates (U+D800-U+DFFF), code points above U+10FFFF and stray or missing
/// continuation bytes, and it fails fast: `feed` returns false at the first byte that cannot continue any valid
/// sequence, so a text message split across frames is refused as soon as a bad fragment arrives. A code point
/// may straddle chunks; `isComplete` says whether the bytes so far end on a code point boundary.
///
/// ```
///   accept ──00-7F──▶ accept
///          ──C2-DF──▶ need1 ──80-BF──▶ accept
///          ──E0──▶ needA0toBF ──A0-BF──▶ need1
///          ──ED──▶ need80to9F ──80-9F──▶ need1
///          ──E1-EC,EE-EF──▶ need2 ──80-BF──▶ need1
///          ──F0──▶ need90toBF ──90-BF──▶ need2
///          ──F1-F3──▶ need3 ──80-BF──▶ need2
///          ──F4──▶ need80to8F ──80-8F──▶ need2
///   any other byte in any state ──▶ reject (absorbing)
/// ```
public struct UTF8Validator {
  private var state: UInt8 = UTF8Validator.accept

  public init() {}

  /// Feeds the next chunk. Returns false once the input so far cannot be a prefix of valid UTF-8; stays false.
  public mutating func feed(_ bytes: UnsafeRawBufferPointer) -> Bool {
    guard state != Self.reject else { return false }
    guard let base = bytes.baseAddress else { return true }
    let count = bytes.count
    var current = state
    var offset = 0
    Self.classes.withUnsafeBufferPointer { classes in
      Self.transitions.withUnsafeBufferPointer { transitions in
        while offset < count {
          if current == Self.accept {
            // ASCII fast path: skip whole words with no high bit set.
            while offset + 8 <= count
              && base.loadUnaligned(fromByteOffset: offset, as: UInt64.self) & 0x8080_8080_8080_8080 == 0
            {
              offset += 8
            }
            if offset == count { break }
          }
          let byte = base.load(fromByteOffset: offset, as: UInt8.self)
          current = transitions[Int(current) &* Self.classCount &+ Int(classes[Int(byte)])]
          if current == Self.reject { break }
          offset += 1
        }
      }
    }
    state = current
    return current != Self.reject
  }

  /// Whether the bytes fed so far are valid and end on a code point boundary.
  public var isComplete: Bool { state == Self.accept }

  /// Whether `bytes` are complete, valid UTF-8.
  public static func isValid(_ bytes: UnsafeRawBufferPointer) -> Bool {
    var validator = UTF8Validator()
    return validator.feed(bytes) && validator.isComplete
  }

  // States. Each "needN" state waits for N more continuation bytes in 80-BF; the four narrow states wait for
  // the second byte of a sequence whose lead restricts it (to rule out overlongs, surrogates and > U+10FFFF).
  private static let accept: UInt8 = 0
  private static let reject: UInt8 = 1
  private static let need1: UInt8 = 2
  private static let need2: UInt8 = 3
  private static let need3: UInt8 = 4
  private static let needA0toBF: UInt8 = 5  // after E0: 3-byte, not overlong
  private static let need80to9F: UInt8 = 6  // after ED: 3-byte, not a surrogate
  private static let need90toBF: UInt8 = 7  // after F0: 4-byte, not overlong
  private static let need80to8F: UInt8 = 8  // after F4: 4-byte, at most U+10FFFF
  private static let stateCount = 9

  // Byte classes: 0 ASCII, 1 80-8F, 2 90-9F, 3 A0-BF, 4 never valid (C0, C1, F5-FF), 5 C2-DF, 6 E0,
  // 7 E1-EC and EE-EF, 8 ED, 9 F0, 10 F1-F3, 11 F4.
  private static let classCount = 12

  private static let classes: [UInt8] = (0...255).map { (byte: Int) -> UInt8 in
    switch byte {
    case 0x00...0x7F: 0
    case 0x80...0x8F: 1
    case 0x90...0x9F: 2
    case 0xA0...0xBF: 3
    case 0xC2...0xDF: 5
    case 0xE0: 6
    case 0xED: 8
    case 0xE1...0xEF: 7
    case 0xF0: 9
    case 0xF1...0xF3: 10
    case 0xF4: 11
    default: 4
    }
  }

  /// `transitions[state * classCount + class]` is the next state.
  private static let transitions: [UInt8] = {
    var table = [UInt8](repeating: reject, count: stateCount * classCount)
    func set(_ from: UInt8, _ byteClasses: [Int], _ to: UInt8) {
      for byteClass in byteClasses { table[Int(from) * classCount + byteClass] = to }
    }
    set(accept, [0], accept)
    set(accept, [5], need1)
    set(accept, [6], needA0toBF)
    set(accept, [7], need2)
    set(accept, [8], need80to9F)
    set(accept, [9], need90toBF)
    set(accept, [10], need3)
    set(accept, [11], need80to8F)
    set(need1, [1, 2, 3], accept)
    set(need2, [1, 2, 3], need1)
    set(need3, [1, 2, 3], need2)
    set(needA0toBF, [3], need1)
    set(need80to9F, [1, 2], need1)
    set(need90toBF, [2, 3], need2)
    set(need80to8F, [1], need2)
    return table
  }()
}
