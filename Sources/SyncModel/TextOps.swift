import RichText
import StrictJSON

/// A text CRDT update as it travels in a mutation or a block: `TextCodec`'s binary form, base64 in JSON (RFC
/// 4648, with padding). The binary form is compact (a run is a few bytes plus its text) and one codec serves the
/// store, the wire and the fuzz targets; docs/protocol.md describes it byte by byte.
public struct TextOps: Hashable, Sendable {
  /// The update's (or state's) binary form.
  public var bytes: [UInt8]

  public init(bytes: [UInt8]) { self.bytes = bytes }

  public init(_ update: TextUpdate) { bytes = TextCodec.encode(update) }

  /// The update these bytes hold (a state is read as the update of its whole content).
  public func update() throws(TextError) -> TextUpdate { try TextCodec.decodeUpdate(bytes) }

  public var base64: String { Base64.encode(bytes) }

  /// Reads base64 that holds a well-formed update or state.
  public init(base64 text: String) throws(SyncModelError) {
    guard let bytes = Base64.decode(text) else { throw .invalidTextOps("not base64") }
    do throws(TextError) {
      _ = try TextCodec.decodeUpdate(bytes)
    } catch {
      throw .invalidTextOps(error.description)
    }
    self.bytes = bytes
  }
}

extension TextOps: Codable {
  public init(from decoder: any Decoder) throws {
    let container = try decoder.singleValueContainer()
    let text = try container.decode(String.self)
    do {
      try self.init(base64: text)
    } catch {
      throw DecodingError.dataCorruptedError(in: container, debugDescription: error.description)
    }
  }

  public func encode(to encoder: any Encoder) throws {
    var container = encoder.singleValueContainer()
    try container.encode(base64)
  }
}

extension TextOps: JSONReadable {
  public init(reading reader: inout JSONReader) throws(JSONReadError) {
    let offset = reader.offset
    let text = try reader.readString()
    do throws(SyncModelError) {
      try self.init(base64: text)
    } catch {
      throw .invalidValue(error.description, at: offset)
    }
  }
}

/// Base64 (RFC 4648 §4, padded), for the binary text updates in JSON.
public enum Base64 {
  private static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)
  private static let values: [UInt8] = {
    var table = [UInt8](repeating: 0xFF, count: 256)
    for (index, byte) in alphabet.enumerated() { table[Int(byte)] = UInt8(index) }
    return table
  }()

  public static func encode(_ bytes: [UInt8]) -> String {
    var out: [UInt8] = []
    out.reserveCapacity((bytes.count + 2) / 3 * 4)
    var index = 0
    while index + 3 <= bytes.count {
      let value = UInt32(bytes[index]) << 16 | UInt32(bytes[index + 1]) << 8 | UInt32(bytes[index + 2])
      for shift in [18, 12, 6, 0] { out.append(alphabet[Int((value >> UInt32(shift)) & 63)]) }
      index += 3
    }
    let rest = bytes.count - index
    if rest > 0 {
      let value = UInt32(bytes[index]) << 16 | (rest == 2 ? UInt32(bytes[index + 1]) << 8 : 0)
      out.append(alphabet[Int((value >> 18) & 63)])
      out.append(alphabet[Int((value >> 12) & 63)])
      out.append(rest == 2 ? alphabet[Int((value >> 6) & 63)] : UInt8(ascii: "="))
      out.append(UInt8(ascii: "="))
    }
    return String(decoding: out, as: UTF8.self)
  }

  /// The bytes of padded base64 `text`, or nil when it is not exactly that.
  public static func decode(_ text: String) -> [UInt8]? {
    let input = Array(text.utf8)
    guard input.count % 4 == 0 else { return nil }
    var out: [UInt8] = []
    out.reserveCapacity(input.count / 4 * 3)
    var index = 0
    while index < input.count {
      let last = index + 4 == input.count
      let padding =
        last
        ? (input[index + 3] == UInt8(ascii: "=") ? (input[index + 2] == UInt8(ascii: "=") ? 2 : 1) : 0) : 0
      var value: UInt32 = 0
      for offset in 0..<4 {
        let byte = input[index + offset]
        if offset >= 4 - padding {
          value <<= 6
          continue
        }
        let digit = values[Int(byte)]
        guard digit != 0xFF else { return nil }
        value = value << 6 | UInt32(digit)
      }
      out.append(UInt8(truncatingIfNeeded: value >> 16))
      if padding < 2 { out.append(UInt8(truncatingIfNeeded: value >> 8)) }
      if padding < 1 { out.append(UInt8(truncatingIfNeeded: value)) }
      // Bits that padding drops must be zero (one encoding per value).
      if padding == 1 && value & 0xFF != 0 { return nil }
      if padding == 2 && value & 0xFFFF != 0 { return nil }
      index += 4
    }
    return out
  }
}
