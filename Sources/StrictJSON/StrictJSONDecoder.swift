/// A `Decodable` decoder over strict JSON: any `Decodable` type, decoded from text read with `JSONReader`, so
/// the syntax is exactly the strict reader's (docs/protocol.md, "Strict JSON") and every number is converted by
/// the strict reader's own rules. For answers from a peer not trusted to stay within what `JSONDecoder`
/// survives: `JSONDecoder` traps (SIGILL) on an integer written as `9007199254740993` followed by 300 nines and
/// `e-300`, in its `Decimal` fallback; no number reaches a `Decimal` here (docs/threat-model.md).
///
/// The whole text is read first into a tree (a syntax error anywhere is reported before any other, as
/// `JSONDecoder` does it); numbers keep their text and are converted only when the type asks for one. Then the
/// type decodes itself from the tree through the `Decoder` protocol, with `JSONDecoder`'s semantics for valid
/// input: the first of duplicate keys wins, keys are compared after their escapes are resolved (and as strings),
/// `decodeNil`, `decodeIfPresent`, `superDecoder` and nested containers behave as `JSONDecoder`'s do, and
/// errors are `DecodingError`s with the coding path and `JSONDecoder`'s wording. Differences, all on purpose:
///
/// - stricter where the strict reader is: a syntax error is refused (`JSONDecoder` lets trailing commas and
///   malformed values nobody reads pass), and an integer written with a fraction or an exponent must be exactly
///   a whole number below 2^53 (`inexactInteger`, as `JSONReader.readUInt64`);
/// - no special cases for Foundation's types (this module has no Foundation): `Date`, `Data`, `URL` and
///   `Decimal` decode through their own `Decodable` conformances, not `JSONDecoder`'s strategies;
/// - no key or date strategies; `Float` is the double rounded to a float.
///
/// Not fast (a tree per text): for the few answers a client decodes, not for hot request bodies.
public struct StrictJSONDecoder: Sendable {
  /// Given to the types as `Decoder.userInfo`.
  public var userInfo: [CodingUserInfoKey: any Sendable] = [:]

  public init() {}

  /// Decodes one `T` from `bytes`, which must hold exactly one strict JSON value. Throws a `DecodingError`:
  /// `dataCorrupted` with an empty coding path and a `JSONReadError` (a syntax error) as its underlying error
  /// when the text is not strict JSON; otherwise what the type's decoding met, with its coding path.
  public func decode<T: Decodable>(_ type: T.Type, from bytes: UnsafeRawBufferPointer) throws -> T {
    let root: StrictJSONValue
    do throws(JSONReadError) {
      root = try JSONReader.read(bytes.assumingMemoryBound(to: UInt8.self)) { reader throws(JSONReadError) in
        try StrictJSONValue(reading: &reader)
      }!
    } catch {
      throw DecodingError.dataCorrupted(
        DecodingError.Context(
          codingPath: [], debugDescription: "The given data was not valid JSON: \(error)",
          underlyingError: error))
    }
    return try T(from: StrictValueDecoder(root, codingPath: [], userInfo: userInfo))
  }

  /// Decodes one `T` from `bytes`.
  public func decode<T: Decodable>(_ type: T.Type, from bytes: [UInt8]) throws -> T {
    try bytes.withUnsafeBytes { try decode(type, from: $0) }
  }

  /// Decodes one `T` from the UTF-8 of `text` (a WebSocket text message, say).
  public func decode<T: Decodable>(_ type: T.Type, from text: String) throws -> T {
    var text = text
    return try text.withUTF8 { try decode(type, from: UnsafeRawBufferPointer($0)) }
  }

  /// The strict reader's error behind a `DecodingError` this decoder threw, if there is one: a syntax error
  /// (the text is not strict JSON) or a number that does not fit its field (`numberDoesNotFit`,
  /// `inexactInteger`, `numberOutOfRange`).
  public static func readError(of error: any Error) -> JSONReadError? {
    if let error = error as? JSONReadError { return error }
    guard let error = error as? DecodingError else { return nil }
    switch error {
    case .dataCorrupted(let context), .typeMismatch(_, let context), .valueNotFound(_, let context),
      .keyNotFound(_, let context):
      return context.underlyingError as? JSONReadError
    @unknown default:
      return nil
    }
  }
}

