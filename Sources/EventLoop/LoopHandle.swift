import CLibUV

/// The base of every wrapper around a libuv handle (timer, stream, listener, signal, wake-up, process).
///
/// Ownership: the handle's memory is allocated here and `handle->data` holds one retain of this object, taken
/// when libuv starts to know the handle (`register`) and given back in the close callback, which also frees the
/// memory. So the object lives at least as long as libuv can call into it, and a handle is freed only after its
/// close callback ran. Dropping every Swift reference to an open handle does not leak it silently: the loop's
/// `close()` reports it, and `closeAllHandles()` closes it.
///
/// Threading: owned by its loop's thread; every method must be called there (`Wakeup.signal` excepted).
public class LoopHandle {
  /// The loop this handle belongs to.
  public let loop: Loop
  let raw: UnsafeMutableRawPointer
  private var registered = false
  /// True once `close` was called; the handle must not be used any more.
  public private(set) var isClosing = false
  private var closeCallbacks: [() -> Void] = []

  init(loop: Loop, type: uv_handle_type) {
    self.loop = loop
    raw = .allocate(byteCount: uv_handle_size(type), alignment: 16)
  }

  /// The handle viewed as another libuv handle type (they share a common prefix).
  @inline(__always) func pointer<T>(as type: T.Type) -> UnsafeMutablePointer<T> {
    raw.assumingMemoryBound(to: T.self)
  }

  var handle: UnsafeMutablePointer<uv_handle_t> { pointer(as: uv_handle_t.self) }

  /// Called once the `uv_*_init` call succeeded: from now on only the close callback frees the memory.
  func register() {
    handle.pointee.data = Unmanaged.passRetained(self).toOpaque()
    registered = true
  }

  /// Frees the memory of a handle whose init failed (libuv never saw it).
  func discardUnregistered() {
    precondition(!registered)
    raw.deallocate()
  }

  /// The object behind a handle pointer that libuv hands to a callback.
  @inline(__always) static func object<T: LoopHandle>(_ handle: UnsafeMutableRawPointer?, as type: T.Type)
    -> T
  {
    let h = handle!.assumingMemoryBound(to: uv_handle_t.self)
    return Unmanaged<T>.fromOpaque(h.pointee.data).takeUnretainedValue()
  }

  /// Closes the handle. Pending callbacks (reads, writes, timers) will not run afterwards, except that pending
  /// write and connect requests complete with a cancelled error. `then` runs on the loop thread once libuv has
  /// released the handle. Closing twice is harmless.
  public func close(then: (() -> Void)? = nil) {
    if let then { closeCallbacks.append(then) }
    guard !isClosing else { return }
    isClosing = true
    willClose()
    uv_close(handle) { h in
      let object = Unmanaged<LoopHandle>.fromOpaque(h!.pointee.data).takeRetainedValue()
      object.didClose()
    }
  }

  /// Runs `body` once the handle is closed, whoever closes it (as `close(then:)` does, without closing).
  func whenClosed(_ body: @escaping () -> Void) {
    closeCallbacks.append(body)
  }

  /// Subclasses release what they hold before libuv forgets the handle.
  func willClose() {}

  private func didClose() {
    raw.deallocate()
    let callbacks = closeCallbacks
    closeCallbacks = []
    for callback in callbacks { callback() }
  }

  /// Whether the handle keeps the loop's `run()` from returning while it is active (libuv's ref count).
  public var keepsLoopAlive: Bool {
    get { uv_has_ref(handle) != 0 }
    set { newValue ? uv_ref(handle) : uv_unref(handle) }
  }

  /// A short name for reports: the libuv handle type.
  public var typeName: String { String(cString: uv_handle_type_name(handle.pointee.type)) }
}
