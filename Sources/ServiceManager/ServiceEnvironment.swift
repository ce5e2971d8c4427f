#if canImport(Glibc)
  import Glibc
#endif

/// What the service manager told this process through its environment: where to send notifications
/// (`NOTIFY_SOCKET`, sd_notify(3)) and how often it expects a sign of life (`WATCHDOG_USEC`, `WATCHDOG_PID`,
/// sd_watchdog_enabled(3)). A value, so tests build one from a dictionary.
public struct ServiceEnvironment: Sendable, Equatable {
  /// Where notifications go; nil when `NOTIFY_SOCKET` is unset (not started by systemd, or not `Type=notify`)
  /// or unusable (see `problems`).
  public var notifySocket: NotifySocketAddress?
  /// The watchdog timeout (`WatchdogSec=`) in microseconds; nil when there is none or it is meant for another
  /// process (`WATCHDOG_PID` names another one).
  public var watchdogMicroseconds: UInt64?
  /// What was wrong with the variables, one line each, for the log. Unset variables are not problems.
  public var problems: [String] = []

  /// Reads `variables` as the environment of the process `processID`.
  public init(variables: [String: String], processID: Int32) {
    if let socket = variables["NOTIFY_SOCKET"] {
      do { notifySocket = try NotifySocketAddress(parsing: socket) } catch {
        problems.append(error.description)
      }
    }
    if let text = variables["WATCHDOG_USEC"] {
      if let microseconds = UInt64(text), microseconds > 0 {
        watchdogMicroseconds = microseconds
      } else {
        problems.append("WATCHDOG_USEC=\(text): not a positive number of microseconds")
      }
    }
    // systemd sets WATCHDOG_PID to the main process: a child that inherited the variables must not ping for it.
    if let text = variables["WATCHDOG_PID"], watchdogMicroseconds != nil {
      if let pid = Int32(text), pid > 0 {
        if pid != processID { watchdogMicroseconds = nil }
      } else {
        watchdogMicroseconds = nil
        problems.append("WATCHDOG_PID=\(text): not a process id")
      }
    }
  }

  /// The environment of this process.
  public static func current() -> ServiceEnvironment {
    var variables: [String: String] = [:]
    for name in ["NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID"] {
      if let value = getenv(name) { variables[name] = String(cString: value) }
    }
    return ServiceEnvironment(variables: variables, processID: getpid())
  }

  /// How often to send `WATCHDOG=1`, in milliseconds: half the timeout, as sd_watchdog_enabled(3) advises, so
  /// one late turn of the loop is not yet fatal; at least 1. Nil without a watchdog or a socket to ping on.
  public var watchdogPingInterval: UInt64? {
    guard notifySocket != nil, let microseconds = watchdogMicroseconds else { return nil }
    return max(1, microseconds / 2 / 1000)
  }
}
