/// A configuration problem, named by file, line and key: `broker.toml:12: limits.connections: must be from 1 to
/// 1000000 (got 0)`.
public struct ConfigError: Error, Equatable, Sendable, CustomStringConvertible {
  public var file: String
  /// The line of the key (or of the syntax error), when known.
  public var line: Int?
  /// The dotted key, e.g. `auth.tokens[1].workspaces`; empty for a syntax error.
  public var key: String
  public var message: String

  public init(file: String, line: Int?, key: String, message: String) {
    self.file = file
    self.line = line
    self.key = key
    self.message = message
  }

  public var description: String {
    let place = line.map { "\(file):\($0)" } ?? file
    return key.isEmpty ? "\(place): \(message)" : "\(place): \(key): \(message)"
  }
}

/// Reads a TOML configuration file strictly: every key must be read by the program (an unknown key is an error
/// that names it and its line), and every value must have the right type and range.
///
/// toml++ parses (through the CTOML shim, `TOMLNode`); `KeyLines` finds the line of each key in the text, which
/// also gives a key that is absent the line of its table's header.
public final class ConfigReader {
  public let file: String
  let lines: KeyLines
  let root: [String: TOMLNode]

  /// Parses `text`; a syntax error names its line.
  public init(text: String, file: String) throws(ConfigError) {
    self.file = file
    lines = KeyLines(text)
    switch TableHeaderCheck.firstProblem(in: text) {
    case (let line, .header(let character))?:
      throw ConfigError(
        file: file, line: line, key: "",
        message: "invalid table header: a key starts with a letter, a digit, _, - or a quote "
          + "(saw '\(character.escaped(asASCII: false))')")
    case (let line, .dateTime(let character))?:
      let saw = character.map { "'\($0.escaped(asASCII: false))'" } ?? "the end"
      throw ConfigError(
        file: file, line: line, key: "", message: "invalid date-time: a time must follow the T (saw \(saw))")
    case nil:
      break
    }
    do throws(TOMLSyntaxError) {
      root = try TOMLNode.parse(text)
    } catch {
      throw ConfigError(file: file, line: error.line, key: "", message: error.message)
    }
  }

  /// The whole document as a table.
  public var document: ConfigTable { ConfigTable(reader: self, table: root, path: "") }
}

/// One table of the configuration, with typed, range-checked reads that remember which keys were read.
public final class ConfigTable {
  let reader: ConfigReader
  /// nil for a table the file does not have (every read gives its default).
  let table: [String: TOMLNode]?
  /// The dotted path of this table ("" for the document).
  public let path: String
  private var read: Set<String> = []

  init(reader: ConfigReader, table: [String: TOMLNode]?, path: String) {
    self.reader = reader
    self.table = table
    self.path = path
  }

  func keyPath(_ key: String) -> String { path.isEmpty ? key : "\(path).\(key)" }

  /// An error about `key` of this table, with its line.
  public func error(_ key: String, _ message: String) -> ConfigError {
    let full = keyPath(key)
    // A missing key has no line of its own: point at its table's header.
    let line = reader.lines.line(of: full) ?? (path.isEmpty ? nil : reader.lines.line(of: path))
    return ConfigError(file: reader.file, line: line, key: full, message: message)
  }

  private func value(_ key: String) -> TOMLNode? {
    read.insert(key)
    return table?[key]
  }

  public func string(_ key: String, default fallback: String) throws(ConfigError) -> String {
    guard let value = value(key) else { return fallback }
    guard let string = value.string else { throw error(key, "must be a string") }
    return string
  }

  /// Whether the table sets `key` (whatever its value; this does not count as reading it).
  public func contains(_ key: String) -> Bool { table?[key] != nil }

  public func optionalString(_ key: String) throws(ConfigError) -> String? {
    guard let value = value(key) else { return nil }
    guard let string = value.string else { throw error(key, "must be a string") }
    return string
  }

  public func int(_ key: String, default fallback: Int, range: ClosedRange<Int>) throws(ConfigError) -> Int {
    guard let value = value(key) else { return fallback }
    guard let int = value.int else { throw error(key, "must be an integer") }
    guard range.contains(int) else {
      throw error(key, "must be from \(range.lowerBound) to \(range.upperBound) (got \(int))")
    }
    return int
  }

  public func bool(_ key: String, default fallback: Bool) throws(ConfigError) -> Bool {
    guard let value = value(key) else { return fallback }
    guard let bool = value.bool else { throw error(key, "must be true or false") }
    return bool
  }

