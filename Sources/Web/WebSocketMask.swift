/// The XOR masking of RFC 6455 section 5.3, applied a machine word at a time.
///
/// The masking key is carried as a `UInt32` whose big-endian bytes are the four key bytes as they appear on
/// the wire: key `0x37FA_213D` masks byte 0 with `0x37`, byte 1 with `0xFA`, and so on.
enum WebSocketMask {
  /// Writes `source` XOR the key into `destination` (which may be the same memory as `source`), byte `i` of
  /// the payload taking key byte `i % 4`. `destination` must hold at least `source.count` bytes.
  static func apply(key: UInt32, from source: UnsafeRawBufferPointer, to destination: UnsafeMutableRawPointer)
  {
    let count = source.count
    guard count > 0, let input = source.baseAddress else { return }
    // `key.bigEndian` is the value whose in-memory bytes are the wire key bytes; doubling it gives the same
    // 8-byte pattern on either byte order, so every 8-byte word is XORed in one step.
    let key32 = key.bigEndian
    let key64 = UInt64(key32) | UInt64(key32) << 32
    var offset = 0
    while offset + 8 <= count {
      let word = input.loadUnaligned(fromByteOffset: offset, as: UInt64.self)
      destination.storeBytes(of: word ^ key64, toByteOffset: offset, as: UInt64.self)
      offset += 8
    }
    // Offsets are multiples of 8 here, so the tail starts at key byte 0.
    withUnsafeBytes(of: key32) { keyBytes in
      while offset < count {
        let byte = input.load(fromByteOffset: offset, as: UInt8.self) ^ keyBytes[offset & 3]
        destination.storeBytes(of: byte, toByteOffset: offset, as: UInt8.self)
        offset += 1
      }
    }
  }
}
