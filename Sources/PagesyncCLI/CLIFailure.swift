/// Why a command failed after its arguments were accepted: the one line `pagesync` prints on stderr and its
/// exit status. (Usage errors are swift-argument-parser's: its message and usage, exit 64.)
public enum CLIFailure: Error, Equatable, Sendable, CustomStringConvertible {
  /// The socket could not be connected (no file, nobody listening, no permission): exit 69, EX_UNAVAILABLE.
  case unreachable(socket: String, reason: String)
  /// The daemon answered with an error status; `message` is its own (`{"error", "message"}`): exit 64
  /// (EX_USAGE) for a 400, the request's own values being wrong (a position outside a block's text, a
  /// property that breaks a rule), else 1.
  case daemonError(status: Int, message: String)
  /// The daemon's answer is not what the local API promises (not HTTP, not JSON, not the expected shape):
  /// exit 1.
  case invalidAnswer(String)
  /// The connection closed before the whole answer came: exit 1. Whether the request took effect is unknown.
  case connectionLost(socket: String, reason: String)
  /// No answer within the time limit: exit 75, EX_TEMPFAIL. Whether the request took effect is unknown.
  case timedOut(socket: String, seconds: UInt64)

  /// The process exit status for this failure.
  public var exitCode: Int32 {
    switch self {
    case .unreachable: 69
    case .timedOut: 75
    case .daemonError(let status, _) where status == 400: 64
    case .daemonError, .invalidAnswer, .connectionLost: 1
    }
  }

  public var description: String {
    switch self {
    case .unreachable(let socket, let reason):
      "cannot reach the daemon at \(socket): \(reason) "
        + "(is pagesyncd running? set --socket or PAGESYNC_SOCKET)"
    case .daemonError(let status, let message): "\(message) (HTTP \(status))"
    case .invalidAnswer(let what): "the daemon's answer is not valid: \(what)"
    case .connectionLost(let socket, let reason):
      "the daemon at \(socket) closed the connection before answering (\(reason)); "
        + "the request may or may not have taken effect"
    case .timedOut(let socket, let seconds):
      "no answer from the daemon at \(socket) within \(seconds) s; "
        + "the request may or may not have taken effect"
    }
  }
}
