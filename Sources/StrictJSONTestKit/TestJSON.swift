/// A JSON value as written, for tests of JSON readers: objects keep their members in order, duplicates
/// included, and numbers keep their text. `init?(parsing:)` is a second, independent strict parser (RFC 8259,
/// the same limits as StrictJSON's `JSONReader`): the oracle that says whether a text is strict JSON at all.
public indirect enum TestJSON: Equatable, Sendable {
  case null
  case bool(Bool)
  /// A number as written (`-1.5e3`).
  case number(String)
  case string(String)
  case array([TestJSON])
  case object([Member])
  /// Text written as is, whatever it is (the parser never makes one): for damage the tree cannot express.
  case raw(String)

  public struct Member: Equatable, Sendable {
    public var key: String
    public var value: TestJSON
    public init(_ key: String, _ value: TestJSON) {
      self.key = key
      self.value = value
    }
  }

  /// The deepest nesting a strict reader accepts (as `JSONDecoder`).
  public static let maximumDepth = 512

  /// Parses `bytes` as one strict JSON text, or nil. Strict: UTF-8 (a leading byte order mark allowed),
  /// whitespace of space, tab, LF and CR only, no trailing comma, the RFC's number grammar and escapes,
  /// surrogate escapes in pairs, no raw control character in a string, at most `maximumDepth` levels.
  public init?(parsing bytes: [UInt8]) {
    guard String(validating: bytes, as: UTF8.self) != nil else { return nil }
    var parser = Parser(bytes: bytes)
    if bytes.starts(with: [0xEF, 0xBB, 0xBF]) { parser.index = 3 }
    parser.skipSpace()
    guard let value = parser.value() else { return nil }
    parser.skipSpace()
    guard parser.index == bytes.count else { return nil }
    self = value
  }

  /// Whether `bytes` is one strict JSON text.
  public static func isStrictJSON(_ bytes: [UInt8]) -> Bool { TestJSON(parsing: bytes) != nil }

  private struct Parser {
    let bytes: [UInt8]
    var index = 0
    var depth = 0

    var current: UInt8? { index < bytes.count ? bytes[index] : nil }

    mutating func skipSpace() {
      while let byte = current, byte == 0x20 || byte == 0x09 || byte == 0x0A || byte == 0x0D { index += 1 }
    }

    mutating func value() -> TestJSON? {
      guard let byte = current else { return nil }
      switch byte {
      case UInt8(ascii: "{"): return object()
      case UInt8(ascii: "["): return array()
      case UInt8(ascii: "\""): return string().map(TestJSON.string)
      case UInt8(ascii: "t"): return literal("true") ? .bool(true) : nil
      case UInt8(ascii: "f"): return literal("false") ? .bool(false) : nil
      case UInt8(ascii: "n"): return literal("null") ? .null : nil
      default: return number()
      }
    }

    mutating func literal(_ word: String) -> Bool {
      let expected = Array(word.utf8)
      guard bytes.count - index >= expected.count, Array(bytes[index..<index + expected.count]) == expected
      else {
        return false
      }
      index += expected.count
      return true
    }

    mutating func object() -> TestJSON? {
      depth += 1
      guard depth <= TestJSON.maximumDepth else { return nil }
      index += 1
      var members: [Member] = []
      skipSpace()
      if current == UInt8(ascii: "}") {
        index += 1
        depth -= 1
        return .object(members)
      }
      while true {
        skipSpace()
        guard current == UInt8(ascii: "\""), let key = string() else { return nil }
        skipSpace()
        guard current == UInt8(ascii: ":") else { return nil }
        index += 1
        skipSpace()
        guard let value = value() else { return nil }
        members.append(Member(key, value))
        skipSpace()
        if current == UInt8(ascii: ",") {
          index += 1
          continue
        }
        guard current == UInt8(ascii: "}") else { return nil }
        index += 1
        depth -= 1
        return .object(members)
      }
    }

    mutating func array() -> TestJSON? {
      depth += 1
      guard depth <= TestJSON.maximumDepth else { return nil }
      index += 1
      var items: [TestJSON] = []
      skipSpace()
      if current == UInt8(ascii: "]") {
        index += 1
        depth -= 1
        return .array(items)
      }
      while true {
        skipSpace()
        guard let item = value() else { return nil }
        items.append(item)
        skipSpace()
        if current == UInt8(ascii: ",") {
          index += 1
          continue
        }
        guard current == UInt8(ascii: "]") else { return nil }
        index += 1
        depth -= 1
        return .array(items)
      }
    }

    mutating func string() -> String? {
      index += 1
      var scalars = String.UnicodeScalarView()
      var raw: [UInt8] = []
      func flush() {
        if !raw.isEmpty {
          scalars.append(contentsOf: String(decoding: raw, as: UTF8.self).unicodeScalars)
          raw.removeAll()
        }
      }
      while let byte = current {
        index += 1
        switch byte {
        case UInt8(ascii: "\""):
          flush()
          return String(scalars)
        case UInt8(ascii: "\\"):
          flush()
          guard let code = current else { return nil }
          index += 1
          switch code {
          case UInt8(ascii: "\""): scalars.append("\"")
          case UInt8(ascii: "\\"): scalars.append("\\")
          case UInt8(ascii: "/"): scalars.append("/")
          case UInt8(ascii: "b"): scalars.append("\u{08}")
          case UInt8(ascii: "f"): scalars.append("\u{0C}")
          case UInt8(ascii: "n"): scalars.append("\n")
          case UInt8(ascii: "r"): scalars.append("\r")
          case UInt8(ascii: "t"): scalars.append("\t")
          case UInt8(ascii: "u"):
            guard let unit = hex4() else { return nil }
            if (0xD800..<0xDC00).contains(unit) {
              guard literal("\\u"), let low = hex4(), (0xDC00..<0xE000).contains(low) else { return nil }
              scalars.append(Unicode.Scalar(0x10000 + ((unit - 0xD800) << 10) + (low - 0xDC00))!)
            } else {
              guard let scalar = Unicode.Scalar(unit) else { return nil }  // a lone low surrogate
              scalars.append(scalar)
            }
          default: return nil
          }
        case 0x00..<0x20:
          return nil
        default:
          raw.append(byte)
        }
      }
      return nil
    }

    mutating func hex4() -> UInt32? {
      guard bytes.count - index >= 4 else { return nil }
      let text = String(decoding: bytes[index..<index + 4], as: UTF8.self)
      guard text.utf8.allSatisfy({ ($0 >= 0x30 && $0 <= 0x39) || ($0 | 0x20 >= 0x61 && $0 | 0x20 <= 0x66) }),
        let value = UInt32(text, radix: 16)
      else { return nil }
      index += 4
      return value
    }

    mutating func number() -> TestJSON? {
      let start = index
      func digits() -> Int {
        let from = index
        while let byte = current, byte >= 0x30 && byte <= 0x39 { index += 1 }
        return index - from
      }
      if current == UInt8(ascii: "-") { index += 1 }
      if current == UInt8(ascii: "0") {
        index += 1
      } else {
        guard let byte = current, byte >= 0x31 && byte <= 0x39 else { return nil }
        _ = digits()
      }
      if current == UInt8(ascii: ".") {
        index += 1
        guard digits() > 0 else { return nil }
      }
      if current == UInt8(ascii: "e") || current == UInt8(ascii: "E") {
        index += 1
        if current == UInt8(ascii: "+") || current == UInt8(ascii: "-") { index += 1 }
        guard digits() > 0 else { return nil }
      }
      return .number(String(decoding: bytes[start..<index], as: UTF8.self))
    }
  }
}