// MARK: The tree

/// One JSON value as read: numbers keep their text (converted when a type asks), objects the first value of
/// each key and the keys in the order first written.
enum StrictJSONValue {
  case null
  case bool(Bool)
  /// The number's token, exactly as written (its grammar already checked).
  case number([UInt8])
  case string(String)
  case array([StrictJSONValue])
  case object(StrictJSONObject)

  /// Reads one value, checking it as strictly as `skipValue`; a syntax error names the path to it.
  init(reading reader: inout JSONReader) throws(JSONReadError) {
    switch try reader.peek() {
    case .null:
      _ = try reader.readNull()
      self = .null
    case .bool:
      self = .bool(try reader.readBool())
    case .string:
      self = .string(try reader.readString())
    case .number:
      let token = try reader.scanNumber()
      self = .number(Array(UnsafeBufferPointer(rebasing: reader.bytes[token.start..<token.end])))
    case .array:
      var values: [StrictJSONValue] = []
      var elements = try reader.beginArray()
      while try reader.nextElement(&elements) {
        do {
          values.append(try StrictJSONValue(reading: &reader))
        } catch {
          throw error.inside(.index(elements.index))
        }
      }
      self = .array(values)
    case .object:
      var object = StrictJSONObject()
      var members = try reader.beginObject()
      while let key = try reader.nextKey(&members) {
        // The key's text is valid only until the reader reads on.
        let name = key.string
        let value: StrictJSONValue
        do {
          value = try StrictJSONValue(reading: &reader)
        } catch {
          throw error.inside(.key(name))
        }
        object.insertIfAbsent(name, value)
      }
      self = .object(object)
    }
  }

  /// As `JSONDecoder` names what it found: `Expected to decode String but found number instead.`
  var kind: JSONValueKind {
    switch self {
    case .null: .null
    case .bool: .bool
    case .number: .number
    case .string: .string
    case .array: .array
    case .object: .object
    }
  }

  var isNull: Bool {
    if case .null = self { return true }
    return false
  }
}

/// An object's members: the first of duplicate keys wins (as in `JSONDecoder`), keys compared as Swift strings
/// (so `"é"` precomposed or not is one key, as in `JSONDecoder`).
struct StrictJSONObject {
  private(set) var keys: [String] = []
  private(set) var values: [String: StrictJSONValue] = [:]

  mutating func insertIfAbsent(_ key: String, _ value: StrictJSONValue) {
    guard values[key] == nil else { return }
    values[key] = value
    keys.append(key)
  }
}

// MARK: Coding keys

/// The keys a container adds to coding paths: array indices (`Index 3`, as `JSONDecoder` names them) and
/// `super`.
struct StrictCodingKey: CodingKey {
  var stringValue: String
  var intValue: Int?

  init(stringValue: String) {
    self.stringValue = stringValue
    intValue = nil
  }

  init(intValue: Int) {
    stringValue = "\(intValue)"
    self.intValue = intValue
  }

  init(index: Int) {
    stringValue = "Index \(index)"
    intValue = index
  }

  static let `super` = StrictCodingKey(stringValue: "super")
}

// MARK: The decoder

/// The `Decoder` for one value of the tree.
struct StrictValueDecoder: Decoder {
  let value: StrictJSONValue
  let codingPath: [any CodingKey]
  let sendableUserInfo: [CodingUserInfoKey: any Sendable]
  var userInfo: [CodingUserInfoKey: Any] { sendableUserInfo }

  init(_ value: StrictJSONValue, codingPath: [any CodingKey], userInfo: [CodingUserInfoKey: any Sendable]) {
    self.value = value
    self.codingPath = codingPath
    sendableUserInfo = userInfo
  }

  func child(_ value: StrictJSONValue, _ key: any CodingKey) -> StrictValueDecoder {
    StrictValueDecoder(value, codingPath: codingPath + [key], userInfo: sendableUserInfo)
  }

