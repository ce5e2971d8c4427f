import CCrypto

/// One verification key and the one algorithm it verifies. The key's type decides the algorithm: a secret
/// verifies HS256 only, an RSA key RS256, a P-256 key ES256, an Ed25519 key EdDSA. So a token cannot choose
/// how its key is used: an HS256 token is never checked with an RSA public key's bytes as the secret.
///
/// Immutable once made; libcrypto allows concurrent verifications with one `EVP_PKEY`.
public final class JWTKey: @unchecked Sendable {
  /// The JWK's `kid`, if it came from a JWK Set and had one.
  public let id: String?
  /// The only algorithm this key verifies.
  public let algorithm: JWTAlgorithm
  /// The secret (HS256).
  private let secret: [UInt8]
  /// The public key (every other algorithm); owned.
  private let publicKey: OpaquePointer?

  /// An HS256 key. Shorter than 32 bytes is refused (RFC 7518 section 3.2: at least the hash's size).
  public init(secret: [UInt8], id: String? = nil) throws(JWTKeyError) {
    guard secret.count >= 32 else {
      throw JWTKeyError("an HS256 secret must be at least 32 bytes (it has \(secret.count))")
    }
    self.id = id
    self.secret = secret
    publicKey = nil
    algorithm = .hs256
  }

  private init(publicKey: OpaquePointer, id: String?) throws(JWTKeyError) {
    self.id = id
    self.secret = []
    self.publicKey = publicKey
    do {
      algorithm = try Self.algorithm(of: publicKey)
    } catch {
      EVP_PKEY_free(publicKey)
      throw error
    }
  }

  deinit {
    if let publicKey { EVP_PKEY_free(publicKey) }
  }

  /// A public key from PEM text (`-----BEGIN PUBLIC KEY-----`, SubjectPublicKeyInfo): RSA of 2048 bits or
  /// more, EC P-256, or Ed25519.
  public convenience init(pem: [UInt8]) throws(JWTKeyError) {
    let key: OpaquePointer? = pem.withUnsafeBytes { bytes in
      guard let bio = BIO_new_mem_buf(bytes.baseAddress, Int32(bytes.count)) else { return nil }
      defer { BIO_free(bio) }
      return PEM_read_bio_PUBKEY(bio, nil, nil, nil)
    }
    ERR_clear_error()
    guard let key else { throw JWTKeyError("not a PEM public key (-----BEGIN PUBLIC KEY-----)") }
    try self.init(publicKey: key, id: nil)
  }

  /// An RSA public key from its JWK parameters (big-endian modulus and exponent).
  public convenience init(rsaModulus n: [UInt8], exponent e: [UInt8], id: String?) throws(JWTKeyError) {
    guard
      let key = Self.fromData(
        type: "RSA",
        { builder in
          guard let n = BN_bin2bn(n, Int32(n.count), nil) else { return nil }
          guard let e = BN_bin2bn(e, Int32(e.count), nil) else {
            BN_free(n)
            return nil
          }
          guard OSSL_PARAM_BLD_push_BN(builder, cName("n"), n) == 1,
            OSSL_PARAM_BLD_push_BN(builder, cName("e"), e) == 1
          else {
            BN_free(n)
            BN_free(e)
            return nil
          }
          return [n, e]
        })
    else { throw JWTKeyError("not a usable RSA public key") }
    try self.init(publicKey: key, id: id)
  }

  /// A P-256 public key from its JWK coordinates (32 bytes each).
  public convenience init(p256X x: [UInt8], y: [UInt8], id: String?) throws(JWTKeyError) {
    guard x.count == 32, y.count == 32 else { throw JWTKeyError("P-256 coordinates must be 32 bytes each") }
    let point = [0x04] + x + y
    // The builder keeps the pointers it is given until OSSL_PARAM_BLD_to_param copies them: build inside
    // the scope where they are valid.
    let made = point.withUnsafeBufferPointer { point in
      "prime256v1".withCString { group in
        Self.fromData(type: "EC") { builder in
          guard OSSL_PARAM_BLD_push_utf8_string(builder, cName("group"), group, 0) == 1,
            OSSL_PARAM_BLD_push_octet_string(builder, cName("pub"), point.baseAddress, point.count) == 1
          else { return nil }
          return []
        }
      }
    }
    guard let key = made
    else { throw JWTKeyError("not a point on P-256") }
    try self.init(publicKey: key, id: id)
  }

  /// An Ed25519 public key from its JWK `x` (32 bytes).
  public convenience init(ed25519 x: [UInt8], id: String?) throws(JWTKeyError) {
    guard x.count == 32, let key = EVP_PKEY_new_raw_public_key(EVP_PKEY_ED25519, nil, x, x.count) else {
      ERR_clear_error()
      throw JWTKeyError("an Ed25519 public key must be 32 bytes")
    }
    try self.init(publicKey: key, id: id)
  }

  /// Whether `signature` signs `input` under this key with `algorithm`; false for any other algorithm.
  public func verify(_ algorithm: JWTAlgorithm, input: some Collection<UInt8>, signature: [UInt8]) -> Bool {
    guard algorithm == self.algorithm else { return false }
    let input = Array(input)
    switch algorithm {
    case .hs256:
      var out = [UInt8](repeating: 0, count: Int(EVP_MAX_MD_SIZE))
      var length: UInt32 = 0
      let made = HMAC(EVP_sha256(), secret, Int32(secret.count), input, input.count, &out, &length)
      guard made != nil, signature.count == Int(length) else { return false }
      return CRYPTO_memcmp(out, signature, signature.count) == 0
    case .rs256:
      return digestVerify(EVP_sha256(), input, signature)
    case .es256:
      guard signature.count == 64, let der = Self.derSignature(signature) else { return false }
      return digestVerify(EVP_sha256(), input, der)
    case .edDSA:
      return digestVerify(nil, input, signature)
    }
  }

