/// A strict JSON reader (RFC 8259) over UTF-8 bytes, for the hand-written decoders of the broker's hot request
/// bodies: it reads straight from the bytes into the decoded value, with no tree in between and no allocation
/// but the strings and collections that value keeps.
///
/// Strict: one value and nothing after it but whitespace (space, tab, LF, CR); no trailing commas, comments or
/// single quotes; numbers as the grammar writes them (`-0.5e+3`, never `01`, `.5`, `1.` or `+1`); the string
/// escapes of the RFC, `\uXXXX` surrogates in pairs only (a lone one is refused, as `JSONDecoder` refuses it);
/// no control character unescaped in a string; strings valid UTF-8; at most `maximumDepth` nested arrays and
/// objects (`JSONDecoder`'s limit). A leading UTF-8 byte order mark is skipped (RFC 8259 section 8.1 allows it,
/// and `JSONDecoder` does it). Every value is checked, including those a decoder skips: `JSONDecoder` looks only
/// at the values it decodes and lets a malformed number or string pass in a member nobody reads.
///
/// A decoder reads a value with the typed reads (`readString`, `readUInt64`, ...), objects with `beginObject`
/// and `nextKey`, arrays with `beginArray` and `nextElement`, and skips what it does not use with `skipValue`.
/// `JSONField` and `read(_:_:as:)` give the semantics of `Codable` members: the first of duplicate keys wins,
/// `null` and absent are told apart, and a value that does not fit its field fails only if the field is used.
///
/// The reader borrows the bytes: use it inside `decode(_:from:)` only.
public struct JSONReader {
  /// The deepest nesting of arrays and objects accepted (`JSONDecoder` refuses a 513th level).
  public static let maximumDepth = 512

  @usableFromInline let bytes: UnsafeBufferPointer<UInt8>
  /// The offset of the next byte to read.
  @usableFromInline var position: Int
  @usableFromInline var depth = 0
  /// Where escaped strings are unescaped: kept between strings so that it is allocated once.
  @usableFromInline var scratch: [UInt8] = []

  @usableFromInline init(_ bytes: UnsafeBufferPointer<UInt8>) {
    self.bytes = bytes
    position = 0
  }

  /// Decodes one `T` from `bytes`, which must hold exactly one JSON value.
  ///
  /// Errors come as `JSONDecoder` would order them: a syntax error anywhere in the text first, then the first
  /// problem the type's decoder finds, in the order its `Decodable` code would meet it.
  public static func decode<T: JSONReadable>(
    _ type: T.Type, from bytes: UnsafeBufferPointer<UInt8>
  ) throws(JSONReadError) -> T {
    var reader = JSONReader(bytes)
    reader.skipByteOrderMark()
    let start = reader.position
    var value: T?
    var problem: JSONReadError?
    do {
      value = try T(reading: &reader)
    } catch {
      if error.isSyntaxError { throw error }
      // The rest of the text may still hold a syntax error, which comes first: check it all.
      problem = error
      reader.position = start
      reader.depth = 0
      try reader.skipValue()
    }
    try reader.expectEnd()
    if let problem { throw problem }
    return value!
  }

  /// Reads `bytes`, which must hold exactly one JSON value, with `body`: for a reader that needs more than the
  /// bytes (a table to look its keys up in) or may give up part way. Nil if `body` gave up (returned nil: the
  /// rest is not read, and so not checked); otherwise `body`'s value once the text ends after the value. The
  /// errors are the syntax's and `body`'s, in the order met; a caller that gives up, or gets an error, and wants
  /// `decode`'s exact error, decodes the bytes again with it.
  public static func read<T>(
    _ bytes: UnsafeBufferPointer<UInt8>, _ body: (inout JSONReader) throws(JSONReadError) -> T?
  ) throws(JSONReadError) -> T? {
    var reader = JSONReader(bytes)
    reader.skipByteOrderMark()
    guard let value = try body(&reader) else { return nil }
    try reader.expectEnd()
    return value
  }

  /// Decodes one `T` from raw bytes (bound or not: they are read as bytes).
  public static func decode<T: JSONReadable>(
    _ type: T.Type, from bytes: UnsafeRawBufferPointer
  ) throws(JSONReadError) -> T {
    try decode(type, from: bytes.assumingMemoryBound(to: UInt8.self))
  }

  /// Decodes one `T` from `bytes`.
  public static func decode<T: JSONReadable>(_ type: T.Type, from bytes: [UInt8]) throws(JSONReadError) -> T {
    try bytes.withUnsafeBufferPointer { buffer throws(JSONReadError) in try decode(type, from: buffer) }
  }

