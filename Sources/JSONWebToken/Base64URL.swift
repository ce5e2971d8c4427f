/// Base64url without padding (RFC 7515 section 2, RFC 4648 section 5), as JWTs and JWKs write bytes.
public enum Base64URL {
  /// The bytes `text` encodes, or nil if it is not unpadded base64url: a character outside `A-Z a-z 0-9 - _`
  /// (padding, whitespace and the `+ /` of standard Base64 included), a length of 1 modulo 4, or unused bits
  /// that are not zero. Strict, so that every byte string has exactly one accepted spelling (a token cannot be
  /// re-spelled to miss the cache or to pass as another).
  public static func decode(_ text: some Collection<UInt8>) -> [UInt8]? {
    let remainder = text.count % 4
    guard remainder != 1 else { return nil }
    var out: [UInt8] = []
    out.reserveCapacity(text.count * 3 / 4)
    var group: UInt32 = 0
    var symbols = 0
    for character in text {
      let value = table[Int(character)]
      guard value != invalid else { return nil }
      group = group << 6 | UInt32(value)
      symbols += 1
      if symbols == 4 {
        out.append(UInt8(truncatingIfNeeded: group >> 16))
        out.append(UInt8(truncatingIfNeeded: group >> 8))
        out.append(UInt8(truncatingIfNeeded: group))
        group = 0
        symbols = 0
      }
    }
    switch symbols {
    case 3:
      guard group & 0x3 == 0 else { return nil }
      out.append(UInt8(truncatingIfNeeded: group >> 10))
      out.append(UInt8(truncatingIfNeeded: group >> 2))
    case 2:
      guard group & 0xF == 0 else { return nil }
      out.append(UInt8(truncatingIfNeeded: group >> 4))
    default: break
    }
    return out
  }

  /// `bytes` as unpadded base64url.
  public static func encode(_ bytes: some Collection<UInt8>) -> String {
    let bytes = Array(bytes)
    var out: [UInt8] = []
    out.reserveCapacity((bytes.count + 2) / 3 * 4)
    var index = 0
    while index + 3 <= bytes.count {
      let group = UInt32(bytes[index]) << 16 | UInt32(bytes[index + 1]) << 8 | UInt32(bytes[index + 2])
      for shift in [18, 12, 6, 0] { out.append(alphabet[Int(group >> UInt32(shift) & 0x3F)]) }
      index += 3
    }
    switch bytes.count - index {
    case 2:
      let group = UInt32(bytes[index]) << 16 | UInt32(bytes[index + 1]) << 8
      for shift in [18, 12, 6] { out.append(alphabet[Int(group >> UInt32(shift) & 0x3F)]) }
    case 1:
      let group = UInt32(bytes[index]) << 16
      for shift in [18, 12] { out.append(alphabet[Int(group >> UInt32(shift) & 0x3F)]) }
    default: break
    }
    return String(decoding: out, as: UTF8.self)
  }

  private static let invalid: UInt8 = 0xFF
  private static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)
  private static let table: [UInt8] = {
    var table = [UInt8](repeating: invalid, count: 256)
    for (value, character) in alphabet.enumerated() { table[Int(character)] = UInt8(value) }
    return table
  }()
}
