#if canImport(Glibc)
  import Glibc
#endif

/// A dedicated thread that runs submitted jobs one at a time, in order. For work that must not run on a loop
/// thread (SQLite commits, fsync) and that wants one thread of its own (a SQLite connection per thread).
///
/// Results reach a loop through `Loop.offload(to:_:then:)`, or a job may call `Loop.execute` itself.
/// Group commit is built on it by `SQLiteWriter`, which queues its own jobs and runs all that are waiting in one
/// transaction.
///
/// Threading: `submit` and `shutdown` are thread-safe.
public final class WorkerThread: @unchecked Sendable {
  // @unchecked: `queue` and `stopping` are guarded by `condition`.
  private let condition = ConditionLock()
  private var queue: [@Sendable () -> Void] = []
  private var stopping = false
  private var thread: pthread_t?
  public let name: String

  public init(name: String) {
    self.name = name
    let box = Unmanaged.passRetained(self).toOpaque()
    var tid = pthread_t()
    let result = pthread_create(
      &tid, nil,
      { arg in
        let worker = Unmanaged<WorkerThread>.fromOpaque(arg!).takeRetainedValue()
        worker.runJobs()
        return nil
      }, box)
    precondition(result == 0, "pthread_create failed: \(result)")
    thread = tid
  }

  /// Queues `job` to run on the worker thread. After `shutdown` began, the job is dropped.
  public func submit(_ job: @escaping @Sendable () -> Void) {
    condition.lock()
    if !stopping { queue.append(job) }
    condition.signal()
    condition.unlock()
  }

  /// Jobs queued and not yet started.
  public var queuedJobs: Int {
    condition.lock()
    defer { condition.unlock() }
    return queue.count
  }

  private func runJobs() {
    while true {
      condition.lock()
      while queue.isEmpty && !stopping { condition.wait() }
      if queue.isEmpty && stopping {
        condition.unlock()
        return
      }
      let job = queue.removeFirst()
      condition.unlock()
      job()
    }
  }

  /// Runs every job already queued, then stops the thread and waits for it. Idempotent.
  public func shutdown() {
    condition.lock()
    stopping = true
    condition.signal()
    let thread = self.thread
    self.thread = nil
    condition.unlock()
    if let thread { pthread_join(thread, nil) }
  }
}
