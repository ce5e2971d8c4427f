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

  public init(user: EntityID, workspaces: Set<EntityID>) {
    self.user = user
    self.workspaces = workspaces
    workspaceIDs = Set(workspaces.lazy.map(\.rawValue))
  }
}

/// Maps bearer tokens to grants. Tokens are compared as SHA-256 digests in constant time, against every
/// configured token, so neither the timing of a comparison nor which token matched can be read from outside.
///
/// A request names its token in `Authorization: Bearer TOKEN`, or (for WebSocket clients that cannot set
/// headers, such as browsers) in the query parameter `access_token`.
public struct Authenticator: Sendable {
  private let grants: [(digest: [UInt8], grant: Grant)]
  /// No tokens configured: every request is the local user with the default workspace (loopback only; the
  /// configuration refuses anything else).
  public let isOpen: Bool

  public init(tokens: [TokenGrant]) {
    grants = tokens.map {
      (Crypto.sha256(Array($0.token.utf8)), Grant(user: $0.user, workspaces: $0.workspaces))
    }
    isOpen = tokens.isEmpty
  }

  /// The grant for `head`, or 401 naming what is wrong (no token, a malformed header, an unknown token).
  public func authenticate(_ head: HTTPRequestHead) -> Result<Grant, HTTPResponseError> {
    if isOpen {
      return .success(
        Grant(user: try! EntityID(validating: "local"), workspaces: [BrokerConfiguration.defaultWorkspace]))
    }
    let token: String
    if let header = head.headers["Authorization"] {
      let parts = header.split(separator: " ", maxSplits: 1)
      guard parts.count == 2, parts[0].lowercased() == "bearer", !parts[1].isEmpty else {
        return .failure(unauthorized("the Authorization header must be \"Bearer TOKEN\""))
      }
      token = String(parts[1])
    } else if let query = head.queryValue("access_token"), !query.isEmpty {
      token = query
    } else {
      return .failure(unauthorized("a bearer token is required"))
    }
    let digest = Crypto.sha256(Array(token.utf8))
    var found: Grant?
    for entry in grants where Crypto.constantTimeEquals(entry.digest, digest) && found == nil {
      found = entry.grant
    }
    guard let found else { return .failure(unauthorized("the token is not valid")) }
    return .success(found)
  }

  private func unauthorized(_ message: String) -> HTTPResponseError {
    HTTPResponseError(.unauthorized, message, headers: ["WWW-Authenticate": "Bearer realm=\"pagesync\""])
  }
}
