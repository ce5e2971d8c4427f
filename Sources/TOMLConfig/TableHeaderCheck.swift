/// Finds a table header that toml++ cannot be given: one whose key starts with a character that starts no key
/// (`[=]`, `[.a]`, `[[[x]]]`, `[é]`, `[` at the end of a line).
///
/// toml++ (TOMLKit 0.6 bundles a version from before marzer/tomlplusplus#301) calls its key parser on such a
/// header without checking the first character, and that parser asserts it: a debug build aborts
/// (`Assertion 'is_bare_key_character(*cp) || is_string_delimiter(*cp)' failed`), and a release build, where
/// the assertion is an optimizer assumption, has undefined behaviour. Found by FuzzConfig. The check follows the
/// TOML lexically (strings of the four kinds, comments, brackets of values that span lines) so that it looks
/// only where toml++ reads a header, and refuses only what toml++ would refuse anyway.
///
/// It also finds a value that is a date followed by `T` or `t` and no digit (`1979-05-27T:`): toml++ takes it for
/// a date-time when a `:` follows within its look-ahead and asserts the time's first digit
/// (`Assertion 'is_decimal_digit(*cp)' failed` in `parse_time`). Found by FuzzConfig in CI. Such a value is never
/// valid TOML.
enum TableHeaderCheck {
  /// What `firstProblem` found.
  enum Problem: Equatable {
    /// A table header whose key starts with `character`.
    case header(Unicode.Scalar)
    /// A date then `T`/`t` then `character` (or nothing), not a time.
    case dateTime(Unicode.Scalar?)
  }

  /// The 1-based line and the character of the first such header, or nil.
  static func firstBadHeader(in text: String) -> (line: Int, character: Unicode.Scalar)? {
    guard let (line, problem) = firstProblem(in: text), case .header(let character) = problem else {
      return nil
    }
    return (line, character)
  }

  /// The 1-based line of the first text toml++ cannot be given, and what it is, or nil.
  ///
  /// Works on Unicode scalars, as toml++ does: a `Character` would join `\r\n` into one.
  static func firstProblem(in text: String) -> (line: Int, problem: Problem)? {
    let characters = Array(text.unicodeScalars)
    // toml++ skips a byte order mark.
    var index = characters.first == "\u{FEFF}" ? 1 : 0
    var line = 1
    /// Brackets and braces of values open at this point (a header can only start at depth 0).
    var depth = 0
    var atStatementStart = true
    /// The last character that was not blank: a value starts after `=`, `[` or `,`.
    var previous: Unicode.Scalar = "\n"

    func at(_ offset: Int) -> Unicode.Scalar? {
      index + offset < characters.count ? characters[index + offset] : nil
    }
    func startsWith(_ token: String) -> Bool {
      token.unicodeScalars.enumerated().allSatisfy { at($0.offset) == $0.element }
    }
    /// Skips a string opened at `index` by `quote` (one or three of them).
    func skipString(_ quote: String, escapes: Bool) {
      index += quote.unicodeScalars.count
      while index < characters.count {
        if escapes && characters[index] == "\\" {
          if at(1) == "\n" { line += 1 }
          index += 2
          continue
        }
        if startsWith(quote) {
          index += quote.unicodeScalars.count
          return
        }
        if characters[index] == "\n" {
          // A one-line string ends at the line's end (it is a syntax error toml++ reports).
          if quote.unicodeScalars.count == 1 { return }
          line += 1
        }
        index += 1
      }
    }

    while index < characters.count {
      let character = characters[index]
      if character == "\n" {
        line += 1
        index += 1
        if depth == 0 { atStatementStart = true }
        continue
      }
      if character == " " || character == "\t" || character == "\r" {
        index += 1
        continue
      }
      if atStatementStart && character == "[" {
        // toml++'s parse_table_header: `[`, whitespace, an optional second `[` (whitespace before it is its own
        // error), whitespace, then `]` (its own error) or the key.
        var cursor = index + 1
        func skipBlanks() {
          while cursor < characters.count && (characters[cursor] == " " || characters[cursor] == "\t") {
            cursor += 1
          }
        }
        skipBlanks()
        if cursor < characters.count && characters[cursor] == "[" && cursor == index + 1 {
          cursor += 1
          skipBlanks()
        }
        if cursor < characters.count {
          let first = characters[cursor]
          let startsKey =
            first == "]" || first == "\"" || first == "'" || first == "_" || first == "-"
            || ("a"..."z").contains(first) || ("A"..."Z").contains(first) || ("0"..."9").contains(first)
          if !startsKey { return (line, .header(first)) }
        }
        // The rest of a header line is the header and perhaps a comment.
        while index < characters.count && characters[index] != "\n" { index += 1 }
        continue
      }
      atStatementStart = false
      defer { previous = character }
      if ("0"..."9").contains(character) && (previous == "=" || previous == "[" || previous == ",") {
        // YYYY-MM-DD then T or t: a digit must follow.
        let pattern = Array("dddd-dd-dd".unicodeScalars)
        let isDate = pattern.indices.allSatisfy { offset in
          guard let scalar = at(offset) else { return false }
          return pattern[offset] == "d" ? ("0"..."9").contains(scalar) : scalar == pattern[offset]
        }
        if isDate, let separator = at(pattern.count), separator == "T" || separator == "t" {
          let next = at(pattern.count + 1)
          if next.map({ !("0"..."9").contains($0) }) ?? true { return (line, .dateTime(next)) }
        }
      }
      switch character {
      case "#":
        while index < characters.count && characters[index] != "\n" { index += 1 }
      case "\"":
        skipString(startsWith("\"\"\"") ? "\"\"\"" : "\"", escapes: true)
      case "'":
        skipString(startsWith("'''") ? "'''" : "'", escapes: false)
      case "[", "{":
        depth += 1
        index += 1
      case "]", "}":
        depth = max(0, depth - 1)
        index += 1
      default:
        index += 1
      }
    }
    return nil
  }
}