  public func choice(_ key: String, default fallback: String, from choices: [String]) throws(ConfigError)
    -> String
  {
    let value = try string(key, default: fallback)
    guard choices.contains(value) else {
      throw error(
        key, "must be one of \(choices.map { "\"\($0)\"" }.joined(separator: ", ")) (got \"\(value)\")")
    }
    return value
  }

  public func stringArray(_ key: String, default fallback: [String]) throws(ConfigError) -> [String] {
    guard let value = value(key) else { return fallback }
    guard let array = value.array else { throw error(key, "must be an array of strings") }
    var strings: [String] = []
    for element in array {
      guard let string = element.string else { throw error(key, "must be an array of strings") }
      strings.append(string)
    }
    return strings
  }

  /// A key that may be one string or an array of strings: the strings, and whether the file wrote an array (for
  /// errors that name an element by its index). `fallback` (one string) when absent.
  public func stringOrArray(_ key: String, default fallback: String) throws(ConfigError) -> (
    strings: [String], isArray: Bool
  ) {
    guard let value = value(key) else { return ([fallback], false) }
    if let string = value.string { return ([string], false) }
    let message = "must be a string or an array of strings"
    guard let array = value.array else { throw error(key, message) }
    var strings: [String] = []
    for element in array {
      guard let string = element.string else { throw error(key, message) }
      strings.append(string)
    }
    return (strings, true)
  }

  /// A sub-table, empty when absent.
  public func table(_ key: String) throws(ConfigError) -> ConfigTable {
    guard let value = value(key) else {
      return ConfigTable(reader: reader, table: nil, path: keyPath(key))
    }
    guard let table = value.table else { throw error(key, "must be a table ([\(keyPath(key))])") }
    return ConfigTable(reader: reader, table: table, path: keyPath(key))
  }

  /// An array of tables (`[[key]]`), empty when absent.
  public func tables(_ key: String) throws(ConfigError) -> [ConfigTable] {
    guard let value = value(key) else { return [] }
    guard let array = value.array else {
      throw error(key, "must be an array of tables ([[\(keyPath(key))]])")
    }
    var tables: [ConfigTable] = []
    for (index, element) in array.enumerated() {
      guard let table = element.table else {
        throw error(key, "must be an array of tables ([[\(keyPath(key))]])")
      }
      tables.append(ConfigTable(reader: reader, table: table, path: "\(keyPath(key))[\(index)]"))
    }
    return tables
  }

  /// Fails on the first key of this table that nothing read (sub-tables check their own).
  public func rejectUnknownKeys() throws(ConfigError) {
    for key in (table.map { Array($0.keys) } ?? []).sorted() where !read.contains(key) {
      throw error(key, "unknown key")
    }
  }
}

/// The line of each key in a TOML text: tracks `[table]` and `[[array]]` headers and `key =` lines. Good enough
/// to point at a key in a configuration file; not a TOML parser.
struct KeyLines {
  private var lines: [String: Int] = [:]

  init(_ text: String) {
    var table = ""
    var arrayCounts: [String: Int] = [:]
    for (number, raw) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
      let line = raw.trimmingCharacters(in: " \t\r")
      if line.isEmpty || line.hasPrefix("#") { continue }
      if line.hasPrefix("[[") {
        let name = String(line.dropFirst(2).prefix { $0 != "]" }).trimmingCharacters(in: " \t")
        let index = arrayCounts[name, default: 0]
        arrayCounts[name] = index + 1
        table = "\(name)[\(index)]"
        record(table, number + 1)
        record(name, number + 1)
      } else if line.hasPrefix("[") {
        table = String(line.dropFirst().prefix { $0 != "]" }).trimmingCharacters(in: " \t")
        record(table, number + 1)
      } else if let equals = line.firstIndex(of: "=") {
        var key = String(line[..<equals]).trimmingCharacters(in: " \t")
        if key.hasPrefix("\"") && key.hasSuffix("\"") && key.count >= 2 {
          key = String(key.dropFirst().dropLast())
        }
        record(table.isEmpty ? key : "\(table).\(key)", number + 1)
      }
    }
  }

  /// Records `key` and, for a dotted key, each of its prefixes (`[a.b]` defines `a` there too).
  private mutating func record(_ key: String, _ line: Int) {
    if lines[key] == nil { lines[key] = line }
    var prefix = key
    while let dot = prefix.lastIndex(of: ".") {
      prefix = String(prefix[..<dot])
      if lines[prefix] == nil { lines[prefix] = line }
    }
  }

  func line(of key: String) -> Int? { lines[key] }
}

extension StringProtocol {
  func trimmingCharacters(in set: String) -> String {
    let characters = Set(set)
    guard let start = firstIndex(where: { !characters.contains($0) }) else { return "" }
    let end = lastIndex(where: { !characters.contains($0) })!
    return String(self[start...end])
  }
}
