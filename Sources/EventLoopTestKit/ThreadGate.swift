#if canImport(Glibc)
  import Glibc
#endif

/// A gate that holds jobs on other threads (a writer's, a reader pool's, a worker's) until the test opens it, and
/// lets the test wait until they got there: so that what the test submits next queues behind them, whatever the
/// threads' timing, without a sleep or a poll.
///
/// ```
///   job thread:   wait() ── counted as reached ── blocks ───────────────▶ runs on
///   test thread:  waitUntilReached(n) ── returns once n jobs reached ── open()
/// ```
///
/// A pthread mutex and condition (ThreadSanitizer understands them; it flagged `Synchronization.Mutex` here).
/// Opening is for good: jobs that reach an open gate pass at once. Open it on every path out of a test (`defer`),
/// or a held thread is never joined.
public final class ThreadGate: @unchecked Sendable {
  private let mutex: UnsafeMutablePointer<pthread_mutex_t> = .allocate(capacity: 1)
  private let condition: UnsafeMutablePointer<pthread_cond_t> = .allocate(capacity: 1)
  private var isOpen = false
  private var reached = 0

  public init() {
    pthread_mutex_init(mutex, nil)
    pthread_cond_init(condition, nil)
  }

  deinit {
    pthread_cond_destroy(condition)
    pthread_mutex_destroy(mutex)
    mutex.deallocate()
    condition.deallocate()
  }

  /// On a job's thread: counts the job as reached, then blocks until `open()`.
  public func wait() {
    pthread_mutex_lock(mutex)
    reached += 1
    pthread_cond_broadcast(condition)
    while !isOpen { pthread_cond_wait(condition, mutex) }
    pthread_mutex_unlock(mutex)
  }

  /// On the test's thread: blocks until `count` jobs in all have called `wait()`.
  public func waitUntilReached(_ count: Int = 1) {
    pthread_mutex_lock(mutex)
    while reached < count { pthread_cond_wait(condition, mutex) }
    pthread_mutex_unlock(mutex)
  }

  /// Lets every held job and every later one through. Idempotent.
  public func open() {
    pthread_mutex_lock(mutex)
    isOpen = true
    pthread_cond_broadcast(condition)
    pthread_mutex_unlock(mutex)
  }
}
