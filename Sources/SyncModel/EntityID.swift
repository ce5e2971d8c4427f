/// The id of a page, database, block, workspace or client: `[A-Za-z0-9_-]{1,64}`. Clients may choose ids
/// (UUIDs by default), so every id that arrives from outside is validated here, once, at decoding.
public struct EntityID: Hashable, Comparable, Sendable, CustomStringConvertible {
  public let rawValue: String

  /// Validates `rawValue`.
  public init(validating rawValue: String) throws(SyncModelError) {
    guard EntityID.isValid(rawValue) else {
      throw .invalidID(String(rawValue.prefix(80)))
    }
    self.rawValue = rawValue
  }

  /// Validates the UTF-8 `bytes` of an id, and makes its string only if it is one (the broker's batch reader
  /// checks ids where it reads them).
  public init(validatingUTF8 bytes: UnsafeBufferPointer<UInt8>) throws(SyncModelError) {
    guard EntityID.isValid(utf8: bytes) else {
      throw .invalidID(String(String(decoding: bytes, as: UTF8.self).prefix(80)))
    }
    rawValue = String(decoding: bytes, as: UTF8.self)
  }

  /// Whether `text` is a well-formed id.
  public static func isValid(_ text: String) -> Bool {
    // Over the contiguous bytes: iterating `utf8` generically cost ~20 instructions a byte, on every id of every
    // batch and subscribe frame.
    var text = text
    return text.withUTF8(isValid(utf8:))
  }

  /// Whether `bytes` are a well-formed id's UTF-8.
  public static func isValid(utf8 bytes: UnsafeBufferPointer<UInt8>) -> Bool {
    guard (1...64).contains(bytes.count) else { return false }
    for c in bytes {
      guard
        (c >= 0x30 && c <= 0x39) || (c >= 0x41 && c <= 0x5A) || (c >= 0x61 && c <= 0x7A) || c == 0x2D
          || c == 0x5F
      else { return false }
    }
    return true
  }

  /// Whether `bytes` are a well-formed id's UTF-8.
  static func isValid(utf8 bytes: [UInt8]) -> Bool { bytes.withUnsafeBufferPointer(isValid(utf8:)) }

  /// A random UUID-shaped id (version 4 layout, lowercase).
  public static func random() -> EntityID {
    var generator = SystemRandomNumberGenerator()
    let hex = Array("0123456789abcdef".utf8)
    var bytes = (0..<16).map { _ in UInt8.random(in: 0...255, using: &generator) }
    bytes[6] = (bytes[6] & 0x0F) | 0x40
    bytes[8] = (bytes[8] & 0x3F) | 0x80
    var out: [UInt8] = []
    for (i, byte) in bytes.enumerated() {
      if i == 4 || i == 6 || i == 8 || i == 10 { out.append(UInt8(ascii: "-")) }
      out.append(hex[Int(byte >> 4)])
      out.append(hex[Int(byte & 0x0F)])
    }
    return EntityID(unchecked: String(decoding: out, as: UTF8.self))
  }

  init(unchecked rawValue: String) { self.rawValue = rawValue }

  /// Byte order. Ids are ASCII, whose String order is byte order, and String compares ASCII with a memcmp (the
  /// generic `utf8` views took ~20 instructions a byte, in every sorted answer).
  public static func < (lhs: EntityID, rhs: EntityID) -> Bool {
    lhs.rawValue < rhs.rawValue
  }
  public var description: String { rawValue }
}

extension EntityID: Codable {
  public init(from decoder: any Decoder) throws {
    let container = try decoder.singleValueContainer()
    let text = try container.decode(String.self)
    do {
      try self.init(validating: text)
    } catch {
      throw DecodingError.dataCorruptedError(in: container, debugDescription: error.description)
    }
  }

  public func encode(to encoder: any Encoder) throws {
    var container = encoder.singleValueContainer()
    try container.encode(rawValue)
  }
}

extension EntityID: CodingKeyRepresentable {
  /// Dictionaries keyed by ids encode as JSON objects (`{"page-id": ...}`), and their keys are validated.
  public var codingKey: any CodingKey { IDKey(stringValue: rawValue) }

  public init?<T: CodingKey>(codingKey: T) {
    guard let id = try? EntityID(validating: codingKey.stringValue) else { return nil }
    self = id
  }

  private struct IDKey: CodingKey {
    var stringValue: String
    var intValue: Int? { nil }
    init(stringValue: String) { self.stringValue = stringValue }
    init?(intValue: Int) { nil }
  }
}
