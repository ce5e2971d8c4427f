import EventLoop
import EventLoopTestKit
import SQLiteStore
import Testing

#if canImport(Glibc)
  import Glibc
#endif

/// Lets a loop's `run()` return once `expected` completions ran (outstanding writer jobs, like offloads, do not
/// keep a loop running by themselves). If they have not all run within `timeout` ms, records an issue and lets
/// the run return anyway, so that a broken writer fails the test instead of hanging it (`runUntilDone`'s own
/// watchdog cannot end a run held by `keepsRunningWhenIdle`).
///
/// Used on the loop thread only; another thread posts `done` with `loop.execute`, hence the unchecked Sendable.
private final class CompletionCountdown: @unchecked Sendable {
  private let loop: Loop
  private let watchdog: LoopTimer
  private(set) var remaining: Int

  init(loop: Loop, expected: Int, timeout: UInt64 = 10_000) {
    self.loop = loop
    remaining = expected
    watchdog = LoopTimer(loop: loop)
    watchdog.keepsLoopAlive = false
    loop.keepsRunningWhenIdle = true
    watchdog.start(after: timeout) { [unowned self] in
      Issue.record("\(remaining) of \(expected) completions did not run within \(timeout) ms")
      finish()
    }
  }

  func done() {
    remaining -= 1
    if remaining == 0 { finish() }
  }

  private func finish() {
    watchdog.close()
    loop.keepsRunningWhenIdle = false
  }
}

/// Reports whether the thread it watches has exited: a pthread key destructor runs in the exiting thread
/// before `pthread_join` on it can return.
private final class ThreadExitProbe: @unchecked Sendable {
  private let lock = Lock()
  private var exited = false
  private var key = pthread_key_t()

  init() {
    pthread_key_create(&key) { pointer in
      Unmanaged<ThreadExitProbe>.fromOpaque(pointer!).takeRetainedValue().markExited()
    }
  }

  deinit { pthread_key_delete(key) }

  /// Call on the thread to watch.
  func watchCurrentThread() {
    pthread_setspecific(key, Unmanaged.passRetained(self).toOpaque())
  }

  private func markExited() { lock.withLock { exited = true } }

  var hasExited: Bool { lock.withLock { exited } }
}

/// One test's writer: a loop, and a writer on an owner-only, WAL, synchronous=FULL database with
/// `item(id INTEGER PRIMARY KEY, value TEXT)`. `tearDown()` at the end (`defer`), on every path out of the test:
/// it shuts the writer down, closes the loop (an issue if a handle is left) and removes the database.
private struct WriterFixture {
  let db: TemporaryDatabase
  let loop: Loop
  let writer: SQLiteWriter

  init(
    _ label: String = #function, maxJobsPerTransaction: Int = 1000, maxQueuedJobs: Int = 100_000,
    schema: String = "", jobsMayRunTwice: Bool = false
  ) throws {
    db = TemporaryDatabase(label)
    let connection = try db.open()
    try connection.execute("CREATE TABLE item(id INTEGER PRIMARY KEY, value TEXT); \(schema)")
    loop = try Loop()
    writer = SQLiteWriter(
      connection: connection, maxJobsPerTransaction: maxJobsPerTransaction, maxQueuedJobs: maxQueuedJobs,
      jobsMayRunTwice: jobsMayRunTwice)
  }

  func tearDown() {
    writer.shutdown()
    do { try loop.close() } catch { Issue.record("the loop did not close: \(error)") }
    db.remove()
  }

  /// Makes the writer busy until `gate` opens: what is submitted meanwhile is queued, and taken as one group.
  /// The job holding it counts on `countdown` when it ends.
  func hold(until gate: ThreadGate, countdown: CompletionCountdown) {
    writer.read(on: loop, { _ in gate.wait() }, completion: { _ in countdown.done() })
    gate.waitUntilReached()
  }