  /// Decodes one `T` from the UTF-8 of `text` (a WebSocket text message, say).
  public static func decode<T: JSONReadable>(_ type: T.Type, from text: String) throws(JSONReadError) -> T {
    var text = text
    // `withUTF8` rethrows untyped errors: carry the typed one out in a Result.
    let result = text.withUTF8 { buffer in
      Result { () throws(JSONReadError) in try decode(type, from: buffer) }
    }
    return try result.get()
  }

  /// The byte offset of the next value or token (for the offsets of a decoder's own errors).
  public var offset: Int { position }

  // MARK: Whitespace, the end, the kind of the next value

  private mutating func skipByteOrderMark() {
    if bytes.count >= 3 && bytes[0] == 0xEF && bytes[1] == 0xBB && bytes[2] == 0xBF { position = 3 }
  }

  @usableFromInline @inline(__always) mutating func skipWhitespace() {
    while position < bytes.count {
      switch bytes[position] {
      case 0x20, 0x0A, 0x0D, 0x09: position += 1
      default: return
      }
    }
  }

  private mutating func expectEnd() throws(JSONReadError) {
    skipWhitespace()
    guard position == bytes.count else {
      throw .syntax("unexpected \(describeByte(at: position)) after the JSON value", at: position)
    }
  }

  /// The JSON type of the next value, without reading it (whitespace before it is skipped).
  public mutating func peek() throws(JSONReadError) -> JSONValueKind {
    skipWhitespace()
    guard position < bytes.count else { throw endOfInput(expecting: "a value") }
    switch bytes[position] {
    case UInt8(ascii: "{"): return .object
    case UInt8(ascii: "["): return .array
    case UInt8(ascii: "\""): return .string
    case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return .number
    case UInt8(ascii: "t"), UInt8(ascii: "f"): return .bool
    case UInt8(ascii: "n"): return .null
    default: throw .syntax("expected a value, found \(describeByte(at: position))", at: position)
    }
  }

  // MARK: Objects

  /// Where a decoder is in an object: how many members it has read.
  public struct ObjectMembers {
    public fileprivate(set) var count = 0
  }

  /// Reads the `{` of an object: then `nextKey` gives each member's key. A value of another type is a type
  /// mismatch (and nothing is read): `Expected to decode Dictionary<String, Any> but found ...`.
  public mutating func beginObject() throws(JSONReadError) -> ObjectMembers {
    let kind = try peek()
    guard kind == .object else {
      if kind == .null { throw .nullContainer(keyed: true, at: position) }
      throw .typeMismatch(expected: "Dictionary<String, Any>", found: kind, at: position)
    }
    try enter()
    return ObjectMembers()
  }

  /// The next member's key, with its `:` read (its value is next), or nil once the object's `}` is read.
  public mutating func nextKey(_ members: inout ObjectMembers) throws(JSONReadError) -> JSONKey? {
    guard try !readEndOrComma(UInt8(ascii: "}"), after: members.count, entry: ("a", "member", "object"))
    else { return nil }
    guard bytes[position] == UInt8(ascii: "\"") else {
      throw .syntax("expected a string key, found \(describeByte(at: position))", at: position)
    }
    let key = try readKey()
    skipWhitespace()
    guard position < bytes.count else { throw endOfInput(expecting: "':'") }
    guard bytes[position] == UInt8(ascii: ":") else {
      throw .syntax("expected ':' after an object key, found \(describeByte(at: position))", at: position)
    }
    position += 1
    members.count += 1
    return key
  }

  // MARK: Arrays

  /// Where a decoder is in an array: how many elements it has started.
  public struct ArrayElements {
    public fileprivate(set) var count = 0
    /// The index of the element being read (for error paths).
    public var index: Int { count - 1 }
  }

  /// Reads the `[` of an array; a value of another type is a type mismatch (`Expected to decode Array<Any> but
  /// found ...`) and nothing is read.
  public mutating func beginArray() throws(JSONReadError) -> ArrayElements {
    let kind = try peek()
    guard kind == .array else {
      if kind == .null { throw .nullContainer(keyed: false, at: position) }
      throw .typeMismatch(expected: "Array<Any>", found: kind, at: position)
    }
    try enter()
    return ArrayElements()
  }

  /// Whether another element follows (its value is next); false once the array's `]` is read.
  public mutating func nextElement(_ elements: inout ArrayElements) throws(JSONReadError) -> Bool {
    guard try !readEndOrComma(UInt8(ascii: "]"), after: elements.count, entry: ("an", "element", "array"))
    else { return false }
    elements.count += 1
    return true
  }

