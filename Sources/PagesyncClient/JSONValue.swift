import FoundationEssentials
import Web

/// A JSON value: what the daemon's local API answers and what is sent to it; a page's property values.
///
/// `pagesync` reads answers into this rather than into the typed answers so that its human output can show what
/// is there and skip what is not (the daemon may add fields), while `--json` passes the answer's bytes through.
public enum JSONValue: Equatable, Sendable {
  case null
  case bool(Bool)
  /// A number written without a fraction or exponent that fits in 64 bits (ids, counts, times, sequences).
  case integer(Int64)
  case number(Double)
  case string(String)
  case array([JSONValue])
  case object([String: JSONValue])

  /// Why bytes are not one JSON value.
  public struct ParseError: Error, Sendable, CustomStringConvertible {
    public var description: String
  }

  /// Parses `bytes` as exactly one JSON value (UTF-8; surrounding whitespace allowed).
  public init(parsing bytes: [UInt8]) throws(ParseError) {
    do {
      self = try JSONDecoder().decode(JSONValue.self, from: Data(bytes))
    } catch let error as DecodingError {
      throw ParseError(description: JSONValue.describe(error))
    } catch {
      throw ParseError(description: "\(error)")
    }
  }

  private static func describe(_ error: DecodingError) -> String {
    switch error {
    case .dataCorrupted(let context): context.debugDescription
    case .typeMismatch(_, let context), .valueNotFound(_, let context), .keyNotFound(_, let context):
      context.debugDescription
    @unknown default: "\(error)"
    }
  }

  // MARK: Reading

  /// The member `key` of an object; nil for another value or a missing key.
  public subscript(key: String) -> JSONValue? {
    if case .object(let members) = self { return members[key] }
    return nil
  }

  public var stringValue: String? {
    if case .string(let text) = self { return text }
    return nil
  }

  public var boolValue: Bool? {
    if case .bool(let flag) = self { return flag }
    return nil
  }

  /// The value of an integer, or of a number that is a whole one.
  public var integerValue: Int64? {
    switch self {
    case .integer(let value): return value
    case .number(let value):
      guard value.rounded() == value, abs(value) < 9.0e15 else { return nil }
      return Int64(value)
    default: return nil
    }
  }

  public var arrayValue: [JSONValue]? {
    if case .array(let items) = self { return items }
    return nil
  }

  public var objectValue: [String: JSONValue]? {
    if case .object(let members) = self { return members }
    return nil
  }

  public var isNull: Bool { self == .null }

  // MARK: Writing

  /// Compact JSON text. Object members are sorted by name so that the same value is always the same text.
  public var jsonText: String {
    var out = ""
    write(into: &out)
    return out
  }

  private func write(into out: inout String) {
    switch self {
    case .null: out += "null"
    case .bool(let flag): out += flag ? "true" : "false"
    case .integer(let value): out += String(value)
    case .number(let value): out += JSONValue.numberText(value)
    case .string(let text): JSONValue.writeQuoted(text, into: &out)
    case .array(let items):
      out += "["
      for (index, item) in items.enumerated() {
        if index > 0 { out += "," }
        item.write(into: &out)
      }
      out += "]"
    case .object(let members):
      out += "{"
      for (index, name) in members.keys.sorted().enumerated() {
        if index > 0 { out += "," }
        JSONValue.writeQuoted(name, into: &out)
        out += ":"
        members[name]!.write(into: &out)
      }
      out += "}"
    }
  }

  /// A finite number as JSON: whole numbers without `.0` (what a person typed as `3` goes out as `3`).
  package static func numberText(_ value: Double) -> String {
    precondition(value.isFinite, "JSON has no infinite or NaN numbers")
    if value.rounded() == value, abs(value) < 9.0e15 { return String(Int64(value)) }
    return "\(value)"
  }

  static func writeQuoted(_ text: String, into out: inout String) { out += jsonQuoted(text) }
}

extension JSONValue: Decodable {
  public init(from decoder: any Decoder) throws {
    let container = try decoder.singleValueContainer()
    if container.decodeNil() {
      self = .null
    } else if let flag = try? container.decode(Bool.self) {
      // Before numbers: JSON true and false decode as Bool only.
      self = .bool(flag)
    } else if let value = try? container.decode(Int64.self) {
      self = .integer(value)
    } else if let value = try? container.decode(Double.self) {
      self = .number(value)
    } else if let text = try? container.decode(String.self) {
      self = .string(text)
    } else if let items = try? container.decode([JSONValue].self) {
      self = .array(items)
    } else {
      self = .object(try container.decode([String: JSONValue].self))
    }
  }
}