  func container<Key: CodingKey>(keyedBy type: Key.Type) throws -> KeyedDecodingContainer<Key> {
    switch value {
    case .object(let object): return KeyedDecodingContainer(StrictKeyedContainer<Key>(self, object))
    case .null:
      throw DecodingError.valueNotFound(
        [String: Any].self,
        DecodingError.Context(
          codingPath: codingPath,
          debugDescription: "Cannot get keyed decoding container -- found null value instead"
        ))
    default: throw mismatch([String: Any].self)
    }
  }

  func unkeyedContainer() throws -> any UnkeyedDecodingContainer {
    switch value {
    case .array(let values): return StrictUnkeyedContainer(self, values)
    case .null:
      throw DecodingError.valueNotFound(
        [Any].self,
        DecodingError.Context(
          codingPath: codingPath,
          debugDescription: "Cannot get unkeyed decoding container -- found null value instead"
        ))
    default: throw mismatch([Any].self)
    }
  }

  func singleValueContainer() throws -> any SingleValueDecodingContainer { StrictSingleValueContainer(self) }

  // MARK: Scalars

  func mismatch(_ type: Any.Type) -> DecodingError {
    DecodingError.typeMismatch(
      type,
      DecodingError.Context(
        codingPath: codingPath,
        debugDescription: "Expected to decode \(type) but found \(value.kind.foundDescription) instead."))
  }

  /// The error for a value that is not a `type`: `null` is a missing value, another JSON type a mismatch.
  func notA(_ type: Any.Type) -> DecodingError {
    guard value.isNull else { return mismatch(type) }
    return DecodingError.valueNotFound(
      type,
      DecodingError.Context(
        codingPath: codingPath,
        debugDescription: "Cannot get value of type \(type) -- found null value instead"))
  }

  func decodeBool() throws -> Bool {
    guard case .bool(let flag) = value else { throw notA(Bool.self) }
    return flag
  }

  func decodeString() throws -> String {
    guard case .string(let text) = value else { throw notA(String.self) }
    return text
  }

  /// The number's token read by the strict reader as a `T` (`UInt64`, `Int` or `Double`): its rules, its
  /// errors (as `dataCorrupted`, with the strict reader's error underneath).
  func read<T: JSONReadable>(_ type: T.Type, named name: Any.Type) throws -> T {
    guard case .number(let token) = value else { throw notA(name) }
    do throws(JSONReadError) {
      return try JSONReader.decode(T.self, from: token)
    } catch {
      throw DecodingError.dataCorrupted(
        DecodingError.Context(codingPath: codingPath, debugDescription: error.message, underlyingError: error)
      )
    }
  }

  func decodeDouble() throws -> Double { try read(Double.self, named: Double.self) }

  func decodeFloat() throws -> Float {
    let double = try read(Double.self, named: Float.self)
    let float = Float(double)
    guard float.isFinite else { throw doesNotFit(Float.self) }
    return float
  }

  /// An integer type: read as `Int` or `UInt64` by the strict reader's rules, then narrowed exactly.
  func decodeInteger<T: FixedWidthInteger>(_ type: T.Type) throws -> T {
    if T.isSigned {
      let wide = try read(Int.self, named: T.self)
      guard let value = T(exactly: wide) else { throw doesNotFit(T.self) }
      return value
    }
    let wide = try read(UInt64.self, named: T.self)
    guard let value = T(exactly: wide) else { throw doesNotFit(T.self) }
    return value
  }

  func doesNotFit(_ type: Any.Type) -> DecodingError {
    var text = ""
    if case .number(let token) = value { text = String(decoding: token.prefix(40), as: UTF8.self) }
    return DecodingError.dataCorrupted(
      DecodingError.Context(
        codingPath: codingPath, debugDescription: "Parsed JSON number <\(text)> does not fit in \(type)."))
  }
}

// MARK: Containers

struct StrictKeyedContainer<Key: CodingKey>: KeyedDecodingContainerProtocol {
  let decoder: StrictValueDecoder
  let object: StrictJSONObject

  init(_ decoder: StrictValueDecoder, _ object: StrictJSONObject) {
    self.decoder = decoder
    self.object = object
  }

  var codingPath: [any CodingKey] { decoder.codingPath }

  /// The keys in the order first written, those `Key` knows.
  var allKeys: [Key] { object.keys.compactMap { Key(stringValue: $0) } }

  func contains(_ key: Key) -> Bool { object.values[key.stringValue] != nil }

