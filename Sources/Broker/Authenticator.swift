import JSONWebToken
import SyncModel
import Web

/// Who a request is, once its token checked out.
public struct Grant: Sendable, Equatable {
  public var user: EntityID
  public var workspaces: Set<EntityID> {
    didSet { workspaceIDs = Set(workspaces.lazy.map(\.rawValue)) }
  }
  /// The workspaces as strings, as the fan-out compares them (BrokerCore knows no `EntityID`): made once per
  /// token, so the streams of a token share one set.
  public private(set) var workspaceIDs: Set<String>
  /// For a JSON Web Token: the second (Unix time) from which it is refused (`exp` plus the leeway); an open
  /// device stream is closed then (4401, "token expired"). Nil for a token of `[[auth.tokens]]`.
  public var expiresAt: Int64?

  public init(user: EntityID, workspaces: Set<EntityID>, expiresAt: Int64? = nil) {
    self.user = user
    self.workspaces = workspaces
    self.expiresAt = expiresAt
    workspaceIDs = Set(workspaces.lazy.map(\.rawValue))
  }
}

/// Why a request was not authenticated: the 401's message and the `/metrics` label
/// (`pagesync_broker_auth_refusals_total{reason}`).
public struct AuthRefusal: Error, Sendable, Equatable {
  /// The `/metrics` label: `missing_token`, `malformed_header`, `unknown_token`, or a `JWTRefusal`'s label.
  public var reason: String
  /// The body's `error`.
  public var message: String
  /// The JWT refusal, if the token was a JWT.
  public var jwt: JWTRefusal?

  /// The 401 answer, with `WWW-Authenticate` (RFC 6750 section 3).
  public var response: HTTPResponse {
    let challenge =
      jwt == nil
      ? "Bearer realm=\"pagesync\"" : "Bearer realm=\"pagesync\", error=\"invalid_token\""
    return HTTPResponseError(.unauthorized, message, headers: ["WWW-Authenticate": challenge]).response
  }

  /// Every reason a refusal may have (each gets its counter at start, at zero).
  public static let reasons =
    ["missing_token", "malformed_header", "unknown_token"] + JWTRefusal.allCases.map(\.label)
}

/// Maps bearer tokens to grants: the tokens of `[[auth.tokens]]`, and JSON Web Tokens of the `[[auth.jwt]]`
/// issuers.
///
/// Static tokens are compared as SHA-256 digests in constant time, against every configured token, so neither
/// the timing of a comparison nor which token matched can be read from outside. A token that is not one of them
/// and has the shape of a JWT (two dots) is verified under each `[[auth.jwt]]` entry; the first that accepts it
/// gives the grant, and if none does the refusal that got furthest is reported. A verified JWT is cached by its
/// digest until it expires (`[limits] jwt_cache_entries`), so that a device that reconnects costs a lookup.
///
/// A request names its token in `Authorization: Bearer TOKEN`, or (for WebSocket clients that cannot set
/// headers, such as browsers) in the query parameter `access_token`.
///
/// Threading: the broker's loop thread (the cache is mutable).
public final class Authenticator {
  private let grants: [(digest: [UInt8], grant: Grant)]
  private let verifiers: [JWTVerifier]
  private var cache: JWTCache<Grant>
  private let maxTokenBytes: Int
  /// The wall clock in Unix seconds (injected by tests).
  private let now: () -> Int64
  /// No tokens configured: every request is the local user with the default workspace (loopback only; the
  /// configuration refuses anything else).
  public let isOpen: Bool
  /// JWT verifications that ran (cache misses that got as far as a signature), for tests and the benchmark.
  public private(set) var signatureChecks = 0
  /// The grant of every request when `isOpen`: made once, so that open streams share its sets as the streams of
  /// one token do.
  private let openGrant = Grant(
    user: try! EntityID(validating: "local"), workspaces: [BrokerConfiguration.defaultWorkspace])
  /// The header fields `authenticate(_:)` reads (besides the target's `access_token`): what a device stream
  /// keeps of its upgrade request to be authorized again on reload (`WebSocket.keepRequest(headers:)`).
  public static let requestHeaders = ["Authorization"]

