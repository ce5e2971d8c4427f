import EventLoop

#if canImport(Glibc)
  import Glibc
#endif

/// Tells systemd how the service is doing, without libsystemd: each notification is one datagram on an
/// `AF_UNIX`/`SOCK_DGRAM` socket to `$NOTIFY_SOCKET` (sd_notify(3)). Without the variable (not under systemd, or
/// not `Type=notify`) every method does nothing, so callers need not check.
///
/// ```
///   init ──ready()──▶ ready ──stopping()──▶ stopping
///                     │  ▲
///          reloading()│  │ready()        startUpdates(loop:): every tick WATCHDOG=1 (if the watchdog is on)
///                     ▼  │               and STATUS= (if the text changed, until stopping)
///                   reloading
/// ```
///
/// The watchdog is fed from a timer on the service's loop, never from another thread: a loop stuck in a callback
/// misses its pings, and systemd kills and restarts the process — which is the point of `WatchdogSec=`.
///
/// Sends never block the loop: the socket is non-blocking, and a datagram that does not fit the manager's queue is
/// dropped (the next tick sends again). Failures are kept in `lastError`, not thrown: being unable to tell systemd
/// must not stop the service.
///
/// Threading: the loop thread of `startUpdates` once called; before that, the thread that created it.
public final class ServiceNotifier {
  /// What the environment said.
  public let environment: ServiceEnvironment
  /// The socket notifications leave through; -1 when disabled.
  private var descriptor: Int32 = -1
  /// Why the last send (or the socket's creation) failed; nil once one succeeds.
  public private(set) var lastError: String?
  /// Datagrams sent so far.
  public private(set) var sentCount = 0
  private var timer: LoopTimer?
  private var statusText: (() -> String)?
  private var lastStatus: String?
  private var isStopping = false

  /// How often `startUpdates` refreshes `STATUS=` when there is no watchdog to tick faster.
  public static let defaultStatusInterval: UInt64 = 10_000

  /// A notifier for `environment` (by default this process's): opens the socket when `NOTIFY_SOCKET` names one.
  public init(environment: ServiceEnvironment = .current()) {
    self.environment = environment
    guard environment.notifySocket != nil else { return }
    let flags = SOCK_DGRAM.rawValue | SOCK_CLOEXEC.rawValue | SOCK_NONBLOCK.rawValue
    descriptor = socket(AF_UNIX, Int32(flags), 0)
    if descriptor < 0 { lastError = "socket: \(String(cString: strerror(errno)))" }
  }

  deinit { if descriptor >= 0 { Glibc.close(descriptor) } }

  /// Whether notifications go anywhere.
  public var isEnabled: Bool { descriptor >= 0 }

  /// Sends `notifications` as one datagram. Returns whether it left (false when disabled or on error).
  @discardableResult
  public func send(_ notifications: [ServiceNotification]) -> Bool {
    guard descriptor >= 0, let address = environment.notifySocket, !notifications.isEmpty else {
      return false
    }
    let message = Array(ServiceNotification.message(notifications).utf8)
    var result: Int
    repeat {
      result = address.withSockaddr { sockaddr, length in
        message.withUnsafeBytes { Glibc.sendto(descriptor, $0.baseAddress, $0.count, 0, sockaddr, length) }
      }
    } while result < 0 && errno == EINTR
    if result < 0 {
      lastError = "send to \(address): \(String(cString: strerror(errno)))"
      return false
    }
    lastError = nil
    sentCount += 1
    return true
  }

  /// Start-up (or a reload) is finished: `READY=1`, with `status` if given. Send it only once the service does
  /// what it is for: listening, its store open and migrated.
  @discardableResult
  public func ready(status: String? = nil) -> Bool {
    if let status { lastStatus = status }
    return send([.ready] + (status.map { [.status($0)] } ?? []))
  }

  /// A new `STATUS=` line.
  @discardableResult
  public func status(_ text: String) -> Bool {
    lastStatus = text
    return send([.status(text)])
  }

  /// A reload began: `RELOADING=1` and the monotonic time; call `ready()` once it is done (or failed and the old
  /// configuration stays).
  @discardableResult
  public func reloading(status: String = "reloading") -> Bool {
    lastStatus = status
    return send([.reloading(monotonicMicroseconds: Self.monotonicMicroseconds()), .status(status)])
  }

  /// Shutdown began: `STOPPING=1`. Status updates stop (the watchdog goes on until the loop ends: a drain that
  /// hangs is still a hung process).
  @discardableResult
  public func stopping(status: String = "stopping") -> Bool {
    isStopping = true
    lastStatus = status
    return send([.stopping, .status(status)])
  }

  /// One sign of life: `WATCHDOG=1`. `startUpdates` sends these by itself.
  @discardableResult
  public func watchdog() -> Bool { send([.watchdog]) }

  /// How often `startUpdates` ticks, in milliseconds: the watchdog's ping interval if it is shorter than
  /// `statusInterval`, else `statusInterval`.
  public func updateInterval(statusInterval: UInt64 = ServiceNotifier.defaultStatusInterval) -> UInt64 {
    min(statusInterval, environment.watchdogPingInterval ?? statusInterval)
  }

  /// Starts a timer on `loop` that, every `updateInterval`, sends `WATCHDOG=1` when the watchdog is on, and
  /// `STATUS=` with `status()` when the text changed (until `stopping`). Nothing is started when disabled. The
  /// timer does not keep the loop running; it ends with `close()` or the loop's `closeAllHandles()`.
  public func startUpdates(
    loop: Loop, statusInterval: UInt64 = ServiceNotifier.defaultStatusInterval,
    status: @escaping () -> String
  ) {
    guard isEnabled, timer == nil else { return }
    statusText = status
    let interval = updateInterval(statusInterval: statusInterval)
    let timer = LoopTimer(loop: loop)
    timer.keepsLoopAlive = false
    // The callback holds the notifier until the timer closes (close(), or closeAllHandles at shutdown).
    timer.start(after: interval, repeatEvery: interval) { self.tick() }
    self.timer = timer
  }

  private func tick() {
    var notifications: [ServiceNotification] = []
    if environment.watchdogPingInterval != nil { notifications.append(.watchdog) }
    if !isStopping, let statusText {
      let text = statusText()
      if text != lastStatus {
        lastStatus = text
        notifications.append(.status(text))
      }
    }
    send(notifications)
  }

  /// Stops the updates and closes the socket. Nothing is sent afterwards.
  public func close() {
    timer?.close()
    timer = nil
    statusText = nil
    if descriptor >= 0 {
      Glibc.close(descriptor)
      descriptor = -1
    }
  }

  /// `CLOCK_MONOTONIC` in microseconds, the clock systemd compares `MONOTONIC_USEC` with.
  public static func monotonicMicroseconds() -> UInt64 {
    var time = timespec()
    clock_gettime(CLOCK_MONOTONIC, &time)
    return UInt64(time.tv_sec) * 1_000_000 + UInt64(time.tv_nsec) / 1000
  }
}
