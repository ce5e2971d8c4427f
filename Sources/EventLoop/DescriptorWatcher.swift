import CLibUV

/// Calls back on the loop thread whenever a file descriptor that someone else owns is readable (libuv's
/// `uv_poll_t`), for sockets the loop has no stream type for, such as a Unix datagram socket.
///
/// The descriptor stays its owner's: close the watcher first, then the descriptor (libuv must stop polling a
/// descriptor before it is closed, or it may poll a reused number). The callback must read what is ready, or it
/// is called again at once (level-triggered).
///
/// Threading: loop thread only.
public final class DescriptorWatcher: LoopHandle {
  private var callback: (() -> Void)?
  /// The descriptor watched.
  public let descriptor: Int32

  /// Starts watching `descriptor` for readability at once.
  public init(loop: Loop, descriptor: Int32, onReadable: @escaping () -> Void) throws(LoopError) {
    self.descriptor = descriptor
    callback = onReadable
    super.init(loop: loop, type: UV_POLL)
    let initResult = uv_poll_init(loop.uv, pointer(as: uv_poll_t.self), descriptor)
    if initResult < 0 {
      discardUnregistered()
      throw LoopError(code: initResult, operation: "watch descriptor \(descriptor)")
    }
    register()
    let result = uv_poll_start(pointer(as: uv_poll_t.self), Int32(UV_READABLE.rawValue)) { h, status, _ in
      // An error (for instance EBADF) is reported as readable too: the owner's read then sees it.
      _ = status
      LoopHandle.object(h, as: DescriptorWatcher.self).callback?()
    }
    if result < 0 {
      close()
      throw LoopError(code: result, operation: "watch descriptor \(descriptor)")
    }
  }

  override func willClose() { callback = nil }
}