  public init(
    tokens: [TokenGrant], jwt: [JWTConfiguration] = [], limits: BrokerLimits = BrokerLimits(),
    // Not time(2): glibc answers it from the coarse clock, a tick behind the CLOCK_REALTIME the stream's expiry
    // timer reads, and a stream closed for expiry could then reconnect with its token inside that tick.
    now: @escaping () -> Int64 = { BrokerServer.wallClockMillis() / 1000 }
  ) {
    grants = tokens.map {
      (Crypto.sha256(Array($0.token.utf8)), Grant(user: $0.user, workspaces: $0.workspaces))
    }
    verifiers = jwt.map { JWTVerifier(policy: $0.policy, keys: $0.keys) }
    cache = JWTCache(capacity: limits.jwtCacheEntries)
    maxTokenBytes = limits.tokenBytes
    self.now = now
    isOpen = tokens.isEmpty && jwt.isEmpty
  }

  /// Takes over `previous`'s verified tokens: for a reload that changed the static tokens but no JWT setting, so
  /// that re-authorizing every open stream costs a lookup each, not a signature each.
  public func keepVerifiedTokens(of previous: Authenticator) {
    cache = previous.cache
  }

  /// The grant for `head`, or the refusal (401) naming what is wrong.
  public func authenticate(_ head: HTTPRequestHead) -> Result<Grant, AuthRefusal> {
    if isOpen { return .success(openGrant) }
    let token: String
    if let header = head.headers["Authorization"] {
      let parts = header.split(separator: " ", maxSplits: 1)
      guard parts.count == 2, parts[0].lowercased() == "bearer", !parts[1].isEmpty else {
        return .failure(
          AuthRefusal(
            reason: "malformed_header", message: "the Authorization header must be \"Bearer TOKEN\""))
      }
      token = String(parts[1])
    } else if let query = head.queryValue("access_token"), !query.isEmpty {
      token = query
    } else {
      return .failure(AuthRefusal(reason: "missing_token", message: "a bearer token is required"))
    }
    return authenticate(token: Array(token.utf8))
  }

  /// The grant for a bearer token's bytes, or the refusal.
  public func authenticate(token: [UInt8]) -> Result<Grant, AuthRefusal> {
    guard token.count <= maxTokenBytes else {
      return .failure(jwtRefusal(.malformed, "longer than [limits] token_bytes (\(maxTokenBytes))"))
    }
    let digest = Crypto.sha256(token)
    var found: Grant?
    for entry in grants where Crypto.constantTimeEquals(entry.digest, digest) && found == nil {
      found = entry.grant
    }
    if let found { return .success(found) }
    guard !verifiers.isEmpty, token.lazy.filter({ $0 == UInt8(ascii: ".") }).count == 2 else {
      return .failure(AuthRefusal(reason: "unknown_token", message: "the token is not valid"))
    }
    let now = now()
    if let cached = cache.value(for: digest, now: now) { return .success(cached) }
    guard let parts = JWTParts(token) else { return .failure(jwtRefusal(.malformed)) }
    signatureChecks += 1
    var refusal = JWTFailure(refusal: .malformed, afterSignature: false)
    for verifier in verifiers {
      switch verifier.verify(parts, now: now) {
      case .success(let verified):
        guard let grant = Self.grant(verified) else {
          return .failure(jwtRefusal(.malformed, "the user or a workspace is not an id"))
        }
        cache.insert(grant, for: digest, expiresAt: verified.expiresAt, now: now)
        return .success(grant)
      case .failure(let reason): refusal = max(refusal, reason)
      }
    }
    return .failure(jwtRefusal(refusal.refusal))
  }

  private static func grant(_ token: VerifiedToken) -> Grant? {
    guard let user = try? EntityID(validating: token.user) else { return nil }
    var workspaces: Set<EntityID> = []
    for name in token.workspaces {
      guard let workspace = try? EntityID(validating: name) else { return nil }
      workspaces.insert(workspace)
    }
    return Grant(user: user, workspaces: workspaces, expiresAt: token.expiresAt)
  }

  private func jwtRefusal(_ reason: JWTRefusal, _ detail: String? = nil) -> AuthRefusal {
    let message = "token refused: " + reason.message + (detail.map { " (\($0))" } ?? "")
    return AuthRefusal(reason: reason.label, message: message, jwt: reason)
  }
}