  /// Submits `jobs` while the writer is held, so that they are taken together (at most `maxJobsPerTransaction`
  /// a group), then lets it go and runs the loop until every completion ran.
  func runQueuedTogether<T: Sendable>(_ jobs: [@Sendable (SQLiteConnection) throws -> T]) throws
    -> Completions<T>
  {
    let countdown = CompletionCountdown(loop: loop, expected: jobs.count + 1)
    let gate = ThreadGate()
    defer { gate.open() }
    hold(until: gate, countdown: countdown)
    var completions = Completions<T>()
    for (index, job) in jobs.enumerated() {
      writer.submit(on: loop, job) { result in
        completions.record(index, result)
        countdown.done()
      }
    }
    gate.open()
    try loop.runUntilDone()
    return completions
  }
}

/// The completions of `WriterFixture.runQueuedTogether`'s jobs.
private struct Completions<T> {
  /// Each job's result, by its index in the jobs given.
  private(set) var results: [Int: Result<T, any Error>] = [:]
  /// The results in the order the completions ran.
  private(set) var inOrder: [Result<T, any Error>] = []

  mutating func record(_ job: Int, _ result: Result<T, any Error>) {
    results[job] = result
    inOrder.append(result)
  }
}

/// The ids in `item`, read through a connection of its own.
private func storedIDs(_ db: TemporaryDatabase) throws -> [Int64] {
  let reader = try SQLiteConnection(path: db.path, mode: .readOnly)
  return try reader.query("SELECT id FROM item ORDER BY id").map { row in
    guard case .integer(let id) = row[0] else { return -1 }
    return id
  }
}

@Sendable private func insertItem(_ id: Int) -> @Sendable (SQLiteConnection) throws -> Int64 {
  { connection in
    try connection.execute(
      "INSERT INTO item(id, value) VALUES (?, ?)", [.integer(Int64(id)), .text("item \(id)")])
    return connection.lastInsertRowID
  }
}

@Suite struct SQLiteWriterTests {
  @Test func jobsSubmittedInOneLoopTurnShareTransactions() throws {
    let fixture = try WriterFixture()
    defer { fixture.tearDown() }
    let (loop, writer) = (fixture.loop, fixture.writer)
    let countdown = CompletionCountdown(loop: loop, expected: 200)
    var results: [Int: Result<Int64, any Error>] = [:]
    for i in 0..<200 {
      writer.submit(on: loop, insertItem(i)) { result in
        results[i] = result
        countdown.done()
      }
    }
    try loop.runUntilDone()
    #expect(results.count == 200)
    #expect(results.allSatisfy { id, result in (try? result.get()) == Int64(id) })
    // The group-commit property: far fewer commits (fsyncs) than jobs.
    #expect(writer.jobsCommitted == 200)
    #expect(writer.transactionsCommitted < writer.jobsCommitted)
    #expect(try storedIDs(fixture.db) == (0..<200).map { Int64($0) })
  }

  @Test func everyJobQueuedWhileTheWriterIsBusyIsTakenAtOnceUpToTheLimit() throws {
    let fixture = try WriterFixture(maxJobsPerTransaction: 64)
    defer { fixture.tearDown() }
    let run = try fixture.runQueuedTogether((0..<200).map(insertItem))
    #expect(run.inOrder.count(where: { if case .success = $0 { true } else { false } }) == 200)
    // 64 + 64 + 64 + 8.
    #expect(fixture.writer.transactionsCommitted == 4)
    #expect(fixture.writer.jobsCommitted == 200)
    #expect(try storedIDs(fixture.db).count == 200)
  }

