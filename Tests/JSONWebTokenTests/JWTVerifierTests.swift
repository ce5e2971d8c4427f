import Testing
import Web

@testable import JSONWebToken

/// The pure parts of JWT verification: base64url, the claims' checks at times the test chooses, HS256 end to
/// end with a secret made here, the refusal ranking. (The asymmetric algorithms are held to PyJWT in
/// IntegrationTests.JWTInteropTests.)
@Suite struct JWTVerifierTests {
  static let secret = Array("0123456789abcdef0123456789abcdef".utf8)
  static let now: Int64 = 1_700_000_000

  static func mint(
    header: String = #"{"alg":"HS256","typ":"JWT"}"#, claims: String, secret: [UInt8] = secret
  ) -> String {
    let input = Base64URL.encode(Array(header.utf8)) + "." + Base64URL.encode(Array(claims.utf8))
    return input + "." + Base64URL.encode(Crypto.hmacSHA256(key: secret, message: Array(input.utf8)))
  }

  static func verifier(_ configure: (inout JWTPolicy) -> Void = { _ in }) throws -> JWTVerifier {
    var policy = JWTPolicy(algorithms: [.hs256])
    configure(&policy)
    return JWTVerifier(policy: policy, keys: [try JWTKey(secret: secret)])
  }

  static let good = #"{"sub":"alice","workspaces":["w1","w2"],"exp":1700000100}"#

  @Test func base64URLIsStrict() {
    #expect(Base64URL.decode(Array("Zm9v".utf8)) == Array("foo".utf8))
    #expect(Base64URL.decode(Array("Zm8".utf8)) == Array("fo".utf8))
    #expect(Base64URL.decode(Array("Zg".utf8)) == Array("f".utf8))
    #expect(Base64URL.decode(Array("-_8".utf8)) == [0xFB, 0xFF])
    #expect(Base64URL.decode(Array("Zg==".utf8)) == nil, "padding")
    #expect(Base64URL.decode(Array("Zh".utf8)) == nil, "stray bits")
    #expect(Base64URL.decode(Array("Zm9".utf8)) == nil, "stray bits")
    #expect(Base64URL.decode(Array("Z".utf8)) == nil, "length 1 mod 4")
    #expect(Base64URL.decode(Array("+/8".utf8)) == nil, "standard alphabet")
    #expect(Base64URL.decode(Array("Zm 9v".utf8)) == nil, "whitespace")
    for length in 0..<40 {
      let bytes = (0..<length).map { UInt8(truncatingIfNeeded: $0 &* 37 &+ 11) }
      #expect(Base64URL.decode(Array(Base64URL.encode(bytes).utf8)) == bytes)
    }
  }

