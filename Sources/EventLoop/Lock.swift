#if canImport(Glibc)
  import Glibc
#endif

/// A pthread mutex. Used where state crosses threads (the loop's task queue, worker queues): ThreadSanitizer
/// understands it, which it did not for `Synchronization.Mutex` on this toolchain.
public final class Lock: @unchecked Sendable {
  private let mutex: UnsafeMutablePointer<pthread_mutex_t>

  public init() {
    mutex = .allocate(capacity: 1)
    mutex.initialize(to: pthread_mutex_t())
    precondition(pthread_mutex_init(mutex, nil) == 0, "pthread_mutex_init failed")
  }

  deinit {
    pthread_mutex_destroy(mutex)
    mutex.deallocate()
  }

  /// Runs `body` holding the lock.
  @inline(__always)
  public func withLock<R>(_ body: () throws -> R) rethrows -> R {
    pthread_mutex_lock(mutex)
    defer { pthread_mutex_unlock(mutex) }
    return try body()
  }
}

/// A lock with a condition variable, for a thread that waits for work (the worker thread) or for another
/// thread's word (a checkpointer held by a test).
public final class ConditionLock: @unchecked Sendable {
  private let mutex: UnsafeMutablePointer<pthread_mutex_t>
  private let condition: UnsafeMutablePointer<pthread_cond_t>

  public init() {
    mutex = .allocate(capacity: 1)
    mutex.initialize(to: pthread_mutex_t())
    condition = .allocate(capacity: 1)
    condition.initialize(to: pthread_cond_t())
    pthread_mutex_init(mutex, nil)
    pthread_cond_init(condition, nil)
  }

  deinit {
    pthread_cond_destroy(condition)
    pthread_mutex_destroy(mutex)
    condition.deallocate()
    mutex.deallocate()
  }

  public func lock() { pthread_mutex_lock(mutex) }
  public func unlock() { pthread_mutex_unlock(mutex) }
  /// Waits for a signal; call holding the lock.
  public func wait() { pthread_cond_wait(condition, mutex) }
  public func signal() { pthread_cond_signal(condition) }
  /// Wakes every waiter.
  public func broadcast() { pthread_cond_broadcast(condition) }
}
