/// An object member's key, as read: where its text is in the input (escapes not yet resolved). Valid until the
/// reader reads on. Trivial to copy: a key costs no allocation unless it has escapes and is looked at.
public struct JSONKey {
  /// The key's text in the input, between its quotes.
  @usableFromInline let raw: UnsafeBufferPointer<UInt8>
  /// Whether that text holds escapes (rare).
  @usableFromInline let escaped: Bool

  /// Whether the key is `name` (compared as unescaped UTF-8, as `JSONDecoder` compares keys: a key written with
  /// escapes, `"ti\u0074le"`, is `title`).
  @inlinable public func matches(_ name: StaticString) -> Bool {
    let count = name.utf8CodeUnitCount
    if escaped {
      return unescapedBytes.elementsEqual(UnsafeBufferPointer(start: name.utf8Start, count: count))
    }
    guard raw.count == count else { return false }
    let base = raw.baseAddress!
    for index in 0..<count where base[index] != name.utf8Start[index] { return false }
    return true
  }

  /// The key's bytes if it has no escapes (nearly every key), without a copy; nil if it has (then `string`).
  /// Valid until the reader reads on.
  public var plainBytes: UnsafeBufferPointer<UInt8>? { escaped ? nil : raw }

  /// The key as a string.
  public var string: String {
    escaped ? String(decoding: unescapedBytes, as: UTF8.self) : String(decoding: raw, as: UTF8.self)
  }

  @usableFromInline var unescapedBytes: [UInt8] {
    var out: [UInt8] = []
    JSONReader.unescape(raw, into: &out)
    return out
  }
}

extension JSONReader {
  /// Reads a string; another value is a type mismatch (`Expected to decode String but found ...`), `null` a
  /// missing value (`Cannot get value of type String -- found null value instead`).
  public mutating func readString() throws(JSONReadError) -> String {
    try readString { bytes throws(JSONReadError) in String(decoding: bytes, as: UTF8.self) }
  }

  /// Reads a string as `readString()` does, but hands `body` its bytes (valid UTF-8, escapes resolved; valid
  /// during the call) instead of making a `String`: for values parsed or checked from their bytes (an HLC time,
  /// an id, a name matched against a list).
  @inlinable
  public mutating func readString<T>(
    _ body: (UnsafeBufferPointer<UInt8>) throws(JSONReadError) -> T
  ) throws(JSONReadError) -> T {
    let kind = try peek()
    guard kind == .string else {
      if kind == .null { throw .nullValue(expected: "String", at: position) }
      throw .typeMismatch(expected: "String", found: kind, at: position)
    }
    let token = try scanString()
    let raw = UnsafeBufferPointer(rebasing: bytes[token.start..<token.end])
    if !token.escaped { return try body(raw) }
    Self.unescape(raw, into: &scratch)
    return try scratch.withUnsafeBufferPointer { unescaped throws(JSONReadError) in try body(unescaped) }
  }

  /// Reads a key at the opening quote.
  mutating func readKey() throws(JSONReadError) -> JSONKey {
    let token = try scanString()
    return JSONKey(raw: UnsafeBufferPointer(rebasing: bytes[token.start..<token.end]), escaped: token.escaped)
  }

  /// Scans the string whose opening quote is at `position`, checking it, and reads past its closing quote.
  /// Returns the range of its content and whether it holds escapes.
  @usableFromInline mutating func scanString() throws(JSONReadError) -> (start: Int, end: Int, escaped: Bool)
  {
    let opening = position
    position += 1
    let start = position
    var escaped = false
    let count = bytes.count
    let base = bytes.baseAddress!
    while true {
      // Eight bytes at a time while none of them is a quote, a backslash, a control character or non-ASCII,
      // then byte by byte up to the one that is: most strings here are ids and short text. (A local index:
      // `position` lives in memory.)
      var index = position
      while index + 8 <= count
        && Self.isPlainASCII(UnsafeRawPointer(base + index).loadUnaligned(as: UInt64.self))
      {
        index += 8
      }
      while index < count {
        let byte = base[index]
        if byte < 0x20 || byte >= 0x80 || byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") { break }
        index += 1
      }
      position = index
      guard index < count else {
        throw .syntax("unterminated string (it opens at byte \(opening))", at: index)
      }
      let byte = base[index]
      if byte == UInt8(ascii: "\"") {
        position = index + 1
        return (start, index, escaped)
      } else if byte == UInt8(ascii: "\\") {
        escaped = true
        try scanEscape()
      } else if byte < 0x20 {
        throw .syntax(
          "control character 0x\(String(byte, radix: 16, uppercase: true)) in a string (write it escaped)",
          at: index)
      } else {
        try scanUTF8Sequence()
      }
    }
  }