  /// The same with jobs that may run twice (no savepoint each at first): job 5 threw after writing, so the group
  /// ran again, each job in its savepoint, and nothing else differs.
  @Test(arguments: [false, true])
  func aThrowingJobGetsItsErrorAndTheOthersInItsGroupCommit(jobsMayRunTwice: Bool) throws {
    let fixture = try WriterFixture(jobsMayRunTwice: jobsMayRunTwice)
    defer { fixture.tearDown() }
    let writer = fixture.writer
    var jobs: [@Sendable (SQLiteConnection) throws -> Int64] = []
    for i in 0..<10 {
      let job: @Sendable (SQLiteConnection) throws -> Int64
      switch i {
      case 5:
        // Writes, then fails: its write must be undone, nobody else's.
        job = { connection in
          _ = try insertItem(5)(connection)
          throw TestJobError.failed(5)
        }
      case 7:
        job = insertItem(0)  // a UNIQUE violation: SQLite's own error
      default:
        job = insertItem(i)
      }
      jobs.append(job)
    }
    let results = try fixture.runQueuedTogether(jobs).results

    guard case .failure(let thrown)? = results[5], case .failure(let sqlite)? = results[7] else {
      Issue.record("jobs 5 and 7 should have failed: \(results)")
      return
    }
    #expect(thrown as? TestJobError == .failed(5))
    #expect((sqlite as? SQLiteError)?.extendedCode == SQLiteError.ExtendedCode.constraintPrimaryKey)
    for i in [0, 1, 2, 3, 4, 6, 8, 9] {
      #expect((try? results[i]?.get()) == Int64(i), "job \(i)")
    }
    #expect(writer.transactionsCommitted == 1)
    #expect(writer.jobsCommitted == 8)
    #expect(try storedIDs(fixture.db) == [0, 1, 2, 3, 4, 6, 8, 9])
    #expect(writer.groupsRunAgain == (jobsMayRunTwice ? 1 : 0))
  }

