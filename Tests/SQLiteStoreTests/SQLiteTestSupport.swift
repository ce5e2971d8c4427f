import EventLoop
import EventLoopTestKit
import SQLiteStore
import Testing

#if canImport(Glibc)
  import Glibc
#endif

extension TemporaryDatabase {
  /// A configured read-write connection (WAL, synchronous FULL, foreign keys on).
  func open(synchronous: SQLiteConnection.Synchronous = .full) throws -> SQLiteConnection {
    let connection = try SQLiteConnection(path: path)
    try connection.configure(synchronous: synchronous)
    return connection
  }
}

/// One-shot gate between threads: `wait()` blocks until `open()` (a pthread mutex and condition, which
/// ThreadSanitizer understands).
final class Gate: @unchecked Sendable {
  private let mutex: UnsafeMutablePointer<pthread_mutex_t> = .allocate(capacity: 1)
  private let condition: UnsafeMutablePointer<pthread_cond_t> = .allocate(capacity: 1)
  private var isOpen = false

  init() {
    pthread_mutex_init(mutex, nil)
    pthread_cond_init(condition, nil)
  }

  deinit {
    pthread_cond_destroy(condition)
    pthread_mutex_destroy(mutex)
    mutex.deallocate()
    condition.deallocate()
  }

  func open() {
    pthread_mutex_lock(mutex)
    isOpen = true
    pthread_cond_broadcast(condition)
    pthread_mutex_unlock(mutex)
  }

  func wait() {
    pthread_mutex_lock(mutex)
    while !isOpen { pthread_cond_wait(condition, mutex) }
    pthread_mutex_unlock(mutex)
  }

  /// Whether `open()` ran.
  var wasOpened: Bool {
    pthread_mutex_lock(mutex)
    defer { pthread_mutex_unlock(mutex) }
    return isOpen
  }
}

/// The error a test job throws on purpose.
enum TestJobError: Error, Equatable {
  case failed(Int)
}
