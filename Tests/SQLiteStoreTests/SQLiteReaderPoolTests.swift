import EventLoop
import EventLoopTestKit
import SQLiteStore
import Testing

#if canImport(Glibc)
  import Glibc
#endif

/// Threads meeting: each `arrive` waits until `count` threads arrived, or `timeout` ms passed (false then), so
/// that a pool that runs reads one at a time fails the test rather than hangs it.
private final class Rendezvous: @unchecked Sendable {
  private let mutex: UnsafeMutablePointer<pthread_mutex_t> = .allocate(capacity: 1)
  private let condition: UnsafeMutablePointer<pthread_cond_t> = .allocate(capacity: 1)
  private let count: Int
  private var arrived = 0

  init(count: Int) {
    self.count = count
    pthread_mutex_init(mutex, nil)
    pthread_cond_init(condition, nil)
  }

  deinit {
    pthread_cond_destroy(condition)
    pthread_mutex_destroy(mutex)
    mutex.deallocate()
    condition.deallocate()
  }

  func arrive(timeout: Int = 5_000) -> Bool {
    pthread_mutex_lock(mutex)
    defer { pthread_mutex_unlock(mutex) }
    arrived += 1
    pthread_cond_broadcast(condition)
    var deadline = timespec()
    clock_gettime(CLOCK_REALTIME, &deadline)
    deadline.tv_sec += timeout / 1000
    while arrived < count {
      if pthread_cond_timedwait(condition, mutex, &deadline) == ETIMEDOUT { return arrived >= count }
    }
    return true
  }
}

/// Runs `loop` until `done()` holds (reader completions do not keep a loop running by themselves).
private func run(_ loop: Loop, until done: () -> Bool) throws {
  loop.keepsRunningWhenIdle = true
  defer { loop.keepsRunningWhenIdle = false }
  let watchdog = LoopTimer(loop: loop)
  watchdog.keepsLoopAlive = false
  var timedOut = false
  watchdog.start(after: 10_000) { timedOut = true }
  defer { watchdog.close() }
  while !done() && !timedOut { loop.runOnce() }
  try #require(done(), "timed out")
}

/// A WAL database with `item(id)` holding 1, 2, 3, and the connection that wrote it.
private func makeDatabase(_ db: TemporaryDatabase) throws -> SQLiteConnection {
  let connection = try db.open()
  try connection.execute("CREATE TABLE item(id INTEGER PRIMARY KEY); INSERT INTO item VALUES (1), (2), (3);")
  return connection
}

private func ids(_ connection: SQLiteConnection) throws -> [Int64] {
  try connection.query("SELECT id FROM item ORDER BY id").map {
    if case .integer(let id) = $0[0] { id } else { -1 }
  }
}

@Suite struct SQLiteReaderPoolTests {
  /// Two reads run at once, each on its own thread with its own connection (one waits for the other inside its
  /// read); both see the committed rows.
  @Test func readsRunAtOnceOnConnectionsOfTheirOwn() throws {
    let db = TemporaryDatabase()
    defer { db.remove() }
    let writer = try makeDatabase(db)
    defer { writer.close() }
    let loop = try Loop()
    let pool = SQLiteReaderPool(path: db.path, threads: 2) { $0 }
    let meeting = Rendezvous(count: 2)
    var answers: [Result<([Int64], Bool), any Error>] = []
    for _ in 0..<2 {
      pool.read(
        on: loop, { connection in (try ids(connection), meeting.arrive()) },
        completion: { answers.append($0) })
    }
    try run(loop) { answers.count == 2 }
    for answer in answers {
      let (rows, met) = try answer.get()
      #expect(rows == [1, 2, 3])
      #expect(met, "both reads were running at the same time")
    }
    pool.shutdown()
    try loop.close()
  }