  private func value(_ key: Key) throws -> StrictJSONValue {
    guard let value = object.values[key.stringValue] else {
      throw DecodingError.keyNotFound(
        key,
        DecodingError.Context(
          codingPath: codingPath,
          debugDescription: "No value associated with key \(key) (\"\(key.stringValue)\")."
        ))
    }
    return value
  }

  private func child(_ key: Key) throws -> StrictValueDecoder { decoder.child(try value(key), key) }

  func decodeNil(forKey key: Key) throws -> Bool { try value(key).isNull }

  func decode(_ type: Bool.Type, forKey key: Key) throws -> Bool { try child(key).decodeBool() }
  func decode(_ type: String.Type, forKey key: Key) throws -> String { try child(key).decodeString() }
  func decode(_ type: Double.Type, forKey key: Key) throws -> Double { try child(key).decodeDouble() }
  func decode(_ type: Float.Type, forKey key: Key) throws -> Float { try child(key).decodeFloat() }
  func decode(_ type: Int.Type, forKey key: Key) throws -> Int { try child(key).decodeInteger(type) }
  func decode(_ type: Int8.Type, forKey key: Key) throws -> Int8 { try child(key).decodeInteger(type) }
  func decode(_ type: Int16.Type, forKey key: Key) throws -> Int16 { try child(key).decodeInteger(type) }
  func decode(_ type: Int32.Type, forKey key: Key) throws -> Int32 { try child(key).decodeInteger(type) }
  func decode(_ type: Int64.Type, forKey key: Key) throws -> Int64 { try child(key).decodeInteger(type) }
  func decode(_ type: UInt.Type, forKey key: Key) throws -> UInt { try child(key).decodeInteger(type) }
  func decode(_ type: UInt8.Type, forKey key: Key) throws -> UInt8 { try child(key).decodeInteger(type) }
  func decode(_ type: UInt16.Type, forKey key: Key) throws -> UInt16 { try child(key).decodeInteger(type) }
  func decode(_ type: UInt32.Type, forKey key: Key) throws -> UInt32 { try child(key).decodeInteger(type) }
  func decode(_ type: UInt64.Type, forKey key: Key) throws -> UInt64 { try child(key).decodeInteger(type) }

  func decode<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T { try T(from: try child(key)) }

  func nestedContainer<NestedKey: CodingKey>(
    keyedBy type: NestedKey.Type, forKey key: Key
  ) throws -> KeyedDecodingContainer<NestedKey> {
    try child(key).container(keyedBy: type)
  }

  func nestedUnkeyedContainer(forKey key: Key) throws -> any UnkeyedDecodingContainer {
    try child(key).unkeyedContainer()
  }

  /// As `JSONDecoder`: the value of `super`, or `null` when there is none.
  func superDecoder() throws -> any Decoder {
    decoder.child(object.values[StrictCodingKey.super.stringValue] ?? .null, StrictCodingKey.super)
  }

  func superDecoder(forKey key: Key) throws -> any Decoder {
    decoder.child(object.values[key.stringValue] ?? .null, key)
  }
}

struct StrictUnkeyedContainer: UnkeyedDecodingContainer {
  let decoder: StrictValueDecoder
  let values: [StrictJSONValue]
  private(set) var currentIndex = 0

  init(_ decoder: StrictValueDecoder, _ values: [StrictJSONValue]) {
    self.decoder = decoder
    self.values = values
  }

  var codingPath: [any CodingKey] { decoder.codingPath }
  var count: Int? { values.count }
  var isAtEnd: Bool { currentIndex >= values.count }

  /// The next element's decoder (the index is advanced only once it decoded, as in `JSONDecoder`).
  private func next(_ type: Any.Type) throws -> StrictValueDecoder {
    let key = StrictCodingKey(index: currentIndex)
    guard !isAtEnd else {
      throw DecodingError.valueNotFound(
        type,
        DecodingError.Context(
          codingPath: codingPath + [key], debugDescription: "Unkeyed container is at end."))
    }
    return decoder.child(values[currentIndex], key)
  }

  private mutating func advance<T>(_ value: T) -> T {
    currentIndex += 1
    return value
  }

  mutating func decodeNil() throws -> Bool {
    guard try next(Any?.self).value.isNull else { return false }
    currentIndex += 1
    return true
  }