  private func digestVerify(_ digest: OpaquePointer?, _ input: [UInt8], _ signature: [UInt8]) -> Bool {
    guard let publicKey, let context = EVP_MD_CTX_new() else { return false }
    defer {
      EVP_MD_CTX_free(context)
      ERR_clear_error()
    }
    guard EVP_DigestVerifyInit(context, nil, digest, nil, publicKey) == 1 else { return false }
    return EVP_DigestVerify(context, signature, signature.count, input, input.count) == 1
  }

  /// JOSE's ES256 signature (`r || s`, 32 bytes each, RFC 7518 section 3.4) as the DER `ECDSA-Sig-Value`
  /// libcrypto verifies.
  static func derSignature(_ raw: [UInt8]) -> [UInt8]? {
    guard raw.count == 64, let signature = ECDSA_SIG_new() else { return nil }
    defer { ECDSA_SIG_free(signature) }
    guard let r = BN_bin2bn(raw, 32, nil) else { return nil }
    guard let s = raw.withUnsafeBufferPointer({ BN_bin2bn($0.baseAddress! + 32, 32, nil) }) else {
      BN_free(r)
      return nil
    }
    guard ECDSA_SIG_set0(signature, r, s) == 1 else {
      BN_free(r)
      BN_free(s)
      return nil
    }
    let length = i2d_ECDSA_SIG(signature, nil)
    guard length > 0 else { return nil }
    var der = [UInt8](repeating: 0, count: Int(length))
    let written = der.withUnsafeMutableBufferPointer { buffer -> Int32 in
      var cursor: UnsafeMutablePointer<UInt8>? = buffer.baseAddress
      return i2d_ECDSA_SIG(signature, &cursor)
    }
    return written == length ? der : nil
  }

  /// A public key of `type` made from the parameters `push` adds (OpenSSL 3's `EVP_PKEY_fromdata`). `push`
  /// returns the big numbers it pushed, freed once the parameters are built, or nil if it failed.
  private static func fromData(
    type: String, _ push: (OpaquePointer) -> [OpaquePointer]?
  ) -> OpaquePointer? {
    defer { ERR_clear_error() }
    guard let builder = OSSL_PARAM_BLD_new() else { return nil }
    defer { OSSL_PARAM_BLD_free(builder) }
    guard let numbers = push(builder) else { return nil }
    defer { for number in numbers { BN_free(number) } }
    guard let params = OSSL_PARAM_BLD_to_param(builder) else { return nil }
    defer { OSSL_PARAM_free(params) }
    guard let context = EVP_PKEY_CTX_new_from_name(nil, type, nil) else { return nil }
    defer { EVP_PKEY_CTX_free(context) }
    guard EVP_PKEY_fromdata_init(context) == 1 else { return nil }
    var key: OpaquePointer?
    // EVP_PKEY_PUBLIC_KEY (a macro Swift does not import): the domain parameters and the public key.
    let selection = OSSL_KEYMGMT_SELECT_PUBLIC_KEY | 0x04 | 0x80
    guard EVP_PKEY_fromdata(context, &key, Int32(selection), params) == 1 else { return nil }
    return key
  }

  /// The algorithm a public key verifies, or an error for a key of another type, curve or a weak size.
  private static func algorithm(of key: OpaquePointer) throws(JWTKeyError) -> JWTAlgorithm {
    switch EVP_PKEY_get_base_id(key) {
    case EVP_PKEY_RSA:
      let bits = EVP_PKEY_get_bits(key)
      guard bits >= 2048 else {
        throw JWTKeyError("an RSA key must have at least 2048 bits (it has \(bits))")
      }
      return .rs256
    case EVP_PKEY_EC:
      var name = [CChar](repeating: 0, count: 64)
      var length = 0
      guard EVP_PKEY_get_group_name(key, &name, name.count, &length) == 1,
        String(decoding: name.prefix(length).map { UInt8(bitPattern: $0) }, as: UTF8.self) == "prime256v1"
      else {
        ERR_clear_error()
        throw JWTKeyError("an EC key must be on P-256 (ES256)")
      }
      // A point not on the curve is refused here rather than at every verification.
      guard let context = EVP_PKEY_CTX_new_from_pkey(nil, key, nil) else {
        throw JWTKeyError("not a usable key")
      }
      defer { EVP_PKEY_CTX_free(context) }
      guard EVP_PKEY_public_check(context) == 1 else {
        ERR_clear_error()
        throw JWTKeyError("the EC point is not on P-256")
      }
      return .es256
    case EVP_PKEY_ED25519:
      return .edDSA
    default:
      throw JWTKeyError("a key of a type the broker does not verify (RSA, EC P-256 or Ed25519)")
    }
  }
}

/// A parameter name as a C string that lives as long as the program: OSSL_PARAM_BLD keeps the name's pointer
/// until `OSSL_PARAM_BLD_to_param`, so the temporary C string Swift makes of a `String` argument will not do.
private func cName(_ name: StaticString) -> UnsafePointer<CChar> {
  UnsafeRawPointer(name.utf8Start).assumingMemoryBound(to: CChar.self)
}

/// Why a key could not be used: a sentence, which the configuration prefixes with the file.
public struct JWTKeyError: Error, Sendable, Equatable, CustomStringConvertible {
  public var description: String
  public init(_ description: String) { self.description = description }
}
