import CLibUV

/// A one-shot or repeating timer on the loop's monotonic clock (milliseconds).
///
/// Threading: loop thread only. Restarting a running timer replaces its schedule and callback.
public final class LoopTimer: LoopHandle {
  private var callback: (() -> Void)?

  public init(loop: Loop) {
    super.init(loop: loop, type: UV_TIMER)
    uv_timer_init(loop.uv, pointer(as: uv_timer_t.self))
    register()
  }

  /// Calls `callback` after `timeout` ms, then every `repeatEvery` ms if that is non-zero.
  public func start(after timeout: UInt64, repeatEvery: UInt64 = 0, _ callback: @escaping () -> Void) {
    precondition(!isClosing, "timer used after close")
    self.callback = callback
    uv_timer_start(
      pointer(as: uv_timer_t.self),
      { h in
        let timer = LoopHandle.object(h, as: LoopTimer.self)
        timer.callback?()
      }, timeout, repeatEvery)
  }

  /// Stops the timer; it can be started again.
  public func stop() {
    guard !isClosing else { return }
    uv_timer_stop(pointer(as: uv_timer_t.self))
  }

  /// Whether the timer is scheduled.
  public var isActive: Bool { !isClosing && uv_is_active(handle) != 0 }

  override func willClose() { callback = nil }
}

/// Watches a Unix signal (SIGHUP, SIGTERM, ...) and calls back on the loop thread.
///
/// Threading: loop thread only.
public final class SignalWatcher: LoopHandle {
  private var callback: ((Int32) -> Void)?
  public let signal: Int32

  /// Starts watching `signal` at once.
  public init(loop: Loop, signal: Int32, _ callback: @escaping (Int32) -> Void) throws(LoopError) {
    self.callback = callback
    self.signal = signal
    super.init(loop: loop, type: UV_SIGNAL)
    uv_signal_init(loop.uv, pointer(as: uv_signal_t.self))
    register()
    let result = uv_signal_start(
      pointer(as: uv_signal_t.self),
      { h, signum in
        LoopHandle.object(h, as: SignalWatcher.self).callback?(signum)
      }, signal)
    if result < 0 {
      close()
      throw LoopError(code: result, operation: "watch signal \(signal)")
    }
  }

  override func willClose() { callback = nil }
}
