// The device stream's codes in one catalogue, as nats-server keeps its errors (server/errors.json): the error
// codes of `{"op": "error"}` and why the broker closes a stream. A code keeps its meaning and is never reused;
// docs/protocol.md ("Codes") lists them, docs/operations.md counts them (`stream_errors_total`,
// `stream_closes_total`).

extension BrokerProtocol {
  /// The code of a device stream's error message (`{"op": "error", "code": 4400, "message": "…"}`). The stream
  /// stays open after each; the frame that caused it changed nothing.
  public enum StreamErrorCode: Int, CaseIterable, Sendable {
    /// A frame the broker cannot act on: a binary frame, text that is not a JSON message of the stream (see
    /// docs/protocol.md, "Strict JSON"), or an unknown `op`. The message says which.
    case invalidMessage = 4400
    /// The broker could not check a `subscribe` frame's pages (its store failed): nothing was subscribed; the same
    /// frame may succeed later.
    case subscriptionNotChecked = 4500

    /// What the code means, in a few words.
    public var meaning: String {
      switch self {
      case .invalidMessage: "a frame that is not a JSON message with a known op, or a binary frame"
      case .subscriptionNotChecked: "the broker could not check a subscription (store error); try again"
      }
    }
  }

  /// Why the broker closes a device stream, with the WebSocket close code and the reason it sends. (Closes the
  /// WebSocket layer decides, 1002, 1007, 1009 and a peer silent to pings, are the WebSocket's, not listed here.)
  public enum StreamCloseReason: CaseIterable, Sendable {
    /// 1001: the broker is shutting down (after sending what was pending).
    case shuttingDown
    /// 1008: the stream opened without a valid grant.
    case notAuthorized
    /// 1008: a configuration reload removed the stream's token.
    case tokenRevoked
    /// 1008: a reload narrowed the token's workspaces and the broker could not tell which subscriptions that
    /// ends (a store error): the device subscribes again under its new grant.
    case accessChanged
    /// 1008: a frame or fragmented message took longer than `[limits] frame_seconds` from its first byte (the
    /// WebSocket layer decides it; the broker names the limit).
    case frameTimeout
    /// 4401: the stream's JSON Web Token expired (`exp` plus the issuer's `leeway_s` passed). The device gets a
    /// fresh token and reconnects.
    case tokenExpired

    /// The WebSocket close code (RFC 6455 section 7.4).
    public var code: UInt16 {
      switch self {
      case .shuttingDown: 1001
      case .notAuthorized, .tokenRevoked, .accessChanged, .frameTimeout: 1008
      case .tokenExpired: 4401
      }
    }

    /// The reason sent in the close frame.
    public var reason: String {
      switch self {
      case .shuttingDown: "broker shutting down"
      case .notAuthorized: "not authorized"
      case .tokenRevoked: "token revoked"
      case .accessChanged: "access changed; subscribe again"
      case .frameTimeout: "frame not completed within [limits] frame_seconds"
      case .tokenExpired: "token expired"
      }
    }
  }
}

extension BrokerProtocol.StreamError {
  /// An error message with a catalogued code.
  public init(_ code: BrokerProtocol.StreamErrorCode, _ message: String) {
    self.init(code: code.rawValue, message: message)
  }
}
