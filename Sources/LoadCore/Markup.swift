/// HTML and SVG text with every piece of data escaped: the plots' writer. Text and attribute values pass through
/// `escape`, so a report's notes or labels can never become markup (a note reading `<script>` stays text).
public struct Markup: Sendable {
  public private(set) var text = ""

  public init() {}

  /// `&`, `<`, `>`, `"` and `'` as character references: safe in text and in a quoted attribute value.
  public static func escape(_ raw: String) -> String {
    var out = ""
    out.reserveCapacity(raw.utf8.count)
    for character in raw {
      switch character {
      case "&": out += "&amp;"
      case "<": out += "&lt;"
      case ">": out += "&gt;"
      case "\"": out += "&quot;"
      case "'": out += "&#39;"
      default: out.append(character)
      }
    }
    return out
  }

  /// A number for a coordinate: at most 2 decimals, no exponent (`12.35`, `-0.5`, `0`).
  public static func coordinate(_ value: Double) -> String {
    guard value.isFinite else { return "0" }
    let hundredths = (value * 100).rounded()
    let whole = Int64(hundredths / 100)
    let fraction = Int64(abs(hundredths.truncatingRemainder(dividingBy: 100)))
    let sign = hundredths < 0 && whole == 0 ? "-" : ""
    guard fraction != 0 else { return sign + String(whole) }
    let digits = fraction < 10 ? "0" + String(fraction) : String(fraction)
    return sign + String(whole) + "." + (digits.hasSuffix("0") ? String(digits.dropLast()) : digits)
  }

  /// `<name a="v" ...>`; the attribute values escaped, names as given (never data).
  public mutating func open(_ name: String, _ attributes: [(String, String)] = []) {
    text += "<" + name + Self.attributes(attributes) + ">"
  }

  /// `<name a="v" .../>`.
  public mutating func empty(_ name: String, _ attributes: [(String, String)] = []) {
    text += "<" + name + Self.attributes(attributes) + "/>"
  }

  public mutating func close(_ name: String) { text += "</" + name + ">" }

  /// `<name ...>escaped text</name>`.
  public mutating func element(_ name: String, _ attributes: [(String, String)] = [], text content: String) {
    open(name, attributes)
    text += Self.escape(content)
    close(name)
  }

  /// Escaped text.
  public mutating func append(text content: String) { text += Self.escape(content) }

  /// Markup made elsewhere (another `Markup`'s text), as is.
  public mutating func append(markup: String) { text += markup }

  static func attributes(_ attributes: [(String, String)]) -> String {
    attributes.map { " " + $0.0 + "=\"" + escape($0.1) + "\"" }.joined()
  }
}