  /// Reads a container's closing `close` (true: the container ended), or else, after `count` entries, the `,`
  /// before the next one; leaves `position` at the next entry's first byte. A trailing comma is an error.
  /// `entry`: how errors name an entry ("a member" of an "object").
  private mutating func readEndOrComma(
    _ close: UInt8, after count: Int, entry: (article: String, noun: String, container: String)
  ) throws(JSONReadError) -> Bool {
    // Made only for an error: built on every call, this string cost ~600 instructions per member and element.
    var closing: String { "'\(Character(Unicode.Scalar(close)))'" }
    skipWhitespace()
    guard position < bytes.count else {
      throw endOfInput(expecting: "\(entry.article) \(entry.noun) or \(closing)")
    }
    if bytes[position] == close {
      position += 1
      depth -= 1
      return true
    }
    if count > 0 {
      guard bytes[position] == UInt8(ascii: ",") else {
        throw .syntax(
          "expected ',' or \(closing) after an \(entry.container) \(entry.noun), found \(describeByte(at: position))",
          at: position)
      }
      position += 1
      skipWhitespace()
      guard position < bytes.count else { throw endOfInput(expecting: "\(entry.article) \(entry.noun)") }
      if bytes[position] == close { throw .syntax("trailing comma before \(closing)", at: position) }
    }
    return false
  }

  private mutating func enter() throws(JSONReadError) {
    guard depth < Self.maximumDepth else {
      throw .syntax("more than \(Self.maximumDepth) nested arrays and objects", at: position)
    }
    depth += 1
    position += 1
  }

  // MARK: Literals and skipping

  /// Reads `null` if it is next (true); otherwise reads nothing (false).
  public mutating func readNull() throws(JSONReadError) -> Bool {
    guard try peek() == .null else { return false }
    try readLiteral("null")
    return true
  }

  /// Reads `true` or `false`; another value is a type mismatch, `null` included (as `JSONDecoder` says it).
  public mutating func readBool() throws(JSONReadError) -> Bool {
    let kind = try peek()
    guard kind == .bool else { throw .typeMismatch(expected: "Bool", found: kind, at: position) }
    if bytes[position] == UInt8(ascii: "t") {
      try readLiteral("true")
      return true
    }
    try readLiteral("false")
    return false
  }

  private mutating func readLiteral(_ literal: StaticString) throws(JSONReadError) {
    let count = literal.utf8CodeUnitCount
    let start = position
    guard bytes.count - position >= count,
      (0..<count).allSatisfy({ bytes[start + $0] == literal.utf8Start[$0] })
    else {
      throw .syntax("invalid literal (expected \(literal))", at: position)
    }
    position += count
    if position < bytes.count, Self.isLetterOrDigit(bytes[position]) {
      throw .syntax("invalid literal (expected \(literal))", at: start)
    }
  }

  /// Reads the next value whatever it is, checking it as strictly as a read value. A syntax error inside it
  /// names the path from this value down.
  public mutating func skipValue() throws(JSONReadError) {
    switch try peek() {
    case .object:
      var members = try beginObject()
      while let key = try nextKey(&members) {
        do {
          try skipValue()
        } catch {
          throw error.inside(.key(key.string))
        }
      }
    case .array:
      var elements = try beginArray()
      while try nextElement(&elements) {
        do {
          try skipValue()
        } catch {
          throw error.inside(.index(elements.index))
        }
      }
    case .string:
      _ = try scanString()
    case .number:
      _ = try scanNumber()
    case .bool:
      _ = try readBool()
    case .null:
      try readLiteral("null")
    }
  }

  /// How many members the object that is the next value has, counted without reading on (a dictionary reserves
  /// room for them: a catch-up map of a million pages would otherwise be rehashed some twenty times). Checks the
  /// object as `skipValue` does.
  public mutating func countMembers() throws(JSONReadError) -> Int {
    let start = position
    let startDepth = depth
    var members = try beginObject()
    while let key = try nextKey(&members) { try skipValue(of: key) }
    position = start
    depth = startDepth
    return members.count
  }

  /// Skips the value of the member `key` (one a decoder does not use); a syntax error in it names the key.
  public mutating func skipValue(of key: JSONKey) throws(JSONReadError) {
    do {
      try skipValue()
    } catch {
      throw error.inside(.key(key.string))
    }
  }

  // MARK: Errors

  func endOfInput(expecting what: String) -> JSONReadError {
    .syntax("unexpected end of input, expecting \(what)", at: position)
  }

  /// A byte as an error message shows it: `'x'` when printable ASCII, else its value.
  func describeByte(at offset: Int) -> String {
    guard offset < bytes.count else { return "the end of input" }
    let byte = bytes[offset]
    if byte >= 0x21 && byte < 0x7F { return "'\(Character(Unicode.Scalar(byte)))'" }
    return "byte 0x" + String(byte, radix: 16, uppercase: true)
  }

  static func isLetterOrDigit(_ byte: UInt8) -> Bool {
    (byte >= 0x30 && byte <= 0x39) || ((byte | 0x20) >= 0x61 && (byte | 0x20) <= 0x7A)
  }
}
