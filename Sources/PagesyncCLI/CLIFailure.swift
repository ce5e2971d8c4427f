import PagesyncClient

/// Why a command failed after its arguments were accepted: the client's error, which `pagesync` prints as one
/// line on stderr (`pagesync: MESSAGE`) with an exit status. (Usage errors are swift-argument-parser's: its
/// message and usage, exit 64.)
public typealias CLIFailure = PagesyncClientError

extension PagesyncClientError {
  /// The process exit status for this failure: 69 (EX_UNAVAILABLE) when the socket cannot be connected, 75
  /// (EX_TEMPFAIL) when no answer came in time, 64 (EX_USAGE) for a 400 (the request's own values are wrong: a
  /// position outside a block's text, a property that breaks a rule), else 1.
  public var exitCode: Int32 {
    switch self {
    case .unreachable: 69
    case .timedOut: 75
    case .daemonError(let status, _) where status == 400: 64
    case .daemonError, .invalidAnswer, .connectionLost, .cancelled: 1
    }
  }

  /// The line `pagesync` prints after `pagesync: `: the error's description, with where the socket comes from
  /// when it cannot be reached.
  public var commandLineMessage: String {
    if case .unreachable(let socket, let reason) = self {
      return "cannot reach the daemon at \(socket): \(reason) "
        + "(is pagesyncd running? set --socket or PAGESYNC_SOCKET)"
    }
    return description
  }
}