  /// Jobs that may run twice run without a savepoint each: one that throws before writing (its checks failed)
  /// has nothing to undo, so every job runs once and the others commit; inside a job there is no savepoint.
  @Test func jobsThatMayRunTwiceRunOnceWithoutSavepointsWhenNoneFailsAfterWriting() throws {
    let fixture = try WriterFixture(jobsMayRunTwice: true)
    defer { fixture.tearDown() }
    let runs = RunCounter()
    let jobs: [@Sendable (SQLiteConnection) throws -> Int64] = (0..<10).map { i in
      { connection in
        runs.count(i)
        if i == 3 { throw TestJobError.failed(3) }  // before any write
        if i == 4 {
          // No savepoint of the writer's to release: SQLite names none.
          #expect(throws: SQLiteError.self) {
            try connection.execute("RELEASE SAVEPOINT sqlite_writer_job")
          }
        }
        return try insertItem(i)(connection)
      }
    }
    let results = try fixture.runQueuedTogether(jobs).results
    guard case .failure(let thrown)? = results[3] else {
      Issue.record("job 3 should have failed: \(results)")
      return
    }
    #expect(thrown as? TestJobError == .failed(3))
    #expect(runs.counts == Dictionary(uniqueKeysWithValues: (0..<10).map { ($0, 1) }), "each job ran once")
    #expect(fixture.writer.groupsRunAgain == 0)
    #expect(fixture.writer.transactionsCommitted == 1)
    #expect(try storedIDs(fixture.db) == [0, 1, 2, 4, 5, 6, 7, 8, 9])
  }

  /// A job that throws after writing makes its group roll back and run again, each job in its savepoint: the
  /// jobs up to it run twice, those after it once (the first run stopped there), and the store holds each
  /// successful job's write once.
  @Test func aJobThatThrowsAfterWritingMakesItsGroupRunAgainWithSavepoints() throws {
    let fixture = try WriterFixture(jobsMayRunTwice: true)
    defer { fixture.tearDown() }
    let runs = RunCounter()
    let jobs: [@Sendable (SQLiteConnection) throws -> Int64] = (0..<6).map { i in
      { connection in
        runs.count(i)
        let id = try insertItem(i)(connection)
        if i == 2 { throw TestJobError.failed(2) }
        return id
      }
    }
    let results = try fixture.runQueuedTogether(jobs).results
    #expect(results.count == 6)
    guard case .failure(let thrown)? = results[2] else {
      Issue.record("job 2 should have failed: \(results)")
      return
    }
    #expect(thrown as? TestJobError == .failed(2))
    // Jobs 0 to 2 ran in the first pass, which stopped at job 2; all ran in the second.
    #expect(runs.counts == [0: 2, 1: 2, 2: 2, 3: 1, 4: 1, 5: 1])
    #expect(fixture.writer.groupsRunAgain == 1)
    #expect(fixture.writer.transactionsCommitted == 1 && fixture.writer.jobsCommitted == 5)
    #expect(try storedIDs(fixture.db) == [0, 1, 3, 4, 5])
  }

  @Test func completionsRunOnTheLoopThreadAfterTheCommitIsVisibleToOthers() throws {
    let fixture = try WriterFixture()
    defer { fixture.tearDown() }
    let (db, loop, writer) = (fixture.db, fixture.loop, fixture.writer)
    let loopThread = pthread_self()
    let countdown = CompletionCountdown(loop: loop, expected: 20)
    var order: [Int] = []
    var offLoop = 0
    var writerOnLoopThread = false
    for i in 0..<20 {
      writer.submit(
        on: loop,
        { connection in
          if pthread_equal(pthread_self(), loopThread) != 0 { throw TestJobError.failed(-1) }
          return try insertItem(i)(connection)
        },
        completion: { result in
          if pthread_equal(pthread_self(), loopThread) == 0 { offLoop += 1 }
          if case .failure(TestJobError.failed(-1)) = result { writerOnLoopThread = true }
          order.append(i)
          // A second connection already sees the row: the answer comes after the commit.
          let visible = try? SQLiteConnection(path: db.path, mode: .readOnly)
            .query("SELECT value FROM item WHERE id = ?", [.integer(Int64(i))])
          #expect(visible == [[.text("item \(i)")]], "job \(i) answered before its row was committed")
          #expect(writer.transactionsCommitted >= 1)
          countdown.done()
        })
    }
    try loop.runUntilDone()
    #expect(offLoop == 0)
    #expect(!writerOnLoopThread)
    #expect(order == Array(0..<20))
  }

  /// `submit(on:_:timedCompletion:)`: each committed job gets where its time went. Jobs of one group share its
  /// apply and commit; a job's queueing covers at least the time the writer was held after it was submitted;
  /// the four phases fit within what the test saw from submission to completion; a refused job gets none.
  @Test func eachCommittedJobIsTimedAndAGroupsJobsShareItsApplyAndCommit() throws {
    struct JobFailed: Error {}
    let fixture = try WriterFixture(maxQueuedJobs: 4)
    defer { fixture.tearDown() }
    let (loop, writer) = (fixture.loop, fixture.writer)
    let countdown = CompletionCountdown(loop: loop, expected: 6)
    let gate = ThreadGate()
    defer { gate.open() }
    fixture.hold(until: gate, countdown: countdown)
    var timed: [Int: WriterTimings?] = [:]
    var seen: [Int: Duration] = [:]
    var submitted: [Int: ContinuousClock.Instant] = [:]
    for index in 0..<5 {
      submitted[index] = ContinuousClock.now
      var job: @Sendable (SQLiteConnection) throws -> Int64 = insertItem(index)
      if index == 1 { job = { _ in throw JobFailed() } }
      writer.submit(
        on: loop, job,
        timedCompletion: { _, timings in
          seen[index] = ContinuousClock.now - submitted[index]!
          timed[index] = timings
          countdown.done()
        })
    }
    // The writer was held this long, at least, after every job was submitted.
    let heldFrom = ContinuousClock.now
    while ContinuousClock.now - heldFrom < .milliseconds(5) {}
    let held = ContinuousClock.now - submitted[4]!
    gate.open()
    try loop.runUntilDone()
    // The fifth job was over `maxQueuedJobs` (four waited already): refused, not timed.
    #expect(timed[4] == .some(nil))
    let group = (0..<4).compactMap { timed[$0] ?? nil }
    #expect(group.count == 4, "the four queued jobs (one that threw) committed in one group, each timed")
    #expect(Set(group.map(\.applied)).count == 1 && Set(group.map(\.committed)).count == 1)
    for (index, timings) in group.enumerated() {
      #expect(timings.queued >= held, "job \(index) was queued while the writer was held")
      #expect(timings.applied > .zero && timings.committed > .zero && timings.handedBack >= .zero)
      let whole = timings.queued + timings.applied + timings.committed + timings.handedBack
      #expect(whole <= seen[index]!, "job \(index): \(whole) within the \(seen[index]!) the test saw")
    }
  }

  @Test func aFailedCommitFailsEveryJobOfTheGroup() throws {
    // A deferred foreign key is checked only at COMMIT: job B makes the group's COMMIT fail.
    let fixture = try WriterFixture(
      schema: """
        CREATE TABLE parent(id INTEGER PRIMARY KEY);
        CREATE TABLE child(parent INTEGER REFERENCES parent(id) DEFERRABLE INITIALLY DEFERRED);
        """)
    defer { fixture.tearDown() }
    let (loop, writer) = (fixture.loop, fixture.writer)
    let countdown = CompletionCountdown(loop: loop, expected: 5)
    let gate = ThreadGate()
    defer { gate.open() }
    fixture.hold(until: gate, countdown: countdown)
    var errors: [Int32?] = []
    var afterwards: Result<Int64, any Error>?
    let jobs: [@Sendable (SQLiteConnection) throws -> Void] = [
      { try $0.execute("INSERT INTO parent VALUES (1)", []) },
      { try $0.execute("INSERT INTO child VALUES (99)", []) },
      { try $0.execute("INSERT INTO parent VALUES (2)", []) },
    ]
    for job in jobs {
      writer.submit(on: loop, job) { result in
        if case .failure(let error) = result { errors.append((error as? SQLiteError)?.extendedCode) }
        if errors.count == 3 {
          // A new group after the failed one starts from a clean state.
          writer.submit(on: loop, insertItem(1)) { result in
            afterwards = result
            countdown.done()
          }
        }
        countdown.done()
      }
    }
    gate.open()
    try loop.runUntilDone()
    #expect(errors == Array(repeating: SQLiteError.ExtendedCode.constraintForeignKey, count: 3))
    #expect((try? afterwards?.get()) == 1)
    #expect(writer.transactionsCommitted == 1)
    #expect(writer.jobsCommitted == 1)
    let reader = try SQLiteConnection(path: fixture.db.path, mode: .readOnly)
    #expect(try reader.query("SELECT count(*) FROM parent") == [[.integer(0)]])
    #expect(try reader.query("SELECT count(*) FROM child") == [[.integer(0)]])
  }

  @Test func aJobThatEndsTheTransactionFailsTheJobsBeforeItAndTheRestRunAnew() throws {
    let fixture = try WriterFixture()
    defer { fixture.tearDown() }
    let jobs: [@Sendable (SQLiteConnection) throws -> Int64] = [
      insertItem(1),
      { connection in
        // Misuse, or what SQLite does by itself on a full disk: the group's transaction is gone.
        try connection.execute("ROLLBACK")
        return 0
      },
      insertItem(3),
    ]
    let results = try fixture.runQueuedTogether(jobs).inOrder
    #expect(results.count == 3)
    // Job 1's insert was rolled back with the transaction: it must not be told it succeeded.
    #expect(results.prefix(2).allSatisfy { if case .failure = $0 { true } else { false } })
    #expect((try? results.last?.get()) == 3)
    #expect(fixture.writer.jobsCommitted == 1)
    #expect(try storedIDs(fixture.db) == [3])
  }

  @Test func readsRunInSubmissionOrderOutsideGroups() throws {
    let fixture = try WriterFixture()
    defer { fixture.tearDown() }
    let (loop, writer) = (fixture.loop, fixture.writer)
    let countdown = CompletionCountdown(loop: loop, expected: 5)
    var counts: [Int64] = []
    var readError: (any Error)?
    let count: @Sendable (SQLiteConnection) throws -> Int64 = { connection in
      #expect(!connection.isInTransaction)
      guard case .integer(let n) = try connection.query("SELECT count(*) FROM item")[0][0] else { return -1 }
      return n
    }
    writer.submit(on: loop, insertItem(1)) { _ in countdown.done() }
    writer.read(on: loop, count) { result in
      counts.append((try? result.get()) ?? -1)
      countdown.done()
    }
    writer.submit(on: loop, insertItem(2)) { _ in countdown.done() }
    writer.read(on: loop, count) { result in
      counts.append((try? result.get()) ?? -1)
      countdown.done()
    }
    let failing: @Sendable (SQLiteConnection) throws -> Int = { _ in throw TestJobError.failed(3) }
    writer.read(on: loop, failing) { result in
      if case .failure(let error) = result { readError = error }
      countdown.done()
    }
    try loop.runUntilDone()
    #expect(counts == [1, 2])
    #expect(readError as? TestJobError == .failed(3))
    #expect(writer.jobsCommitted == 2)
  }

  @Test func shutdownRunsOutstandingJobsAndJoinsTheThread() throws {
    let fixture = try WriterFixture()
    defer { fixture.tearDown() }
    let (loop, writer) = (fixture.loop, fixture.writer)
    let probe = ThreadExitProbe()
    let countdown = CompletionCountdown(loop: loop, expected: 51)
    var succeeded = 0
    writer.read(on: loop, { _ in probe.watchCurrentThread() }, completion: { _ in countdown.done() })
    for i in 0..<50 {
      writer.submit(on: loop, insertItem(i)) { result in
        if case .success = result { succeeded += 1 }
        countdown.done()
      }
    }
    writer.shutdown()
    // Before the loop ran again: every job committed, the thread is gone, the answers wait for the loop.
    #expect(probe.hasExited)
    #expect(try storedIDs(fixture.db).count == 50)
    #expect(writer.pendingCompletions == 51)

    var late: Result<Int64, any Error>?
    writer.submit(on: loop, insertItem(99)) { result in late = result }
    writer.shutdown()  // idempotent
    try loop.runUntilDone()
    #expect(succeeded == 50)
    guard case .failure(let error)? = late else {
      Issue.record("a job submitted after shutdown should fail: \(String(describing: late))")
      return
    }
    #expect(error as? SQLiteWriterError == .shutDown)
    #expect(writer.pendingCompletions == 0)
  }

  @Test func aFullQueueRefusesJobsInsteadOfGrowing() throws {
    let fixture = try WriterFixture(maxQueuedJobs: 2)
    defer { fixture.tearDown() }
    let results = try fixture.runQueuedTogether((0..<3).map(insertItem)).inOrder
    #expect(results.count == 3)
    // The refusal is answered first: it did not wait for the queue.
    guard case .failure(let error) = results.first else {
      Issue.record("the third job should have been refused: \(results)")
      return
    }
    #expect(error as? SQLiteWriterError == .overloaded(queuedJobs: 2))
    #expect(try storedIDs(fixture.db) == [0, 1])
  }

  @Test func eachCompletionRunsOnTheLoopThatSubmittedIt() throws {
    let fixture = try WriterFixture()
    defer { fixture.tearDown() }
    let (loop, writer) = (fixture.loop, fixture.writer)
    let other = try LoopThread()
    final class Tally: @unchecked Sendable {
      let lock = Lock()
      var onItsLoop = 0
      var elsewhere = 0
    }
    let tally = Tally()
    let countdown = CompletionCountdown(loop: loop, expected: 2)
    other.start { otherLoop in
      let thread = pthread_self()
      var remaining = 50
      for i in 0..<50 {
        writer.submit(on: otherLoop, insertItem(1000 + i)) { _ in
          tally.lock.withLock {
            if pthread_equal(pthread_self(), thread) != 0 {
              tally.onItsLoop += 1
            } else {
              tally.elsewhere += 1
            }
          }
          remaining -= 1
          if remaining == 0 { loop.execute { countdown.done() } }
        }
      }
    }
    let mainThread = pthread_self()
    var remaining = 50
    for i in 0..<50 {
      writer.submit(on: loop, insertItem(i)) { _ in
        tally.lock.withLock {
          if pthread_equal(pthread_self(), mainThread) != 0 {
            tally.onItsLoop += 1
          } else {
            tally.elsewhere += 1
          }
        }
        remaining -= 1
        if remaining == 0 { countdown.done() }
      }
    }
    try loop.runUntilDone()
    try other.shutdown()
    #expect(tally.lock.withLock { (tally.onItsLoop, tally.elsewhere) } == (100, 0))
    #expect(try storedIDs(fixture.db).count == 100)
  }
}

/// How many times each job ran (jobs run on the writer thread; the test reads after the loop ran).
private final class RunCounter: @unchecked Sendable {
  private let lock = Lock()
  private var runs: [Int: Int] = [:]

  func count(_ job: Int) { lock.withLock { runs[job, default: 0] += 1 } }
  var counts: [Int: Int] { lock.withLock { runs } }
}
