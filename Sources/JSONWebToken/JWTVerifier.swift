import StrictJSON

/// What one `[[auth.jwt]]` entry accepts: its algorithms, issuer, audience, claim names and leeway.
public struct JWTPolicy: Sendable, Equatable {
  /// Algorithms a token may use; each must also be the algorithm of one of the keys.
  public var algorithms: Set<JWTAlgorithm>
  /// `iss` must equal it, when set.
  public var issuer: String?
  /// `aud` (a string, or an array of strings) must hold it, when set; when not set, a token with an `aud` is
  /// refused (RFC 7519 section 4.1.3).
  public var audience: String?
  /// The claim that names the user (a string that is an id).
  public var userClaim = "sub"
  /// The claim that lists the workspaces (an array of ids).
  public var workspacesClaim = "workspaces"
  /// Seconds of clock difference tolerated on `exp` and `nbf`.
  public var leewaySeconds: Int64 = 0

  public init(algorithms: Set<JWTAlgorithm>) { self.algorithms = algorithms }
}

/// A token whose signature and claims checked out.
public struct VerifiedToken: Sendable, Equatable {
  /// The user claim's value.
  public var user: String
  /// The workspaces claim's values (in the token's order, duplicates kept: the caller validates them).
  public var workspaces: [String]
  /// The second (Unix time) from which the token is refused: `exp` plus the leeway.
  public var expiresAt: Int64
}

/// Verifies JWS compact tokens (RFC 7515, 7519) under one policy and its keys: signature first, then `iss`,
/// `aud`, `nbf`, `exp`, then the user and workspaces claims. Pure apart from libcrypto: the clock is an argument.
///
/// Refuses `alg: none` and any algorithm not in the policy, a `crit` header (no extension is understood),
/// base64url with padding or stray bits, JSON that is not strict (StrictJSON), and a token without `exp`.
public struct JWTVerifier: Sendable {
  public let policy: JWTPolicy
  public let keys: [JWTKey]

  public init(policy: JWTPolicy, keys: [JWTKey]) {
    self.policy = policy
    self.keys = keys
  }

  /// `token`'s user, workspaces and end of validity at `now` (Unix seconds), or why it is refused.
  public func verify(_ token: some Collection<UInt8>, now: Int64) -> Result<VerifiedToken, JWTRefusal> {
    guard let parts = JWTParts(token) else { return .failure(.malformed) }
    return verify(parts, now: now).mapError(\.refusal)
  }

  /// As `verify(_:now:)`, for a token already split and decoded (several policies check one token); a refusal
  /// says whether the signature had verified.
  public func verify(_ parts: JWTParts, now: Int64) -> Result<VerifiedToken, JWTFailure> {
    verifySignature(parts).flatMap {
      check(parts.claims, now: now).mapError { JWTFailure(refusal: $0, afterSignature: true) }
    }
  }

  private func verifySignature(_ parts: JWTParts) -> Result<Void, JWTFailure> {
    func failure(_ refusal: JWTRefusal) -> Result<Void, JWTFailure> {
      .failure(JWTFailure(refusal: refusal, afterSignature: false))
    }
    guard let algorithm = JWTAlgorithm(rawValue: parts.header.algorithm),
      policy.algorithms.contains(algorithm)
    else { return failure(.algorithmNotAllowed) }
    let candidates: [JWTKey]
    if let kid = parts.header.keyID {
      guard let key = keys.first(where: { $0.id == kid }) else { return failure(.unknownKeyID) }
      guard key.algorithm == algorithm else { return failure(.algorithmNotAllowed) }
      candidates = [key]
    } else {
      candidates = keys.filter { $0.algorithm == algorithm }
      guard !candidates.isEmpty else { return failure(.algorithmNotAllowed) }
    }
    guard
      candidates.contains(where: {
        $0.verify(algorithm, input: parts.signingInput, signature: parts.signature)
      })
    else { return failure(.badSignature) }
    return .success(())
  }

  /// The claims' checks, after the signature verified (internal for tests: an injected clock, no keys).
  func check(_ claims: [String: ClaimValue], now: Int64) -> Result<VerifiedToken, JWTRefusal> {
    if let issuer = policy.issuer {
      guard case .string(let iss)? = claims["iss"], iss == issuer else { return .failure(.wrongIssuer) }
    }
    if let audience = policy.audience {
      switch claims["aud"] {
      case .string(let aud)? where aud == audience: break
      case .strings(let aud)? where aud.contains(audience): break
      default: return .failure(.wrongAudience)
      }
    } else if claims["aud"] != nil {
      // RFC 7519 section 4.1.3: a token with an audience is refused by a recipient that does not identify with
      // a value of it, and without `audience` the broker identifies with none (PyJWT refuses it too).
      return .failure(.wrongAudience)
    }
    let leeway = policy.leewaySeconds
    switch claims["nbf"] {
    case nil: break
    case .number(let nbf)?: if nbf > Double(now + leeway) { return .failure(.notYetValid) }
    default: return .failure(.malformed)
    }
    guard case .number(let exp)? = claims["exp"], exp.isFinite, abs(exp) < 1e15 else {
      return .failure(.malformed)
    }
    if exp <= Double(now - leeway) { return .failure(.expired) }
    guard case .string(let user)? = claims[policy.userClaim] else { return .failure(.malformed) }
    let workspaces: [String]
    switch claims[policy.workspacesClaim] {
    case .strings(let list)?: workspaces = list
    default: return .failure(.malformed)
    }
    // The first second at which `exp <= now - leeway` holds.
    let expiresAt = Int64(exp.rounded(.up)) + leeway
    return .success(VerifiedToken(user: user, workspaces: workspaces, expiresAt: expiresAt))
  }
}

