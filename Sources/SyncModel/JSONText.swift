/// JSON text pieces as Foundation's `JSONEncoder` writes them (`.withoutEscapingSlashes`), for the few messages
/// written directly because they are on a hot path (a batch's answer, a `changed` frame). Tests hold each such
/// writer byte-identical to `JSONEncoder` with `.sortedKeys`.
public enum JSONText {
  public static func appendNumber(_ value: some BinaryInteger, to out: inout [UInt8]) {
    // Digits written straight into `out` (a String per number cost ~1,000 instructions, on every id and time of
    // a batch's answer). Any integer type: negative values through their magnitude.
    guard let magnitude = UInt64(exactly: value.magnitude) else {
      out.append(contentsOf: String(value).utf8)
      return
    }
    if value < 0 { out.append(UInt8(ascii: "-")) }
    appendDigits(magnitude, to: &out)
  }

  private static func appendDigits(_ value: UInt64, to out: inout [UInt8]) {
    var digits: (UInt64, UInt64, UInt64) = (0, 0, 0)  // 24 bytes: room for UInt64.max's 20 digits
    var count = 0
    var rest = value
    withUnsafeMutableBytes(of: &digits) { buffer in
      repeat {
        buffer[23 - count] = UInt8(ascii: "0") + UInt8(rest % 10)
        rest /= 10
        count += 1
      } while rest > 0
      out.append(contentsOf: buffer[(24 - count)...])
    }
  }

  /// A JSON string: `"` and `\` escaped, control characters as their short escapes or `\u00XX`, the rest
  /// (slashes and non-ASCII included) as is.
  public static func appendString(_ text: String, to out: inout [UInt8]) {
    out.append(UInt8(ascii: "\""))
    var text = text
    // Over the contiguous bytes: the generic `utf8` view cost ~20 instructions a byte.
    let plain = text.withUTF8 { bytes in
      guard bytes.allSatisfy({ $0 >= 0x20 && $0 != UInt8(ascii: "\"") && $0 != UInt8(ascii: "\\") }) else {
        return false
      }
      out.append(contentsOf: bytes)
      return true
    }
    if plain {
      out.append(UInt8(ascii: "\""))
      return
    }
    for byte in text.utf8 {
      switch byte {
      case UInt8(ascii: "\""): out.append(contentsOf: #"\""#.utf8)
      case UInt8(ascii: "\\"): out.append(contentsOf: #"\\"#.utf8)
      case 0x08: out.append(contentsOf: #"\b"#.utf8)
      case 0x0C: out.append(contentsOf: #"\f"#.utf8)
      case 0x0A: out.append(contentsOf: #"\n"#.utf8)
      case 0x0D: out.append(contentsOf: #"\r"#.utf8)
      case 0x09: out.append(contentsOf: #"\t"#.utf8)
      case 0x00..<0x20:
        out.append(contentsOf: #"\u00"#.utf8)
        out.append(hexDigit(byte >> 4))
        out.append(hexDigit(byte & 0x0F))
      default: out.append(byte)
      }
    }
    out.append(UInt8(ascii: "\""))
  }

  private static func hexDigit(_ value: UInt8) -> UInt8 {
    value < 10 ? UInt8(ascii: "0") + value : UInt8(ascii: "a") + value - 10
  }

  /// Keys in the order `.sortedKeys` writes them: by their UTF-8 bytes.
  public static func sortedKeys<Value>(_ dictionary: [String: Value]) -> [String] {
    dictionary.keys.sorted { $0.utf8.lexicographicallyPrecedes($1.utf8) }
  }
}
