extension TestJSON {
  /// How a text is written: the same value in many spellings, so a reader meets what other writers write.
  public struct Style: Sendable {
    /// How often whitespace goes between two tokens (0: never).
    public var spacing: Double
    /// How often a character that needs no escape is written as `\uXXXX` (a surrogate pair beyond the BMP) or,
    /// for `/`, as `\/`.
    public var escaping: Double
    /// How often a number is written another way with the same decimal value (`15` as `1.5e1`, `150E-1`,
    /// `15.000`).
    public var respelling: Double

    public init(spacing: Double = 0, escaping: Double = 0, respelling: Double = 0) {
      self.spacing = spacing
      self.escaping = escaping
      self.respelling = respelling
    }

    public static let compact = Style()

    /// A random style.
    public static func random(using random: inout some RandomNumberGenerator) -> Style {
      Style(
        spacing: [0, 0, 0.2, 1].randomElement(using: &random)!,
        escaping: [0, 0, 0.1, 0.5].randomElement(using: &random)!,
        respelling: [0, 0, 0.3, 1].randomElement(using: &random)!)
    }
  }

  /// The value as UTF-8 JSON text in `style`.
  public func text(_ style: Style = .compact, using random: inout some RandomNumberGenerator) -> [UInt8] {
    var out: [UInt8] = []
    write(into: &out, style, &random)
    return out
  }

  /// The value as compact JSON text.
  public var compactText: [UInt8] {
    var random = FixedGenerator()
    return text(.compact, using: &random)
  }

  private func write(into out: inout [UInt8], _ style: Style, _ random: inout some RandomNumberGenerator) {
    func space() {
      guard style.spacing > 0, Double.random(in: 0..<1, using: &random) < style.spacing else { return }
      out.append(contentsOf: [" ", "\n", "\t", "\r\n  ", "  "].randomElement(using: &random)!.utf8)
    }
    switch self {
    case .null: out.append(contentsOf: "null".utf8)
    case .bool(let flag): out.append(contentsOf: (flag ? "true" : "false").utf8)
    case .number(let text):
      if style.respelling > 0, Double.random(in: 0..<1, using: &random) < style.respelling {
        out.append(contentsOf: TestJSON.respell(text, using: &random).utf8)
      } else {
        out.append(contentsOf: text.utf8)
      }
    case .string(let text): TestJSON.writeString(text, into: &out, style, &random)
    case .raw(let text): out.append(contentsOf: text.utf8)
    case .array(let items):
      out.append(UInt8(ascii: "["))
      for (index, item) in items.enumerated() {
        if index > 0 { out.append(UInt8(ascii: ",")) }
        space()
        item.write(into: &out, style, &random)
        space()
      }
      out.append(UInt8(ascii: "]"))
    case .object(let members):
      out.append(UInt8(ascii: "{"))
      for (index, member) in members.enumerated() {
        if index > 0 { out.append(UInt8(ascii: ",")) }
        space()
        TestJSON.writeString(member.key, into: &out, style, &random)
        space()
        out.append(UInt8(ascii: ":"))
        space()
        member.value.write(into: &out, style, &random)
        space()
      }
      out.append(UInt8(ascii: "}"))
    }
  }

  static func writeString(
    _ text: String, into out: inout [UInt8], _ style: Style, _ random: inout some RandomNumberGenerator
  ) {
    func escape(_ unit: UInt16) {
      let hex = String(unit, radix: 16, uppercase: Bool.random(using: &random))
      out.append(contentsOf: ("\\u" + String(repeating: "0", count: 4 - hex.count) + hex).utf8)
    }
    out.append(UInt8(ascii: "\""))
    for scalar in text.unicodeScalars {
      let escaping = style.escaping > 0 && Double.random(in: 0..<1, using: &random) < style.escaping
      switch scalar {
      case "\"": out.append(contentsOf: #"\""#.utf8)
      case "\\": out.append(contentsOf: #"\\"#.utf8)
      case "\n" where !escaping: out.append(contentsOf: #"\n"#.utf8)
      case "\t" where !escaping: out.append(contentsOf: #"\t"#.utf8)
      case "/" where escaping: out.append(contentsOf: #"\/"#.utf8)
      case _ where scalar.value < 0x20 || escaping:
        for unit in String(scalar).utf16 { escape(unit) }
      default:
        out.append(contentsOf: String(scalar).utf8)
      }
    }
    out.append(UInt8(ascii: "\""))
  }

  /// `text` (a JSON number) written another way with the same decimal value: the point moved and made up for
  /// by the exponent, zeros added after a fraction, `e` or `E`, a `+` or not.
  public static func respell(_ text: String, using random: inout some RandomNumberGenerator) -> String {
    // A number damaged on purpose is written as is.
    guard case .number = TestJSON(parsing: Array(text.utf8)) else { return text }
    var bytes = Substring(text)
    let negative = bytes.first == "-"
    if negative { bytes = bytes.dropFirst() }
    let mantissaEnd = bytes.firstIndex { $0 == "e" || $0 == "E" } ?? bytes.endIndex
    var exponent = mantissaEnd < bytes.endIndex ? Int(bytes[bytes.index(after: mantissaEnd)...])! : 0
    let mantissa = bytes[..<mantissaEnd]
    var digits = mantissa.filter { $0 != "." }
    if let point = mantissa.firstIndex(of: ".") {
      exponent -= mantissa.distance(from: point, to: mantissa.endIndex) - 1
    }
    // digits × 10^exponent. Drop leading zeros (keeping one digit).
    while digits.count > 1 && digits.first == "0" { digits.removeFirst() }
    if digits.allSatisfy({ $0 == "0" }) {
      digits = "0"
    }
    // Choose how many digits go before the point (1 ... count), then trailing zeros.
    let before = Int.random(in: 1...digits.count, using: &random)
    let zeros = Int.random(in: 0...2, using: &random)
    var written = String(digits.prefix(before))
    let after = String(digits.dropFirst(before)) + String(repeating: "0", count: zeros)
    if !after.isEmpty { written += "." + after }
    let shown = exponent + (digits.count - before)
    var result = (negative ? "-" : "") + written
    if shown != 0 || Bool.random(using: &random) {
      result += Bool.random(using: &random) ? "e" : "E"
      if shown >= 0 && Bool.random(using: &random) { result += "+" }
      result += String(shown)
    }
    return result
  }
}

/// A generator for writing without randomness (`compactText` draws nothing from it).
private struct FixedGenerator: RandomNumberGenerator {
  mutating func next() -> UInt64 { 0 }
}
