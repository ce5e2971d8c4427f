/// One thing a service tells its service manager, as sd_notify(3) spells it: a `NAME=value` line of the
/// datagram sent to `$NOTIFY_SOCKET`.
public enum ServiceNotification: Sendable, Equatable {
  /// Start-up is finished: the service does what it is for (`READY=1`). Under `Type=notify`, systemd holds
  /// units ordered after this one until it arrives, and `systemctl start` returns then. Also sent after a reload.
  case ready
  /// A reload began (`RELOADING=1`), with the `CLOCK_MONOTONIC` time it began in microseconds
  /// (`MONOTONIC_USEC=`), which systemd 253's `Type=notify-reload` uses to match the reload to the signal it sent.
  /// `ready` ends it.
  case reloading(monotonicMicroseconds: UInt64)
  /// Shutdown began (`STOPPING=1`): systemd shows the unit as deactivating rather than failed.
  case stopping
  /// The service is alive (`WATCHDOG=1`): sent at least once per `WatchdogSec=`, or systemd kills and restarts it.
  case watchdog
  /// A one-line free-text state shown by `systemctl status` (`STATUS=`); line breaks become spaces.
  case status(String)

  /// The line this notification is sent as.
  public var line: String {
    switch self {
    case .ready: "READY=1"
    case .reloading(let microseconds): "RELOADING=1\nMONOTONIC_USEC=\(microseconds)"
    case .stopping: "STOPPING=1"
    case .watchdog: "WATCHDOG=1"
    case .status(let text):
      // A line break would start a new assignment: the rest of the text would be read as one.
      "STATUS=" + String(text.map { $0 == "\n" || $0 == "\r" ? " " : $0 })
    }
  }

  /// The datagram carrying `notifications`, one line each, in order (systemd applies them in that order).
  public static func message(_ notifications: [ServiceNotification]) -> String {
    notifications.map(\.line).joined(separator: "\n")
  }
}