  /// Whether none of the word's eight bytes is `"`, `\`, below 0x20 or above 0x7F (SWAR: a byte is found by
  /// the high bit its test sets; exact for the any-byte question asked here).
  @inline(__always) static func isPlainASCII(_ word: UInt64) -> Bool {
    let ones: UInt64 = 0x0101_0101_0101_0101
    let highs: UInt64 = 0x8080_8080_8080_8080
    let quote = word ^ (ones &* 0x22)
    let backslash = word ^ (ones &* 0x5C)
    let hasQuote = (quote &- ones) & ~quote & highs
    let hasBackslash = (backslash &- ones) & ~backslash & highs
    let hasControl = (word &- ones &* 0x20) & ~word & highs
    return (hasQuote | hasBackslash | hasControl | (word & highs)) == 0
  }

  /// Checks the escape whose backslash is at `position` and reads past it. `\uXXXX` must be a scalar or a
  /// high surrogate followed by `\u` and a low one.
  private mutating func scanEscape() throws(JSONReadError) {
    let escape = position
    guard position + 1 < bytes.count else { throw endOfInput(expecting: "an escape") }
    switch bytes[position + 1] {
    case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"), UInt8(ascii: "b"), UInt8(ascii: "f"),
      UInt8(ascii: "n"), UInt8(ascii: "r"), UInt8(ascii: "t"):
      position += 2
    case UInt8(ascii: "u"):
      let unit = try hexUnit(at: position + 2)
      position += 6
      if unit >= 0xD800 && unit < 0xDC00 {
        guard position + 1 < bytes.count, bytes[position] == UInt8(ascii: "\\"),
          bytes[position + 1] == UInt8(ascii: "u")
        else {
          throw .syntax("lone surrogate \\u\(Self.hex(unit)) in a string", at: escape)
        }
        let low = try hexUnit(at: position + 2)
        guard low >= 0xDC00 && low < 0xE000 else {
          throw .syntax("lone surrogate \\u\(Self.hex(unit)) in a string", at: escape)
        }
        position += 6
      } else if unit >= 0xDC00 && unit < 0xE000 {
        throw .syntax("lone surrogate \\u\(Self.hex(unit)) in a string", at: escape)
      }
    default:
      let byte = bytes[position + 1]
      let what =
        byte >= 0x21 && byte < 0x7F
        ? "'\\\(Character(Unicode.Scalar(byte)))'" : "(a backslash before \(describeByte(at: position + 1)))"
      throw .syntax("invalid escape \(what) in a string", at: escape)
    }
  }

  /// The value of the four hex digits at `offset`.
  private func hexUnit(at offset: Int) throws(JSONReadError) -> UInt16 {
    guard offset + 4 <= bytes.count else {
      throw .syntax("unexpected end of input in a \\u escape", at: offset)
    }
    var value: UInt16 = 0
    for index in offset..<offset + 4 {
      let byte = bytes[index]
      let digit: UInt8
      switch byte {
      case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = byte - UInt8(ascii: "0")
      case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = byte - UInt8(ascii: "a") + 10
      case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = byte - UInt8(ascii: "A") + 10
      default: throw .syntax("invalid \\u escape: \(describeByte(at: index)) is not a hex digit", at: index)
      }
      value = value << 4 | UInt16(digit)
    }
    return value
  }

