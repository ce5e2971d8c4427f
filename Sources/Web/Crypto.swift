import CCrypto

#if canImport(Glibc)
  import Glibc
#endif

/// Hashes, MACs, randomness and constant-time comparison, over libcrypto. No libcrypto type crosses this API.
///
/// All functions are thread-safe (libcrypto 3 needs no locking setup) and synchronous; they hash in memory, so
/// keep large inputs off the loop thread.
public enum Crypto {
  /// The SHA-1 digest (20 bytes). Only for protocols that require it, such as the WebSocket handshake. Not
  /// through EVP: a device daemon on plain HTTP then never sets up OpenSSL 3's providers (2 MiB resident).
  public static func sha1(_ bytes: some Collection<UInt8>) -> [UInt8] {
    var out = [UInt8](repeating: 0, count: 20)
    withContiguousBytes(bytes) { input in
      out.withUnsafeMutableBufferPointer { pagesync_sha1(input.baseAddress, input.count, $0.baseAddress) }
    }
    return out
  }

  /// The SHA-256 digest (32 bytes).
  public static func sha256(_ bytes: some Collection<UInt8>) -> [UInt8] { digest(EVP_sha256(), bytes) }

  /// HMAC-SHA-256 of `message` under `key` (RFC 2104), 32 bytes.
  public static func hmacSHA256(key: some Collection<UInt8>, message: some Collection<UInt8>) -> [UInt8] {
    // HMAC() takes an Int32 key length. RFC 2104 hashes a key longer than the block size before use, so doing
    // that here for an enormous key gives the same MAC.
    let key: [UInt8] = key.count > Int(Int32.max) ? sha256(key) : Array(key)
    var out = [UInt8](repeating: 0, count: Int(EVP_MAX_MD_SIZE))
    var length: UInt32 = 0
    let result = key.withUnsafeBytes { keyBytes in
      withContiguousBytes(message) { messageBytes in
        out.withUnsafeMutableBufferPointer { outBytes in
          HMAC(
            EVP_sha256(), keyBytes.baseAddress, Int32(keyBytes.count),
            messageBytes.baseAddress?.assumingMemoryBound(to: UInt8.self), messageBytes.count,
            outBytes.baseAddress, &length)
        }
      }
    }
    precondition(result != nil, "HMAC-SHA-256 failed in libcrypto")
    return Array(out.prefix(Int(length)))
  }

  /// `count` bytes from the kernel's CSPRNG (`getrandom(2)`, which waits only until the kernel's pool is first
  /// seeded at boot). Not libcrypto's RAND_bytes: its first call sets up OpenSSL 3's providers, 2 MiB resident in
  /// a device daemon that wants a WebSocket masking key. Stops the process if the kernel refuses: there is no
  /// safe fallback for key material.
  public static func randomBytes(_ count: Int) -> [UInt8] {
    precondition(count >= 0, "negative byte count")
    var bytes = [UInt8](repeating: 0, count: count)
    bytes.withUnsafeMutableBufferPointer { buffer in
      var offset = 0
      while offset < buffer.count {
        let got = pagesync_getrandom(buffer.baseAddress! + offset, buffer.count - offset)
        if got < 0 && errno == EINTR { continue }
        precondition(got > 0, "getrandom failed: errno \(errno)")
        offset += Int(got)
      }
    }
    return bytes
  }

  /// A random `UInt32` from the CSPRNG, e.g. a WebSocket masking key.
  public static func randomUInt32() -> UInt32 {
    randomBytes(4).reduce(0) { $0 << 8 | UInt32($1) }
  }

  /// Whether `a` and `b` hold the same bytes, compared in constant time (CRYPTO_memcmp). False when the
  /// lengths differ; the length itself is not secret.
  ///
  /// The time taken depends only on the length, never on where the inputs differ, so comparing a MAC or token
  /// with it does not reveal how much of a guess was right.
  public static func constantTimeEquals(_ a: some Collection<UInt8>, _ b: some Collection<UInt8>) -> Bool {
    guard a.count == b.count else { return false }
    guard a.count > 0 else { return true }
    return withContiguousBytes(a) { a in
      withContiguousBytes(b) { b in CRYPTO_memcmp(a.baseAddress, b.baseAddress, a.count) == 0 }
    }
  }

  private static func digest(_ md: OpaquePointer?, _ bytes: some Collection<UInt8>) -> [UInt8] {
    var out = [UInt8](repeating: 0, count: Int(EVP_MAX_MD_SIZE))
    var length: UInt32 = 0
    let status = withContiguousBytes(bytes) { input in
      out.withUnsafeMutableBufferPointer { outBytes in
        EVP_Digest(input.baseAddress, input.count, outBytes.baseAddress, &length, md, nil)
      }
    }
    precondition(status == 1, "EVP_Digest failed in libcrypto")
    return Array(out.prefix(Int(length)))
  }
}

/// Calls `body` with the bytes of `bytes` in contiguous memory, copying only when the collection has none.
func withContiguousBytes<R>(_ bytes: some Collection<UInt8>, _ body: (UnsafeRawBufferPointer) -> R) -> R {
  if let result = bytes.withContiguousStorageIfAvailable({ body(UnsafeRawBufferPointer($0)) }) {
    return result
  }
  return Array(bytes).withUnsafeBytes(body)
}
