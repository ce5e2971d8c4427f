/// The signature algorithms the broker verifies (RFC 7518 section 3.1, RFC 8037 for EdDSA). `none` is not one
/// and cannot be configured.
public enum JWTAlgorithm: String, Sendable, Hashable, CaseIterable {
  /// HMAC with SHA-256 under a shared secret.
  case hs256 = "HS256"
  /// RSASSA-PKCS1-v1_5 with SHA-256.
  case rs256 = "RS256"
  /// ECDSA on P-256 with SHA-256; the signature is JOSE's raw `r || s` (64 bytes).
  case es256 = "ES256"
  /// Ed25519 (the only EdDSA curve accepted).
  case edDSA = "EdDSA"
}

/// Why a token was refused: the 401's reason and the `/metrics` label. Ordered by the stage of verification
/// that refuses it (`JWTFailure` ranks the refusals of several `[[auth.jwt]]` entries by it).
public enum JWTRefusal: Int, Error, Sendable, Hashable, CaseIterable, Comparable {
  /// Not three base64url segments of JSON objects, a claim of the wrong type, a required claim (`exp`, the user
  /// and workspaces claims) absent, or longer than `[limits] token_bytes`.
  case malformed
  /// The header's `alg` is `none`, not in the entry's `algorithms`, or not the algorithm of any of its keys.
  case algorithmNotAllowed
  /// The header's `kid` names no key of the entry's JWK Set.
  case unknownKeyID
  /// The signature does not verify under the key.
  case badSignature
  /// `iss` is not the entry's `issuer`.
  case wrongIssuer
  /// `aud` (a string or an array) does not hold the entry's `audience`.
  case wrongAudience
  /// `nbf` is later than now plus `leeway_s`.
  case notYetValid
  /// `exp` is at or before now less `leeway_s`.
  case expired

  public static func < (a: JWTRefusal, b: JWTRefusal) -> Bool { a.rawValue < b.rawValue }

  /// The reason as the 401's body says it.
  public var message: String {
    switch self {
    case .malformed: "malformed"
    case .algorithmNotAllowed: "algorithm not allowed"
    case .unknownKeyID: "unknown key id"
    case .badSignature: "bad signature"
    case .wrongIssuer: "wrong issuer"
    case .wrongAudience: "wrong audience"
    case .notYetValid: "not yet valid"
    case .expired: "expired"
    }
  }

  /// The reason as a `/metrics` label.
  public var label: String { message.replacingSpaces() }
}

extension String {
  fileprivate func replacingSpaces() -> String {
    String(unicodeScalars.map { $0 == " " ? "_" : Character($0) })
  }
}
