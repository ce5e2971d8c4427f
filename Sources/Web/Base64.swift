import CCrypto

/// Base64 with the standard alphabet and padding (RFC 4648 section 4).
public enum Base64 {
  /// The Base64 text of `bytes`, standard alphabet, padded (libcrypto's EVP_EncodeBlock).
  public static func encode(_ bytes: some Collection<UInt8>) -> String {
    withContiguousBytes(bytes) { input in
      guard let base = input.baseAddress?.assumingMemoryBound(to: UInt8.self), input.count > 0 else {
        return ""
      }
      // EVP_EncodeBlock takes an Int32 length: encode in chunks that are a multiple of 3 bytes so the pieces
      // concatenate without inner padding.
      let chunkSize = 3 << 20
      let outputCount = (input.count + 2) / 3 * 4
      return String(unsafeUninitializedCapacity: outputCount + 1) { output in
        var read = 0
        var written = 0
        while read < input.count {
          let chunk = min(chunkSize, input.count - read)
          // EVP_EncodeBlock also writes a NUL after the text, hence the spare byte in the capacity.
          written += Int(EVP_EncodeBlock(output.baseAddress! + written, base + read, Int32(chunk)))
          read += chunk
        }
        return written
      }
    }
  }

  /// The bytes `string` encodes, or nil if it is not Base64: a character outside the alphabet (whitespace
  /// included), misplaced or excess padding, or a length that is not a multiple of 4.
  ///
  /// Strict (RFC 4648 section 3.5): the length is a multiple of 4, padding is only at the end and only as much
  /// as the data needs, and the unused bits before the padding are zero, so every byte string has exactly one
  /// accepted encoding.
  public static func decode(_ string: String) -> [UInt8]? {
    let text = Array(string.utf8)
    guard text.count % 4 == 0 else { return nil }
    guard !text.isEmpty else { return [] }
    let padding = text.last == pad ? (text[text.count - 2] == pad ? 2 : 1) : 0
    var out = [UInt8]()
    out.reserveCapacity(text.count / 4 * 3 - padding)
    var index = 0
    while index < text.count {
      var group: UInt32 = 0
      var symbols = 0
      for offset in 0..<4 {
        let character = text[index + offset]
        if character == pad {
          // Padding may only fill the tail of the final group.
          guard index + 4 == text.count, offset >= 4 - padding else { return nil }
          group <<= 6
          continue
        }
        let value = decodeTable[Int(character)]
        guard value != invalid else { return nil }
        group = group << 6 | UInt32(value)
        symbols += 1
      }
      switch symbols {
      case 4:
        out.append(UInt8(truncatingIfNeeded: group >> 16))
        out.append(UInt8(truncatingIfNeeded: group >> 8))
        out.append(UInt8(truncatingIfNeeded: group))
      case 3:
        guard group & 0xFF == 0 else { return nil }  // "Zm8=" ok, "Zm9=" has stray bits
        out.append(UInt8(truncatingIfNeeded: group >> 16))
        out.append(UInt8(truncatingIfNeeded: group >> 8))
      default:
        guard group & 0xFFFF == 0 else { return nil }  // "Zg==" ok, "Zh==" has stray bits
        out.append(UInt8(truncatingIfNeeded: group >> 16))
      }
      index += 4
    }
    return out
  }

  private static let pad = UInt8(ascii: "=")
  private static let invalid: UInt8 = 0xFF
  private static let decodeTable: [UInt8] = {
    var table = [UInt8](repeating: invalid, count: 256)
    let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)
    for (value, character) in alphabet.enumerated() { table[Int(character)] = UInt8(value) }
    return table
  }()
}
