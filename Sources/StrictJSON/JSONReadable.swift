/// A type with a hand-written strict decoder: `init(reading:)` reads exactly one value (and nothing else) from
/// the reader, or throws. The types that also conform to `Decodable` must read the same value from every text
/// `JSONDecoder` decodes, and refuse every text it refuses (stricter only where docs/protocol.md says).
///
/// A decoder that throws a `JSONReadError` other than a syntax error may leave the reader anywhere inside its
/// value: the caller resets the reader to the value's start and skips it (`read(_:_:as:)` does).
public protocol JSONReadable {
  init(reading reader: inout JSONReader) throws(JSONReadError)
}

/// A type that a JSON object's key converts to, for dictionaries keyed by it (as `CodingKeyRepresentable`).
public protocol JSONKeyReadable: Hashable {
  /// The key's value, or nil when the key is not one (`Could not convert key to type ...`).
  init?(jsonKey: String)
}

/// One member of an object being decoded, as a `Decodable` type's container sees it: absent, `null`, a value,
/// or a value that does not fit the member's type. The last is an error only if the member is used: a type
/// whose members depend on another member (a mutation's `type`) reads them all, then uses what it needs.
public enum JSONField<Value> {
  case absent
  /// `null`, at this offset.
  case null(Int)
  case value(Value)
  /// The error of a value that did not fit (its path ends at the member). Boxed: rare, and it would make every
  /// field as large as an error.
  indirect case failed(JSONReadError)

  /// `decode(_:forKey:)`: the value; absent is `missing field "name"`, null is `ifNull` (each type words it as
  /// `JSONDecoder` does). `objectOffset` is the offset the missing-field error gives (the object's start).
  @inlinable
  public func required(
    _ name: String, objectOffset: Int, ifNull: (Int) -> JSONReadError
  ) throws(JSONReadError) -> Value {
    switch self {
    case .absent: throw .missingField(name, at: objectOffset)
    case .null(let offset): throw ifNull(offset).inside(.key(name))
    case .value(let value): return value
    case .failed(let error): throw error
    }
  }

  /// `decodeIfPresent(_:forKey:)`: the value, nil when absent or null.
  @inlinable
  public func optional() throws(JSONReadError) -> Value? {
    switch self {
    case .absent, .null: return nil
    case .value(let value): return value
    case .failed(let error): throw error
    }
  }
}

extension JSONReader {
  /// Reads the current member's value into `field`, as a `T`: unless the field already has one (the first of
  /// duplicate keys wins, as in `JSONDecoder`), in which case the value is skipped. A value that does not fit is
  /// kept as `.failed` and skipped; a syntax error is thrown.
  @inlinable
  public mutating func read<T: JSONReadable>(
    _ field: inout JSONField<T>, _ name: StaticString, as type: T.Type
  ) throws(JSONReadError) {
    guard case .absent = field else {
      try skipValue()
      return
    }
    let start = position
    let startDepth = depth
    do {
      skipWhitespace()
      if position < bytes.count && bytes[position] == UInt8(ascii: "n") {
        _ = try readNull()
        field = .null(start)
        return
      }
      field = .value(try T(reading: &self))
    } catch {
      let error = error.inside(.key("\(name)"))
      if error.isSyntaxError { throw error }
      position = start
      depth = startDepth
      do {
        try skipValue()
      } catch {
        throw error.inside(.key("\(name)"))
      }
      field = .failed(error)
    }
  }
}

extension String: JSONReadable {
  public init(reading reader: inout JSONReader) throws(JSONReadError) {
    self = try reader.readString()
  }
}

extension String: JSONKeyReadable {
  public init?(jsonKey: String) { self = jsonKey }
}

extension Bool: JSONReadable {
  public init(reading reader: inout JSONReader) throws(JSONReadError) {
    self = try reader.readBool()
  }
}

extension UInt64: JSONReadable {
  public init(reading reader: inout JSONReader) throws(JSONReadError) {
    self = try reader.readUInt64()
  }
}

extension Int: JSONReadable {
  public init(reading reader: inout JSONReader) throws(JSONReadError) {
    self = try reader.readInt()
  }
}

extension Double: JSONReadable {
  public init(reading reader: inout JSONReader) throws(JSONReadError) {
    self = try reader.readDouble()
  }
}

extension Array: JSONReadable where Element: JSONReadable {
  /// The elements in order; the first that fails ends the decoding, with its index in the path.
  @inlinable
  public init(reading reader: inout JSONReader) throws(JSONReadError) {
    self = []
    var elements = try reader.beginArray()
    while try reader.nextElement(&elements) {
      do {
        append(try Element(reading: &reader))
      } catch {
        throw error.inside(.index(elements.index))
      }
    }
  }
}

extension Dictionary: JSONReadable where Key: JSONKeyReadable, Value: JSONReadable {
  /// Every member, the first of duplicate keys winning (as `JSONDecoder`, whose keys are compared as strings:
  /// `"é"` written precomposed or not is one key, spelled as first written). A key that does not convert is
  /// `Could not convert key to type K`.
  @inlinable
  public init(reading reader: inout JSONReader) throws(JSONReadError) {
    self = Dictionary(minimumCapacity: try reader.countMembers())
    var members = try reader.beginObject()
    while let key = try reader.nextKey(&members) {
      let text = key.string
      let start = reader.offset
      let startDepth = reader.depth
      guard let converted = Key(jsonKey: text) else {
        throw JSONReadError.invalidValue("Could not convert key to type \(Key.self)", at: start).inside(
          .dictionaryKey(text))
      }
      let value: Value
      do {
        value = try Value(reading: &reader)
      } catch {
        // A later duplicate's value is never decoded by JSONDecoder: its mismatch is no error (its syntax is).
        if !error.isSyntaxError && self[converted] != nil {
          reader.position = start
          reader.depth = startDepth
          do {
            try reader.skipValue()
          } catch {
            throw error.inside(.dictionaryKey(text))
          }
          continue
        }
        throw error.inside(.dictionaryKey(text))
      }
      Self.insertIfAbsent(&self[converted], value)
    }
  }

  /// Sets `slot` (one dictionary lookup through the subscript's accessor) unless it holds a value.
  @inlinable static func insertIfAbsent(_ slot: inout Value?, _ value: Value) {
    if slot == nil { slot = value }
  }
}
