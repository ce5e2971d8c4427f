import CLibUV

/// Runs a callback on the loop thread when any thread calls `signal()`. Signals sent before the callback runs
/// coalesce into one call (libuv's `uv_async_t`).
///
/// Threading: `signal()` may be called from any thread, even while or after the handle closes (it then does
/// nothing); everything else belongs to the loop thread.
public final class Wakeup: LoopHandle, @unchecked Sendable {
  // @unchecked: `signal()` touches only `closed` under `lock`; the rest is loop-thread state.
  private let lock = Lock()
  private var closed = false
  private var callback: (() -> Void)?

  /// A wake-up that calls `callback` on the loop thread. Create on the loop thread.
  public init(loop: Loop, _ callback: @escaping () -> Void) {
    self.callback = callback
    super.init(loop: loop, type: UV_ASYNC)
    try! LoopError.check(
      uv_async_init(loop.uv, pointer(as: uv_async_t.self)) { h in
        LoopHandle.object(h, as: Wakeup.self).callback?()
      }, "uv_async_init")
    register()
  }

  /// Asks for the callback to run on the loop thread. Thread-safe.
  public func signal() {
    lock.withLock {
      guard !closed else { return }
      uv_async_send(pointer(as: uv_async_t.self))
    }
  }

  override func willClose() {
    lock.withLock { closed = true }
    // Drop the callback (and what it captured) now: a callback that captures its own handle is a cycle.
    callback = nil
  }
}
