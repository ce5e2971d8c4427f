/// Why bytes could not be read as a value: where (the path of keys and indices to it, and the byte offset) and
/// what. Its `description` is one line in the style of `JSONBodies.describe`, `at mutations[3].page: ...`.
///
/// Syntax errors (the bytes are not one strict RFC 8259 JSON text) are told apart from the others, which say
/// that well-formed JSON does not fit the type: a decoder reports a syntax error anywhere in the text before
/// any other, as `JSONDecoder` does (it parses the whole text first).
public struct JSONReadError: Error, Sendable, CustomStringConvertible {
  /// What kind of problem it is.
  public enum Kind: Sendable, Equatable {
    /// The bytes are not strict JSON (RFC 8259): the message says what was expected, at `offset`.
    case syntax
    /// A value of another JSON type than the field's (a number for a string, an array for an object).
    case typeMismatch
    /// `null` where a value is required.
    case nullValue
    /// A required member is absent.
    case missingField
    /// A number that the field's integer type cannot hold: negative, fractional or too large.
    case numberDoesNotFit
    /// A number written with a fraction or an exponent for an integer field that is not exactly a whole number
    /// below 2^53. `JSONDecoder` rounds or truncates these (`1.0000000000000000001` reads as 1,
    /// `9007199254740993.5` as 9007199254740993); this reader refuses them (docs/protocol.md).
    case inexactInteger
    /// A number beyond a double's range (its magnitude rounds to infinity, or to zero but it is not zero).
    case numberOutOfRange
    /// A value the type's own rules refuse (an invalid id, an unknown mutation type, ...): the message says which.
    case invalidValue
  }

  public var kind: Kind
  /// What is wrong, without the path.
  public var message: String
  /// The byte offset (from the start of the input) where the problem was found.
  public var offset: Int
  /// The path's components, innermost first: each container adds its own as the error leaves it.
  private var reversedPath: [JSONPathComponent] = []

  public init(_ kind: Kind, _ message: String, at offset: Int) {
    self.kind = kind
    self.message = message
    self.offset = offset
  }

  /// Keys and indices from the top-level value to where the problem is.
  public var path: [JSONPathComponent] { reversedPath.reversed() }

  public var isSyntaxError: Bool { kind == .syntax }

  /// The same error seen from the container that holds the value: `component` goes in front of the path.
  public func inside(_ component: JSONPathComponent) -> JSONReadError {
    var error = self
    error.reversedPath.append(component)
    return error
  }

  /// `at PATH: MESSAGE`, the path written as `JSONBodies.describe` writes a coding path (`mutations[3].page`,
  /// `pages.home`); syntax errors end with the byte offset.
  public var description: String {
    var text = ""
    for component in reversedPath.reversed() {
      switch component {
      case .key(let name): text += "." + name
      case .index(let index): text += "[\(index)]"
      case .dictionaryKey(let key):
        // A dictionary's coding key has an integer value when its text is one (Swift's _DictionaryCodingKey),
        // and JSONBodies.describe writes those as an index: keep the same path for the same input.
        if let index = Int(key) { text += "[\(index)]" } else { text += "." + key }
      }
    }
    if text.hasPrefix(".") { text.removeFirst() }
    let place = text.isEmpty ? "" : "at \(text): "
    return kind == .syntax ? "\(place)\(message) (byte \(offset))" : place + message
  }
}

/// One step of the path to a value: a struct's member, an array's index or a dictionary's key.
public enum JSONPathComponent: Sendable, Equatable {
  case key(String)
  case index(Int)
  case dictionaryKey(String)
}

/// The JSON type of a value, as error messages name it.
public enum JSONValueKind: Sendable, Equatable {
  case object, array, string, number, bool, null

  /// As `JSONDecoder` says what it found (`found a string instead`).
  var foundDescription: String {
    switch self {
    case .object: "a dictionary"
    case .array: "an array"
    case .string: "a string"
    case .number: "number"
    case .bool: "bool"
    case .null: "null"
    }
  }
}

extension JSONReadError {
  /// A value of the wrong JSON type, worded as `JSONDecoder` words it: `Expected to decode String but found
  /// number instead.`
  public static func typeMismatch(expected typeName: String, found: JSONValueKind, at offset: Int)
    -> JSONReadError
  {
    JSONReadError(
      .typeMismatch, "Expected to decode \(typeName) but found \(found.foundDescription) instead.", at: offset
    )
  }

  /// `null` for a required scalar: `Cannot get value of type UInt64 -- found null value instead`.
  public static func nullValue(expected typeName: String, at offset: Int) -> JSONReadError {
    JSONReadError(.nullValue, "Cannot get value of type \(typeName) -- found null value instead", at: offset)
  }

  /// `null` for a required object (`keyed: true`) or array.
  public static func nullContainer(keyed: Bool, at offset: Int) -> JSONReadError {
    JSONReadError(
      .nullValue, "Cannot get \(keyed ? "keyed" : "unkeyed") decoding container -- found null value instead",
      at: offset)
  }

  /// A required member that is absent: `missing field "title"`.
  public static func missingField(_ name: String, at offset: Int) -> JSONReadError {
    JSONReadError(.missingField, "missing field \"\(name)\"", at: offset)
  }

  /// A value its type refuses, with the type's own message.
  public static func invalidValue(_ message: String, at offset: Int) -> JSONReadError {
    JSONReadError(.invalidValue, message, at: offset)
  }

  static func syntax(_ message: String, at offset: Int) -> JSONReadError {
    JSONReadError(.syntax, message, at: offset)
  }
}
