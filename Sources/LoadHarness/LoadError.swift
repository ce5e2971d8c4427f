/// Why a load run could not produce a result.
public enum LoadError: Error, CustomStringConvertible {
  /// The broker or redis-server could not be started, or exited before it was ready.
  case serverFailed(String)
  /// A connection could not be made, or a handshake or subscription was refused.
  case connectFailed(String)
  /// Setting up the scenario's data (pages, a device's offline set) failed.
  case setupFailed(String)
  /// The run did not finish within its bound.
  case timedOut(String)
  /// An option is out of range or does not fit the scenario.
  case invalidOption(String)
  /// SIGINT or SIGTERM arrived during the run: the servers the harness started were stopped, no report.
  case interrupted(String)

  public var description: String {
    switch self {
    case .serverFailed(let message): "server: \(message)"
    case .connectFailed(let message): "connect: \(message)"
    case .setupFailed(let message): "setup: \(message)"
    case .timedOut(let message): "timed out: \(message)"
    case .invalidOption(let message): "invalid option: \(message)"
    case .interrupted(let message): "interrupted: \(message)"
    }
  }
}
