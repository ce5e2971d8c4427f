import EventLoop

/// Why the reader pool itself failed a read (its own errors, not the read's or SQLite's).
public enum SQLiteReaderPoolError: Error, Equatable, Sendable, CustomStringConvertible {
  /// The read was submitted after `shutdown()` began; it did not run.
  case shutDown
  /// `maxQueuedReads` reads were already waiting; the read did not run. Answer "busy" upstream.
  case overloaded(queuedReads: Int)

  public var description: String {
    switch self {
    case .shutDown: "the SQLite readers are shut down"
    case .overloaded(let queued): "the SQLite readers are overloaded: \(queued) reads already queued"
    }
  }
}

/// Read-only connections to one database file in WAL mode, each used by a thread of its own, for reads that
/// must neither wait behind the writer's group commits nor hold them up (in WAL mode readers and the writer do
/// not block each other), nor run on a loop thread.
///
/// ```
///   loop threads                      reader threads (at most `threads` busy at once)
///   read ─▶ queue ──(an idle thread)──▶ BEGIN; body(reader); COMMIT ──▶ loop.execute { completion }
///                                      take the next queued read, or go idle
/// ```
///
/// Each read runs in a read transaction of its own: it sees the database as of the last commit before it
/// began, whole (a page and its blocks from one commit), and every commit whose completion ran before the read
/// was submitted. Reads start in submission order; with several threads they may finish in any order.
///
/// Each thread opens its connection on its first read (`SQLiteConnection.OpenMode.readOnly`, after the writer
/// created and migrated the file) and makes its `Reader` from it with `makeReader` (a store's read side, its
/// prepared statements): both stay on that thread. A thread that fails to open tries again on its next read.
///
/// Memory: at most `threads` reads run at once, so the answers being built at once are at most `threads`;
/// queued reads hold only their closures, at most `maxQueuedReads` of them.
///
/// Threading: `read` is called on the thread of the loop it names, and the completion runs there (it waits in a
/// table keyed by an id, as in `SQLiteWriter`). `shutdown` from any thread but a reader's.
public final class SQLiteReaderPool<Reader>: @unchecked Sendable {
  // @unchecked: `slots[i]` is used only on worker i's thread (and by `shutdown` after joining it); every other
  // variable is guarded by `lock`.
  public let path: String
  /// Threads, each with its connection.
  public let threads: Int
  /// The most reads waiting at once; a read submitted beyond it fails with `.overloaded`.
  public let maxQueuedReads: Int
  /// Opens a thread's connection and makes its reader.
  private let open: @Sendable () throws -> (any StoreConnection, Reader)
  private let workers: [WorkerThread]
  private let slots: [Slot]

  private let lock = Lock()
  private var queue: [Request] = []
  private var queueHead = 0
  private var idle: [Int]
  private var accepting = true
  private var completions: [UInt64: (Outcome) -> Void] = [:]
  /// Threads yet to free their memory, by the id of the `releaseMemory` call's completion.
  private var releasesLeft: [UInt64: Int] = [:]
  private var nextID: UInt64 = 0

  private typealias Outcome = Result<any Sendable, any Error>

  private struct Request: Sendable {
    var id: UInt64
    var loop: Loop
    var work: @Sendable (Reader) throws -> any Sendable
  }

  /// A thread's connection and reader.
  private final class Slot {
    var connection: (any StoreConnection)?
    var reader: Reader?
  }

  /// `threads` reader threads over the database at `path` (not opened until a read needs it).
  public convenience init(
    path: String, threads: Int, maxQueuedReads: Int = 10_000, name: String = "sqlite-reader",
    makeReader: @escaping @Sendable (SQLiteConnection) throws -> Reader
  ) {
    self.init(
      path: path, threads: threads, maxQueuedReads: maxQueuedReads, name: name,
      open: {
        let connection = try SQLiteConnection(path: path, mode: .readOnly)
        do {
          try connection.configure(synchronous: .normal)
          return (connection, try makeReader(connection))
        } catch {
          connection.close()
          throw error
        }
      })
  }

  /// `threads` reader threads, each with the connection and reader `open` makes on the thread's first read (of
  /// any engine: `path` only names the store in errors). A connection that is lost is opened again by its engine
  /// at the next read's transaction.
  public init(
    path: String, threads: Int, maxQueuedReads: Int = 10_000, name: String,
    open: @escaping @Sendable () throws -> (any StoreConnection, Reader)
  ) {
    precondition(threads > 0 && maxQueuedReads > 0, "limits must be positive")
    self.path = path
    self.threads = threads
    self.maxQueuedReads = maxQueuedReads
    self.open = open
    workers = (0..<threads).map { WorkerThread(name: "\(name)-\($0)") }
    slots = (0..<threads).map { _ in Slot() }
    idle = Array((0..<threads).reversed())
  }

