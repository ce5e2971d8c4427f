/// Builds an HTML document in which only string literals of the program are markup: every other string goes
/// in escaped, as text or as an attribute's value.
///
/// Tag names, attribute names and `markup` are `StaticString`s, so a value computed at run time (a path from
/// the configuration, an address, a number) cannot become markup by accident: it has no way in but `text` and
/// attribute values, which `escape` (`& < > " '`).
struct HTMLWriter {
  private(set) var html = ""

  init() { html.reserveCapacity(16 * 1024) }

  /// `literal` as it is: markup written in this program.
  mutating func markup(_ literal: StaticString) { html += literal.description }

  /// `text`, escaped.
  mutating func text(_ text: String) { html += Self.escape(text) }

  /// `<tag attributes…>`: each value escaped, in double quotes.
  mutating func open(_ tag: StaticString, _ attributes: [(StaticString, String)] = []) {
    html += "<\(tag)"
    for (name, value) in attributes { html += " \(name)=\"\(Self.escape(value))\"" }
    html += ">"
  }

  mutating func close(_ tag: StaticString) { html += "</\(tag)>" }

  /// `<tag>text</tag>`.
  mutating func element(_ tag: StaticString, _ text: String) { element(tag, [], text) }

  /// `<tag attributes…>text</tag>`.
  mutating func element(_ tag: StaticString, _ attributes: [(StaticString, String)], _ text: String) {
    open(tag, attributes)
    self.text(text)
    close(tag)
  }

  /// `text` with `&`, `<`, `>`, `"` and `'` replaced by their character references: safe between tags and inside a
  /// quoted attribute value.
  static func escape(_ text: String) -> String {
    guard text.utf8.contains(where: { $0 == 0x26 || $0 == 0x3C || $0 == 0x3E || $0 == 0x22 || $0 == 0x27 })
    else { return text }
    var escaped = ""
    escaped.reserveCapacity(text.utf8.count + 16)
    for character in text.unicodeScalars {
      switch character {
      case "&": escaped += "&amp;"
      case "<": escaped += "&lt;"
      case ">": escaped += "&gt;"
      case "\"": escaped += "&quot;"
      case "'": escaped += "&#39;"
      default: escaped.unicodeScalars.append(character)
      }
    }
    return escaped
  }
}
