import FoundationEssentials

/// The value of a page property: a string, a number, a boolean, or a list of strings. JSON as itself.
public enum PropertyValue: Hashable, Sendable {
  case string(String)
  case number(Double)
  case bool(Bool)
  case list([String])

  /// The command line's rule: text that parses as JSON and is a number, a boolean or a list of strings is
  /// stored as that; anything else (including a JSON string, `null` or an object) is the text itself.
  public init(commandLineText text: String) {
    if let data = text.data(using: .utf8),
      let value = try? JSONDecoder().decode(PropertyValue.self, from: data)
    {
      switch value {
      case .string: self = .string(text)
      default: self = value
      }
    } else {
      self = .string(text)
    }
  }
}

extension PropertyValue: Codable {
  public init(from decoder: any Decoder) throws {
    let container = try decoder.singleValueContainer()
    // JSON true/false decode as Bool only; try it before numbers.
    if let value = try? container.decode(Bool.self) {
      self = .bool(value)
    } else if let value = try? container.decode(Double.self) {
      guard value.isFinite else {
        throw DecodingError.dataCorruptedError(in: container, debugDescription: "a number must be finite")
      }
      self = .number(value)
    } else if let value = try? container.decode(String.self) {
      self = .string(value)
    } else if let value = try? container.decode([String].self) {
      self = .list(value)
    } else {
      throw DecodingError.dataCorruptedError(
        in: container,
        debugDescription: "a property value is a string, a number, a boolean or a list of strings")
    }
  }

  public func encode(to encoder: any Encoder) throws {
    var container = encoder.singleValueContainer()
    switch self {
    case .string(let value): try container.encode(value)
    case .number(let value): try container.encode(value)
    case .bool(let value): try container.encode(value)
    case .list(let value): try container.encode(value)
    }
  }
}