/// A refusal and how far verification got: when several `[[auth.jwt]]` entries refuse one token, the refusal
/// of an entry whose key verified the signature is the one that tells (an expired token of issuer A is
/// "expired", not issuer B's "bad signature"); among the others, the later stage.
public struct JWTFailure: Error, Sendable, Equatable, Comparable {
  public var refusal: JWTRefusal
  /// Whether the signature had verified (the claims refused it).
  public var afterSignature: Bool

  public init(refusal: JWTRefusal, afterSignature: Bool) {
    self.refusal = refusal
    self.afterSignature = afterSignature
  }

  public static func < (a: JWTFailure, b: JWTFailure) -> Bool {
    (a.afterSignature ? 1 : 0, a.refusal.rawValue) < (b.afterSignature ? 1 : 0, b.refusal.rawValue)
  }
}

/// A claim's value, as far as the checks need it.
public enum ClaimValue: Sendable, Equatable {
  case string(String)
  case number(Double)
  /// An array of strings (an empty array included).
  case strings([String])
  /// Anything else: an object, a bool, null, a mixed array.
  case other
}

/// A JWS compact token split and decoded: its header's `alg` and `kid`, its claims, the signed bytes and the
/// signature. Nil when it is not three base64url segments whose first two are strict JSON objects, or when its
/// header is unusable (no string `alg`, a `crit`).
public struct JWTParts: Sendable {
  public struct Header: Sendable {
    public var algorithm: String
    public var keyID: String?
  }
  public let header: Header
  public let claims: [String: ClaimValue]
  /// `header.payload` as sent: what the signature signs.
  public let signingInput: [UInt8]
  public let signature: [UInt8]

  public init?(_ token: some Collection<UInt8>) {
    let token = Array(token)
    let dot = UInt8(ascii: ".")
    guard let first = token.firstIndex(of: dot),
      let second = token[(first + 1)...].firstIndex(of: dot),
      !token[(second + 1)...].contains(dot),
      let headerBytes = Base64URL.decode(token[..<first]),
      let payloadBytes = Base64URL.decode(token[(first + 1)..<second]),
      let signature = Base64URL.decode(token[(second + 1)...]),
      let headerMembers = Self.members(headerBytes),
      let claims = Self.members(payloadBytes),
      case .string(let algorithm)? = headerMembers["alg"],
      headerMembers["crit"] == nil
    else { return nil }
    var keyID: String?
    switch headerMembers["kid"] {
    case nil: break
    case .string(let kid)?: keyID = kid
    default: return nil
    }
    header = Header(algorithm: algorithm, keyID: keyID)
    self.claims = claims
    signingInput = Array(token[..<second])
    self.signature = signature
  }

  /// The members of the JSON object `bytes`, or nil if `bytes` is not exactly one strict JSON object or has a
  /// key twice. RFC 7515 section 5.2 and RFC 7519 section 4 allow a parser either to refuse duplicates or to
  /// take the last; parsers differ (Python's json takes the last, StrictJSON's decoders the first), so a token
  /// with `"alg"` twice could mean one thing to its issuer and another here: refused.
  static func members(_ bytes: [UInt8]) -> [String: ClaimValue]? {
    try? bytes.withUnsafeBufferPointer { buffer throws(JSONReadError) in
      try JSONReader.read(buffer) { reader throws(JSONReadError) in
        var out: [String: ClaimValue] = [:]
        var object = try reader.beginObject()
        while let key = try reader.nextKey(&object) {
          let name = key.string
          let value = try readValue(&reader)
          guard out.updateValue(value, forKey: name) == nil else { return nil }
        }
        return out
      }
    }
  }

  private static func readValue(_ reader: inout JSONReader) throws(JSONReadError) -> ClaimValue {
    switch try reader.peek() {
    case .string: return .string(try reader.readString())
    case .number: return .number(try reader.readDouble())
    case .array:
      var list: [String] = []
      var allStrings = true
      var elements = try reader.beginArray()
      while try reader.nextElement(&elements) {
        if allStrings, try reader.peek() == .string {
          list.append(try reader.readString())
        } else {
          allStrings = false
          try reader.skipValue()
        }
      }
      return allStrings ? .strings(list) : .other
    default:
      try reader.skipValue()
      return .other
    }
  }
}
