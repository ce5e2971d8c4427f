import BrokerStore
import EventLoop
import SQLiteStore

/// What `GET /healthz` reads of the store, without joining the writer's queue: a read there ran alone between
/// two groups of batches, so every health probe split a group commit in two (two fsyncs where one did).
///
/// A connection of its own on a thread of its own reads the store's sequence (a WAL reader: it neither waits for
/// the writer nor holds it up). Probes that come while a read is under way wait for it and share its answer, so
/// a flood of probes (no token is needed) costs one read at a time.
///
/// Threading: `check` and `close` on the loop's thread; the connection only on `worker`.
final class StoreHealthCheck {
  private let loop: Loop
  private let worker: WorkerThread
  private let reader: Reader
  private var waiting: [(Result<UInt64, any Error>) -> Void] = []

  /// The connection, used only on `worker` (jobs run there one at a time, in order).
  private final class Reader: @unchecked Sendable {
    let connection: any StoreConnection
    init(_ connection: any StoreConnection) { self.connection = connection }

    func sequence() -> Result<UInt64, any Error> {
      Result {
        // In a read transaction: a PostgreSQL connection lost while idle is made again at its BEGIN.
        let rows = try connection.transaction(writing: false) {
          try connection.query(PageStore.sequenceSQL(connection.engine))
        }
        switch rows.first?.first {
        case .text(let value)?: return UInt64(value) ?? 0
        case .integer(let value)?: return UInt64(clamping: value)
        default: return 0
        }
      }
    }
  }

  /// Opens a second connection to the store at `path` (which the writer has created and migrated), read-only in
  /// effect (`query_only`).
  init(loop: Loop, path: String) throws {
    self.loop = loop
    let connection = try SQLiteConnection(path: path, mode: .readWrite)
    do {
      try connection.configure(synchronous: .normal, busyTimeoutMilliseconds: 1000)
      try connection.execute("PRAGMA query_only = ON")
    } catch {
      connection.close()
      throw error
    }
    reader = Reader(connection)
    worker = WorkerThread(name: "broker-health")
  }

  /// Reads through `connection` (a PostgreSQL store's: the health check's own connection, made again after a
  /// loss by the next probe).
  init(loop: Loop, connection: any StoreConnection) {
    self.loop = loop
    reader = Reader(connection)
    worker = WorkerThread(name: "broker-health")
  }

  /// Reads the store's sequence and calls `completion` on the loop's thread with it, or with why it could not.
  func check(_ completion: @escaping (Result<UInt64, any Error>) -> Void) {
    waiting.append(completion)
    guard waiting.count == 1 else { return }
    let reader = self.reader
    loop.offload(
      to: worker, { reader.sequence() },
      then: { [self] result in
        let answered = waiting
        waiting = []
        for completion in answered { completion(result) }
      })
  }

  deinit {
    // A last resort, as SQLiteWriter's: the broker's shutdown closes it, at a time when blocking is fine.
    close()
  }

  /// Stops the thread (after the read under way) and closes the connection. Blocks until then. Idempotent.
  func close() {
    worker.shutdown()
    reader.connection.close()
  }
}
