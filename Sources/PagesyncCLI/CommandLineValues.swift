import PagesyncClient
import SyncModel

/// Why a command-line value was refused. swift-argument-parser prints it after the option and the value
/// (`The value 'a b' is invalid for '--id <id>': invalid id "a b": ...`) and exits 64.
public struct CommandLineValueError: Error, Equatable, Sendable, CustomStringConvertible {
  public var description: String
  public init(_ description: String) { self.description = description }
}

/// An id given on the command line, checked here so that a bad one is a usage error naming it rather than a
/// round trip to the daemon.
@Sendable func parseEntityID(_ text: String) throws -> EntityID {
  try EntityID(validating: text)
}

/// `NAME=VALUE` of `--set` and `--filter`: VALUE follows SyncModel's command-line rule (JSON number, boolean
/// or list of strings as that; anything else, the empty text included, a string).
public struct PropertyAssignment: Equatable, Sendable {
  public var name: String
  public var value: PropertyValue

  public init(name: String, value: PropertyValue) {
    self.name = name
    self.value = value
  }

  /// Splits at the first `=`: a name cannot hold one, a value can (`--set Formula=a=b`).
  public init(parsing text: String) throws(CommandLineValueError) {
    guard let equals = text.firstIndex(of: "=") else {
      throw CommandLineValueError("expected NAME=VALUE (\"\(text)\" has no =)")
    }
    let name = String(text[..<equals])
    guard !name.isEmpty else { throw CommandLineValueError("expected NAME=VALUE (the name is empty)") }
    self.name = name
    value = PropertyValue(commandLineText: String(text[text.index(after: equals)...]))
  }

  @Sendable static func parse(_ text: String) throws -> PropertyAssignment {
    try PropertyAssignment(parsing: text)
  }
}

/// `--sort NAME[:desc]` (`:asc` is accepted too). A name that itself ends in `:desc` can be given as
/// `NAME:desc:asc`.
public struct SortOrder: Equatable, Sendable {
  public var property: String
  public var descending: Bool

  public init(property: String, descending: Bool) {
    self.property = property
    self.descending = descending
  }

  public init(parsing text: String) throws(CommandLineValueError) {
    var name = Substring(text)
    descending = false
    if name.hasSuffix(":desc") {
      descending = true
      name = name.dropLast(5)
    } else if name.hasSuffix(":asc") {
      name = name.dropLast(4)
    }
    guard !name.isEmpty else { throw CommandLineValueError("expected NAME or NAME:desc (the name is empty)") }
    property = String(name)
  }

  @Sendable static func parse(_ text: String) throws -> SortOrder { try SortOrder(parsing: text) }
}

/// A property name of `--unset`.
@Sendable func parsePropertyName(_ text: String) throws -> String {
  guard !text.isEmpty else { throw CommandLineValueError("a property name cannot be empty") }
  guard !text.contains("=") else {
    throw CommandLineValueError("expected a property name alone (to set a value use --set NAME=VALUE)")
  }
  return text
}

/// A block type: `text`, `heading`, `todo`, `child_page`, `child_database`, or any `[a-z_]{1,32}`
/// (docs/protocol.md, `add_block`).
@Sendable func parseBlockType(_ text: String) throws -> String {
  let valid =
    (1...32).contains(text.utf8.count)
    && text.utf8.allSatisfy {
      ($0 >= UInt8(ascii: "a") && $0 <= UInt8(ascii: "z")) || $0 == UInt8(ascii: "_")
    }
  guard valid else {
    throw CommandLineValueError("a block type is 1 to 32 of a-z and _ (text, heading, todo, ...)")
  }
  return text
}

/// The properties object of `--set` assignments, with no name given twice.
func propertiesObject(_ assignments: [PropertyAssignment], unset: [String] = []) throws(CommandLineValueError)
  -> [String: JSONValue]
{
  var members: [String: JSONValue] = [:]
  for assignment in assignments {
    guard members[assignment.name] == nil else {
      throw CommandLineValueError("property \"\(assignment.name)\" is given twice")
    }
    members[assignment.name] = JSONValue(assignment.value)
  }
  for name in unset {
    if let earlier = members[name] {
      throw CommandLineValueError(
        earlier.isNull ? "property \"\(name)\" is given twice" : "property \"\(name)\" is both set and unset")
    }
    members[name] = .null
  }
  return members
}

extension JSONValue {
  /// A property value as the local API takes it.
  init(_ value: PropertyValue) {
    switch value {
    case .string(let text): self = .string(text)
    case .number(let number): self = .number(number)
    case .bool(let flag): self = .bool(flag)
    case .list(let items): self = .array(items.map(JSONValue.string))
    }
  }
}
