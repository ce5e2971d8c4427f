#if canImport(Glibc)
  import Glibc
#endif

/// A loop running on a thread of its own, for programs and tests that need the calling thread free.
///
/// `start` builds the loop's handles on the new thread (through `setup`), `shutdown` closes every handle, stops
/// the loop, joins the thread and closes the loop, so nothing is left open.
///
/// Threading: `start`, `execute` and `shutdown` may be called from any thread.
public final class LoopThread: @unchecked Sendable {
  // @unchecked: `thread` is written once in `start` and read in `shutdown` by the same owner.
  public let loop: Loop
  private var thread: pthread_t?
  private let done = ConditionLock()
  private var closeError: LoopLifecycleError?

  public init() throws(LoopError) {
    loop = try Loop()
  }

  /// Starts the thread and runs `setup` on it first. The loop then runs until `shutdown`.
  public func start(_ setup: @escaping @Sendable (Loop) -> Void = { _ in }) {
    loop.keepsRunningWhenIdle = true
    loop.execute { [loop] in setup(loop) }
    let box = Unmanaged.passRetained(self).toOpaque()
    var tid = pthread_t()
    let result = pthread_create(
      &tid, nil,
      { arg in
        let owner = Unmanaged<LoopThread>.fromOpaque(arg!).takeRetainedValue()
        owner.loop.run()
        do throws(LoopLifecycleError) { try owner.loop.close() } catch { owner.closeError = error }
        return nil
      }, box)
    precondition(result == 0, "pthread_create failed: \(result)")
    thread = tid
  }

  /// Runs `task` on the loop thread.
  public func execute(_ task: @escaping @Sendable () -> Void) { loop.execute(task) }

  /// Closes every handle, lets their close callbacks run, stops the loop and joins the thread. Throws if the
  /// loop could not be closed cleanly (a handle reopened during shutdown).
  public func shutdown() throws(LoopLifecycleError) {
    guard let thread else { return }
    self.thread = nil
    loop.execute { [loop] in
      loop.closeAllHandles()
      loop.keepsRunningWhenIdle = false
    }
    pthread_join(thread, nil)
    if let closeError { throw closeError }
  }
}
