/// The status code of a WebSocket close frame (RFC 6455 section 7.4).
///
/// Any 16-bit value can be represented, so a code received from a peer can be logged as it was; use
/// `isSendable` to decide whether it may appear on the wire.
public struct WebSocketCloseCode: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
  public var rawValue: UInt16
  public init(rawValue: UInt16) { self.rawValue = rawValue }
  public init(_ rawValue: UInt16) { self.rawValue = rawValue }

  /// The purpose for which the connection was established has been fulfilled.
  public static let normalClosure = WebSocketCloseCode(1000)
  /// The endpoint is going away: a server shutting down, a browser leaving the page.
  public static let goingAway = WebSocketCloseCode(1001)
  /// The peer broke the protocol.
  public static let protocolError = WebSocketCloseCode(1002)
  /// The peer sent a kind of data this endpoint does not accept (e.g. binary where only text is understood).
  public static let unsupportedData = WebSocketCloseCode(1003)
  /// Reported locally when a close frame carried no code; never sent.
  public static let noStatusReceived = WebSocketCloseCode(1005)
  /// Reported locally when the connection dropped without a close frame; never sent.
  public static let abnormalClosure = WebSocketCloseCode(1006)
  /// A message's data did not match its type, e.g. a text message that is not UTF-8.
  public static let invalidFramePayloadData = WebSocketCloseCode(1007)
  /// A message violated the endpoint's policy; the generic code when no other fits.
  public static let policyViolation = WebSocketCloseCode(1008)
  /// A frame or message was larger than the endpoint accepts.
  public static let messageTooBig = WebSocketCloseCode(1009)
  /// The client expected the server to negotiate an extension it did not.
  public static let mandatoryExtension = WebSocketCloseCode(1010)
  /// The server met an unexpected condition.
  public static let internalError = WebSocketCloseCode(1011)
  /// The server is restarting; the client may reconnect after a short delay.
  public static let serviceRestart = WebSocketCloseCode(1012)
  /// The server is overloaded; the client should reconnect later.
  public static let tryAgainLater = WebSocketCloseCode(1013)

  /// Whether a peer may send this code in a close frame: 1000-1003, 1007-1014 (the IANA-registered codes
  /// that are not reserved for local use), and 3000-4999 (registered libraries and private use).
  ///
  /// 1004, 1005, 1006 and 1015 are reserved and must never appear on the wire; 0-999, 1016-2999 and 5000 and
  /// above are not defined.
  public var isSendable: Bool {
    switch rawValue {
    case 1000...1003, 1007...1014, 3000...4999: true
    default: false
    }
  }

  /// The code and, for a registered one, its name: `1002 (protocol error)`.
  public var description: String {
    let name: String? =
      switch rawValue {
      case 1000: "normal closure"
      case 1001: "going away"
      case 1002: "protocol error"
      case 1003: "unsupported data"
      case 1005: "no status received"
      case 1006: "abnormal closure"
      case 1007: "invalid frame payload data"
      case 1008: "policy violation"
      case 1009: "message too big"
      case 1010: "mandatory extension"
      case 1011: "internal error"
      case 1012: "service restart"
      case 1013: "try again later"
      case 1014: "bad gateway"
      case 1015: "TLS handshake failure"
      default: nil
      }
    guard let name else { return String(rawValue) }
    return "\(rawValue) (\(name))"
  }
}