  @Test func aGoodHS256TokenGivesItsClaims() throws {
    let result = try Self.verifier().verify(Array(Self.mint(claims: Self.good).utf8), now: Self.now)
    #expect(
      result == .success(VerifiedToken(user: "alice", workspaces: ["w1", "w2"], expiresAt: 1_700_000_100)))
  }

  @Test func expiryAndNotBeforeFollowTheClockAndTheLeeway() throws {
    let token = Array(
      Self.mint(claims: #"{"sub":"a","workspaces":[],"exp":1700000100,"nbf":1700000050}"#).utf8)
    let strict = try Self.verifier()
    #expect(strict.verify(token, now: 1_700_000_049) == .failure(.notYetValid))
    #expect(strict.verify(token, now: 1_700_000_050).isSuccess)
    #expect(strict.verify(token, now: 1_700_000_099).isSuccess)
    #expect(strict.verify(token, now: 1_700_000_100) == .failure(.expired))
    let lenient = try Self.verifier { $0.leewaySeconds = 10 }
    #expect(lenient.verify(token, now: 1_700_000_040).isSuccess)
    #expect(lenient.verify(token, now: 1_700_000_109).isSuccess)
    #expect(lenient.verify(token, now: 1_700_000_110) == .failure(.expired))
    if case .success(let verified) = lenient.verify(token, now: 1_700_000_060) {
      #expect(verified.expiresAt == 1_700_000_110)
    }
  }

  @Test func issuerAndAudienceAreChecked() throws {
    let verifier = try Self.verifier {
      $0.issuer = "https://id.example"
      $0.audience = "pagesync"
    }
    func claims(_ extra: String) -> [UInt8] {
      Array(Self.mint(claims: #"{"sub":"a","workspaces":[],"exp":1700000100,"# + extra + "}").utf8)
    }
    #expect(verifier.verify(claims(#""iss":"https://id.example","aud":"pagesync""#), now: Self.now).isSuccess)
    #expect(
      verifier.verify(claims(#""iss":"https://id.example","aud":["x","pagesync"]"#), now: Self.now).isSuccess)
    #expect(
      verifier.verify(claims(#""iss":"https://evil.example","aud":"pagesync""#), now: Self.now)
        == .failure(.wrongIssuer))
    #expect(verifier.verify(claims(#""aud":"pagesync""#), now: Self.now) == .failure(.wrongIssuer))
    #expect(
      verifier.verify(claims(#""iss":"https://id.example","aud":["x"]"#), now: Self.now)
        == .failure(.wrongAudience))
    #expect(
      verifier.verify(claims(#""iss":"https://id.example""#), now: Self.now) == .failure(.wrongAudience))
    // Without a configured audience, a token that names one is not for this broker (RFC 7519 section 4.1.3).
    let anyAudience = try Self.verifier()
    #expect(anyAudience.verify(claims(#""aud":"pagesync""#), now: Self.now) == .failure(.wrongAudience))
    #expect(anyAudience.verify(claims(#""iss":"x""#), now: Self.now).isSuccess)
  }

  @Test func theClaimNamesAreConfigurable() throws {
    let verifier = try Self.verifier {
      $0.userClaim = "email_id"
      $0.workspacesClaim = "teams"
    }
    let token = Array(Self.mint(claims: #"{"email_id":"bob","teams":["t"],"exp":1700000100}"#).utf8)
    #expect(verifier.verify(token, now: Self.now).map(\.user) == .success("bob"))
    #expect(try Self.verifier().verify(token, now: Self.now) == .failure(.malformed))
  }

  @Test func refusals() throws {
    let verifier = try Self.verifier()
    func verdict(_ token: String) -> JWTRefusal? {
      if case .failure(let refusal) = verifier.verify(Array(token.utf8), now: Self.now) { return refusal }
      return nil
    }
    let good = Self.mint(claims: Self.good)
    #expect(verdict(good) == nil)
    #expect(verdict(Self.mint(claims: Self.good, secret: Array(repeating: 7, count: 32))) == .badSignature)
    #expect(verdict(String(good.dropLast(2)) + "AA") == .badSignature)
    #expect(verdict(Self.mint(header: #"{"alg":"none"}"#, claims: Self.good)) == .algorithmNotAllowed)
    #expect(verdict(Self.mint(header: #"{"alg":"RS256"}"#, claims: Self.good)) == .algorithmNotAllowed)
    #expect(verdict(Self.mint(header: #"{"alg":"HS256","kid":"k9"}"#, claims: Self.good)) == .unknownKeyID)
    #expect(verdict(Self.mint(header: #"{"alg":"HS256","crit":["x"]}"#, claims: Self.good)) == .malformed)
    #expect(verdict(Self.mint(header: #"{"alg":"HS256",}"#, claims: Self.good)) == .malformed)
    // A key twice, in the header or the claims (RFC 7515 section 5.2, RFC 7519 section 4).
    #expect(verdict(Self.mint(header: #"{"alg":"HS256","alg":"HS256"}"#, claims: Self.good)) == .malformed)
    #expect(
      verdict(Self.mint(claims: #"{"sub":"a","sub":"b","workspaces":[],"exp":1700000100}"#)) == .malformed)
    #expect(verdict(Self.mint(claims: #"{"sub":"a","workspaces":[]}"#)) == .malformed, "no exp")
    #expect(verdict(Self.mint(claims: #"{"sub":"a","workspaces":"w","exp":1700000100}"#)) == .malformed)
    #expect(verdict(Self.mint(claims: #"{"sub":1,"workspaces":[],"exp":1700000100}"#)) == .malformed)
    #expect(verdict(Self.mint(claims: #"{"sub":"a","workspaces":[],"exp":"1700000100"}"#)) == .malformed)
    #expect(verdict("a.b") == .malformed)
    #expect(verdict(good + ".x") == .malformed)
    #expect(verdict(good + "=") == .malformed)
    #expect(verdict("") == .malformed)
    // The none algorithm with an empty signature, as attackers send it.
    let none =
      Base64URL.encode(Array(#"{"alg":"none"}"#.utf8)) + "." + Base64URL.encode(Array(Self.good.utf8))
    #expect(verdict(none + ".") == .algorithmNotAllowed)
    // The ranking reports the refusal that got furthest.
    let claimsMalformed = JWTFailure(refusal: .malformed, afterSignature: true)
    #expect(
      max(claimsMalformed, JWTFailure(refusal: .badSignature, afterSignature: false)) == claimsMalformed)
    #expect(
      max(
        JWTFailure(refusal: .malformed, afterSignature: false),
        .init(refusal: .unknownKeyID, afterSignature: false)
      )
      .refusal == .unknownKeyID)
  }

  @Test func aSecretKeyNeverVerifiesAnotherAlgorithm() throws {
    let key = try JWTKey(secret: Self.secret)
    let input = Array("a.b".utf8)
    let mac = Crypto.hmacSHA256(key: Self.secret, message: input)
    #expect(key.verify(.hs256, input: input, signature: mac))
    for algorithm in [JWTAlgorithm.rs256, .es256, .edDSA] {
      #expect(!key.verify(algorithm, input: input, signature: mac))
    }
    #expect(throws: JWTKeyError.self) { try JWTKey(secret: Array(repeating: 1, count: 31)) }
  }

  @Test func anES256SignatureOfAnyLengthButSixtyFourIsRefused() {
    #expect(JWTKey.derSignature([UInt8](repeating: 1, count: 63)) == nil)
    #expect(JWTKey.derSignature([UInt8](repeating: 1, count: 65)) == nil)
    // r = s = 1: DER SEQUENCE { INTEGER 1, INTEGER 1 }.
    let one = [UInt8](repeating: 0, count: 31) + [1]
    #expect(JWTKey.derSignature(one + one) == [0x30, 0x06, 0x02, 0x01, 0x01, 0x02, 0x01, 0x01])
    // A high bit set gets a leading zero (a positive INTEGER).
    let high = [0x80] + [UInt8](repeating: 0, count: 31)
    #expect(JWTKey.derSignature(high + one)?.prefix(5) == [0x30, 0x26, 0x02, 0x21, 0x00])
  }

  @Test func aPEMThatIsNotAKeyIsAnError() {
    #expect(throws: JWTKeyError.self) { try JWTKey(pem: Array("-----BEGIN PUBLIC KEY-----\nAAAA\n".utf8)) }
    #expect(throws: JWTKeyError.self) { try JWKSet.keys(from: Array(#"{"keys":[]}"#.utf8)) }
    #expect(throws: JWTKeyError.self) {
      try JWKSet.keys(from: Array(#"{"keys":[{"kty":"EC","crv":"P-384","x":"AA","y":"AA"}]}"#.utf8))
    }
    #expect(throws: JWTKeyError.self) { try JWKSet.keys(from: Array("[1".utf8)) }
  }

  @Test func theCacheKeepsATokenUntilItExpiresAndStaysBounded() {
    var cache = JWTCache<String>(capacity: 3)
    let a: [UInt8] = [1]
    cache.insert("a", for: a, expiresAt: 110, now: 100)
    #expect(cache.value(for: a, now: 109) == "a")
    #expect(cache.value(for: a, now: 110) == nil)
    #expect(cache.count == 0, "an expired entry is dropped on lookup")
    cache.insert("late", for: a, expiresAt: 100, now: 100)
    #expect(cache.count == 0, "an already expired token is not kept")
    for index in 0..<10 { cache.insert("\(index)", for: [UInt8(index)], expiresAt: 1000, now: 100) }
    #expect(cache.count == 3)
    #expect(cache.value(for: [9], now: 100) == "9")
    #expect(cache.value(for: [6], now: 100) == nil, "the oldest went first")
    // Re-inserting keeps one entry; expiries and re-inserts never grow it past the capacity.
    for round in 0..<1000 {
      let key = [UInt8(round % 5)]
      _ = cache.value(for: key, now: Int64(100 + round))
      cache.insert("r", for: key, expiresAt: Int64(102 + round), now: Int64(100 + round))
      #expect(cache.count <= 3)
    }
    var none = JWTCache<String>(capacity: 0)
    none.insert("a", for: a, expiresAt: 1000, now: 100)
    #expect(none.value(for: a, now: 100) == nil)
  }
}

extension Result {
  var isSuccess: Bool {
    if case .success = self { return true }
    return false
  }
}