  /// Checks the multi-byte UTF-8 sequence at `position` (RFC 3629: no overlong form, no surrogate, at most
  /// U+10FFFF) and reads past it.
  private mutating func scanUTF8Sequence() throws(JSONReadError) {
    let lead = bytes[position]
    let length: Int
    var low: UInt8 = 0x80
    var high: UInt8 = 0xBF
    switch lead {
    case 0xC2...0xDF: length = 2
    case 0xE0:
      length = 3
      low = 0xA0
    case 0xED:
      length = 3
      high = 0x9F
    case 0xE1...0xEC, 0xEE...0xEF: length = 3
    case 0xF0:
      length = 4
      low = 0x90
    case 0xF1...0xF3: length = 4
    case 0xF4:
      length = 4
      high = 0x8F
    default: throw .syntax("invalid UTF-8 in a string", at: position)
    }
    guard position + length <= bytes.count else { throw .syntax("invalid UTF-8 in a string", at: position) }
    let second = bytes[position + 1]
    guard second >= low && second <= high else { throw .syntax("invalid UTF-8 in a string", at: position) }
    for index in position + 2..<position + length where bytes[index] & 0xC0 != 0x80 {
      throw .syntax("invalid UTF-8 in a string", at: position)
    }
    position += length
  }

  /// The string content `raw` (checked by `scanString`) with its escapes resolved, into `out`.
  @usableFromInline static func unescape(_ raw: UnsafeBufferPointer<UInt8>, into out: inout [UInt8]) {
    out.removeAll(keepingCapacity: true)
    out.reserveCapacity(raw.count)
    var index = 0
    while index < raw.count {
      let byte = raw[index]
      guard byte == UInt8(ascii: "\\") else {
        out.append(byte)
        index += 1
        continue
      }
      let code = raw[index + 1]
      index += 2
      switch code {
      case UInt8(ascii: "b"): out.append(0x08)
      case UInt8(ascii: "f"): out.append(0x0C)
      case UInt8(ascii: "n"): out.append(0x0A)
      case UInt8(ascii: "r"): out.append(0x0D)
      case UInt8(ascii: "t"): out.append(0x09)
      case UInt8(ascii: "u"):
        var scalar = UInt32(hexValue(raw, at: index))
        index += 4
        if scalar >= 0xD800 && scalar < 0xDC00 {
          let low = UInt32(hexValue(raw, at: index + 2))
          index += 6
          scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
        }
        appendUTF8(scalar, to: &out)
      default: out.append(code)  // " \ /
      }
    }
  }

  private static func hexValue(_ bytes: UnsafeBufferPointer<UInt8>, at offset: Int) -> UInt16 {
    var value: UInt16 = 0
    for index in offset..<offset + 4 {
      let byte = bytes[index]
      let digit =
        byte <= UInt8(ascii: "9") ? byte - UInt8(ascii: "0") : (byte | 0x20) - UInt8(ascii: "a") + 10
      value = value << 4 | UInt16(digit)
    }
    return value
  }

  private static func appendUTF8(_ scalar: UInt32, to out: inout [UInt8]) {
    switch scalar {
    case 0..<0x80:
      out.append(UInt8(scalar))
    case 0x80..<0x800:
      out.append(UInt8(0xC0 | scalar >> 6))
      out.append(UInt8(0x80 | scalar & 0x3F))
    case 0x800..<0x10000:
      out.append(UInt8(0xE0 | scalar >> 12))
      out.append(UInt8(0x80 | scalar >> 6 & 0x3F))
      out.append(UInt8(0x80 | scalar & 0x3F))
    default:
      out.append(UInt8(0xF0 | scalar >> 18))
      out.append(UInt8(0x80 | scalar >> 12 & 0x3F))
      out.append(UInt8(0x80 | scalar >> 6 & 0x3F))
      out.append(UInt8(0x80 | scalar & 0x3F))
    }
  }

  private static func hex(_ unit: UInt16) -> String {
    let digits = String(unit, radix: 16)
    return String(repeating: "0", count: 4 - digits.count) + digits
  }
}