  /// In WAL mode a read does not wait for the writer: it sees the last commit, not a transaction still open, and
  /// a later read sees it once committed.
  @Test func aReadSeesTheLastCommitWhileTheWriterHoldsItsTransaction() throws {
    let db = TemporaryDatabase()
    defer { db.remove() }
    let writer = try makeDatabase(db)
    defer { writer.close() }
    let loop = try Loop()
    let pool = SQLiteReaderPool(path: db.path, threads: 1) { $0 }
    try writer.execute("BEGIN IMMEDIATE; INSERT INTO item VALUES (4);")
    var during: Result<[Int64], any Error>?
    pool.read(on: loop, { try ids($0) }, completion: { during = $0 })
    try run(loop) { during != nil }
    #expect(try during?.get() == [1, 2, 3])
    try writer.execute("COMMIT")
    var after: Result<[Int64], any Error>?
    pool.read(on: loop, { try ids($0) }, completion: { after = $0 })
    try run(loop) { after != nil }
    #expect(try after?.get() == [1, 2, 3, 4])
    pool.shutdown()
    try loop.close()
  }

  /// `releaseMemory` has each thread free its connection's unused cache pages, on that thread; a thread that has
  /// not opened its connection yet has nothing to free, and the completion runs once, after every thread's part.
  @Test func releasingMemoryEmptiesEveryThreadsPageCache() throws {
    let db = TemporaryDatabase()
    defer { db.remove() }
    let writer = try makeDatabase(db)
    defer { writer.close() }
    // About 2 MB of rows: more pages than a read keeps in use, fewer than the cache holds.
    try writer.execute(
      "CREATE TABLE big(id INTEGER PRIMARY KEY, body BLOB); "
        + "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 2000) "
        + "INSERT INTO big SELECT i, zeroblob(1000) FROM n;")
    let loop = try Loop()
    let pool = SQLiteReaderPool(path: db.path, threads: 2) { $0 }
    let meeting = Rendezvous(count: 2)
    var filled: [Result<Int, any Error>] = []
    for _ in 0..<2 {
      pool.read(
        on: loop,
        { connection in
          _ = try connection.query("SELECT sum(length(body)) FROM big")
          _ = meeting.arrive()  // both threads read: each has a connection and a full cache
          return connection.cacheBytesUsed
        }, completion: { filled.append($0) })
    }
    try run(loop) { filled.count == 2 }
    for cache in filled { #expect(try cache.get() > 1_000_000) }

    var released = 0
    pool.releaseMemory(on: loop) { released += 1 }
    try run(loop) { released == 1 }
    var after: [Result<Int, any Error>] = []
    let again = Rendezvous(count: 2)
    for _ in 0..<2 {
      pool.read(
        on: loop,
        { connection in
          _ = again.arrive()  // one read on each thread
          return connection.cacheBytesUsed
        }, completion: { after.append($0) })
    }
    try run(loop) { after.count == 2 }
    for cache in after { #expect(try cache.get() < 100_000, "freed on both threads") }
    #expect(released == 1)
    pool.shutdown()
    try loop.close()
  }

  /// Past `maxQueuedReads` waiting reads, a read is refused at once (`overloaded`); after `shutdown`, every read
  /// is refused (`shutDown`), and those queued before it ran.
  @Test func readsPastTheQueueOrAfterShutdownAreRefused() throws {
    let db = TemporaryDatabase()
    defer { db.remove() }
    let writer = try makeDatabase(db)
    defer { writer.close() }
    let loop = try Loop()
    let pool = SQLiteReaderPool(path: db.path, threads: 1, maxQueuedReads: 1) { $0 }
    let gate = ThreadGate()
    defer { gate.open() }
    var results: [Int: Result<Int, any Error>] = [:]
    pool.read(
      on: loop,
      { _ in
        gate.wait()
        return 0
      }, completion: { results[0] = $0 })
    gate.waitUntilReached()  // taken off the queue by its thread, which it now holds
    pool.read(on: loop, { _ in 1 }, completion: { results[1] = $0 })
    pool.read(on: loop, { _ in 2 }, completion: { results[2] = $0 })
    try run(loop) { results[2] != nil }
    #expect(throws: SQLiteReaderPoolError.overloaded(queuedReads: 1)) { try results[2]!.get() }
    gate.open()
    try run(loop) { results.count == 3 }
    #expect(try results[0]?.get() == 0 && results[1]?.get() == 1)
    pool.shutdown()
    pool.read(on: loop, { _ in 3 }, completion: { results[3] = $0 })
    try run(loop) { results[3] != nil }
    #expect(throws: SQLiteReaderPoolError.shutDown) { try results[3]!.get() }
    try loop.close()
  }
}
