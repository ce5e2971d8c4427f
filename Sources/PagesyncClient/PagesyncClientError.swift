/// Why a call of the daemon's local API gave no answer, or an answer that is not what the API promises.
///
/// `daemonError` is the daemon's own refusal (its status and message: docs/protocol.md, "The daemon's local
/// API"); the others say the exchange itself failed. For `connectionLost`, `timedOut` and `cancelled` the request
/// may or may not have taken effect: read the state again (or wait for the change stream) before repeating an
/// edit.
public enum PagesyncClientError: Error, Equatable, Sendable, CustomStringConvertible {
  /// The socket could not be connected: no file, nobody listening, no permission (`reason` says which).
  case unreachable(socket: String, reason: String)
  /// The daemon answered with an error status; `message` is its own (`{"error", "message"}`), or the status and
  /// the start of the body when it sent no JSON message.
  case daemonError(status: Int, message: String)
  /// The daemon's answer is not what the local API promises (not HTTP, not JSON, not the expected shape, an
  /// event stream that is not one).
  case invalidAnswer(String)
  /// The connection closed before the whole answer came.
  case connectionLost(socket: String, reason: String)
  /// No answer within the request's time limit.
  case timedOut(socket: String, seconds: UInt64)
  /// The calling task was cancelled while the request was under way; the connection was closed.
  case cancelled

  public var description: String {
    switch self {
    case .unreachable(let socket, let reason):
      "cannot reach the daemon at \(socket): \(reason) (is pagesyncd running?)"
    case .daemonError(let status, let message): "\(message) (HTTP \(status))"
    case .invalidAnswer(let what): "the daemon's answer is not valid: \(what)"
    case .connectionLost(let socket, let reason):
      "the daemon at \(socket) closed the connection before answering (\(reason)); "
        + "the request may or may not have taken effect"
    case .timedOut(let socket, let seconds):
      "no answer from the daemon at \(socket) within \(seconds) s; "
        + "the request may or may not have taken effect"
    case .cancelled:
      "the request was cancelled; it may or may not have taken effect"
    }
  }
}