  deinit {
    shutdown()
  }

  /// Call on `loop`'s thread. `body` runs on a reader thread inside a read transaction with that thread's
  /// reader; `completion` runs on `loop`'s thread with its value or error (or the pool's own error).
  public func read<T: Sendable>(
    on loop: Loop, _ body: @escaping @Sendable (Reader) throws -> T,
    completion: @escaping (Result<T, any Error>) -> Void
  ) {
    let (id, rejection) = lock.withLock { () -> (UInt64, SQLiteReaderPoolError?) in
      let id = nextID
      nextID += 1
      completions[id] = { completion($0.map { $0 as! T }) }
      if !accepting { return (id, .shutDown) }
      let queued = queue.count - queueHead
      if queued >= maxQueuedReads { return (id, .overloaded(queuedReads: queued)) }
      queue.append(Request(id: id, loop: loop, work: { try body($0) }))
      // Under the lock, so that `shutdown` cannot stop the worker between the append and this submit.
      if let worker = idle.popLast() { workers[worker].submit { [self] in drain(worker) } }
      return (id, nil)
    }
    // Through the loop even now: a completion never runs inside `read`, whose caller may not expect it.
    if let rejection { loop.execute { [self] in complete(id, .failure(rejection)) } }
  }

  /// Reads submitted whose completion has not run yet.
  public var pendingCompletions: Int { lock.withLock { completions.count } }

  /// Call on `loop`'s thread. Has every thread free what its connection can of its memory
  /// (`StoreConnection.releaseMemory`: SQLite's unused cache pages), each on its own thread once it has no read
  /// to run; then `completion` on `loop`'s thread. A thread that has not opened its connection yet has nothing
  /// to free. After `shutdown`, `completion` runs at once.
  public func releaseMemory(on loop: Loop, completion: @escaping () -> Void) {
    let started = lock.withLock { () -> Bool in
      guard accepting else { return false }
      let id = nextID
      nextID += 1
      completions[id] = { _ in completion() }
      releasesLeft[id] = workers.count
      // Under the lock, as in `read`: `shutdown` cannot stop a worker between the count and its job.
      for (index, worker) in workers.enumerated() {
        worker.submit { [self] in
          slots[index].connection?.releaseMemory()
          let last = lock.withLock { () -> Bool in
            releasesLeft[id]! -= 1
            guard releasesLeft[id] == 0 else { return false }
            releasesLeft[id] = nil
            return true
          }
          if last { loop.execute { [self] in complete(id, .success(())) } }
        }
      }
      return true
    }
    if !started { completion() }
  }

  /// Stops accepting reads (later ones fail with `.shutDown`), runs every read already queued, joins the
  /// threads and closes their connections. Blocks until then. Idempotent.
  public func shutdown() {
    lock.withLock { accepting = false }
    for worker in workers { worker.shutdown() }
    for slot in slots {
      slot.reader = nil
      slot.connection?.close()
      slot.connection = nil
    }
  }

  // MARK: Reader threads

  /// On worker `index`'s thread: runs queued reads until none is left, then goes idle.
  private func drain(_ index: Int) {
    while let request = take(idleIfEmpty: index) {
      let outcome = Outcome { try run(request, on: slots[index]) }
      request.loop.execute { [self] in complete(request.id, outcome) }
    }
  }

  private func take(idleIfEmpty index: Int) -> Request? {
    lock.withLock {
      guard queueHead < queue.count else {
        queue.removeAll(keepingCapacity: queue.capacity <= 1024)
        queueHead = 0
        idle.append(index)
        return nil
      }
      let request = queue[queueHead]
      queueHead += 1
      // Drop what was taken once it is most of the array.
      if queueHead >= 1024 && queueHead * 2 >= queue.count {
        queue.removeFirst(queueHead)
        queueHead = 0
      }
      return request
    }
  }

  private func run(_ request: Request, on slot: Slot) throws -> any Sendable {
    if slot.connection == nil {
      let (connection, reader) = try open()
      slot.reader = reader
      slot.connection = connection
    }
    guard let connection = slot.connection, let reader = slot.reader else {
      throw SQLiteError.misuse("the reader connection is not open", sql: nil)
    }
    return try connection.transaction(writing: false) { try request.work(reader) }
  }

  /// On the loop thread: runs the completion waiting under `id`.
  private func complete(_ id: UInt64, _ outcome: Outcome) {
    guard let completion = lock.withLock({ completions.removeValue(forKey: id) }) else { return }
    completion(outcome)
  }
}