  mutating func decode(_ type: Bool.Type) throws -> Bool { advance(try next(type).decodeBool()) }
  mutating func decode(_ type: String.Type) throws -> String { advance(try next(type).decodeString()) }
  mutating func decode(_ type: Double.Type) throws -> Double { advance(try next(type).decodeDouble()) }
  mutating func decode(_ type: Float.Type) throws -> Float { advance(try next(type).decodeFloat()) }
  mutating func decode(_ type: Int.Type) throws -> Int { advance(try next(type).decodeInteger(type)) }
  mutating func decode(_ type: Int8.Type) throws -> Int8 { advance(try next(type).decodeInteger(type)) }
  mutating func decode(_ type: Int16.Type) throws -> Int16 { advance(try next(type).decodeInteger(type)) }
  mutating func decode(_ type: Int32.Type) throws -> Int32 { advance(try next(type).decodeInteger(type)) }
  mutating func decode(_ type: Int64.Type) throws -> Int64 { advance(try next(type).decodeInteger(type)) }
  mutating func decode(_ type: UInt.Type) throws -> UInt { advance(try next(type).decodeInteger(type)) }
  mutating func decode(_ type: UInt8.Type) throws -> UInt8 { advance(try next(type).decodeInteger(type)) }
  mutating func decode(_ type: UInt16.Type) throws -> UInt16 { advance(try next(type).decodeInteger(type)) }
  mutating func decode(_ type: UInt32.Type) throws -> UInt32 { advance(try next(type).decodeInteger(type)) }
  mutating func decode(_ type: UInt64.Type) throws -> UInt64 { advance(try next(type).decodeInteger(type)) }

  mutating func decode<T: Decodable>(_ type: T.Type) throws -> T { advance(try T(from: try next(type))) }

  mutating func nestedContainer<NestedKey: CodingKey>(
    keyedBy type: NestedKey.Type
  ) throws -> KeyedDecodingContainer<NestedKey> {
    advance(try next(KeyedDecodingContainer<NestedKey>.self).container(keyedBy: type))
  }

  mutating func nestedUnkeyedContainer() throws -> any UnkeyedDecodingContainer {
    advance(try next((any UnkeyedDecodingContainer).self).unkeyedContainer())
  }

  mutating func superDecoder() throws -> any Decoder { advance(try next((any Decoder).self)) }
}

struct StrictSingleValueContainer: SingleValueDecodingContainer {
  let decoder: StrictValueDecoder

  init(_ decoder: StrictValueDecoder) { self.decoder = decoder }

  var codingPath: [any CodingKey] { decoder.codingPath }

  func decodeNil() -> Bool { decoder.value.isNull }

  func decode(_ type: Bool.Type) throws -> Bool { try decoder.decodeBool() }
  func decode(_ type: String.Type) throws -> String { try decoder.decodeString() }
  func decode(_ type: Double.Type) throws -> Double { try decoder.decodeDouble() }
  func decode(_ type: Float.Type) throws -> Float { try decoder.decodeFloat() }
  func decode(_ type: Int.Type) throws -> Int { try decoder.decodeInteger(type) }
  func decode(_ type: Int8.Type) throws -> Int8 { try decoder.decodeInteger(type) }
  func decode(_ type: Int16.Type) throws -> Int16 { try decoder.decodeInteger(type) }
  func decode(_ type: Int32.Type) throws -> Int32 { try decoder.decodeInteger(type) }
  func decode(_ type: Int64.Type) throws -> Int64 { try decoder.decodeInteger(type) }
  func decode(_ type: UInt.Type) throws -> UInt { try decoder.decodeInteger(type) }
  func decode(_ type: UInt8.Type) throws -> UInt8 { try decoder.decodeInteger(type) }
  func decode(_ type: UInt16.Type) throws -> UInt16 { try decoder.decodeInteger(type) }
  func decode(_ type: UInt32.Type) throws -> UInt32 { try decoder.decodeInteger(type) }
  func decode(_ type: UInt64.Type) throws -> UInt64 { try decoder.decodeInteger(type) }

  func decode<T: Decodable>(_ type: T.Type) throws -> T { try T(from: decoder) }
}
