import EventLoop

#if canImport(Glibc)
  import Glibc
#endif

/// Why the writer itself failed a job (its own errors, not the job's or SQLite's).
public enum SQLiteWriterError: Error, Equatable, Sendable, CustomStringConvertible {
  /// The job was submitted after `shutdown()` began; it did not run.
  case shutDown
  /// `maxQueuedJobs` jobs were already waiting; the job did not run. Answer "busy" upstream and retry later.
  case overloaded(queuedJobs: Int)
  /// The job ended the group's transaction itself (COMMIT, ROLLBACK): jobs must leave it to the writer.
  case transactionEndedByJob

  public var description: String {
    switch self {
    case .shutDown: "the SQLite writer is shut down"
    case .overloaded(let queued): "the SQLite writer is overloaded: \(queued) jobs already queued"
    case .transactionEndedByJob: "a job ended the writer's transaction itself"
    }
  }
}

/// A job or read waiting for the writer thread, its connection already bound. At file scope, not nested in
/// `StoreWriter`: a type nested in a generic class is generic too, and the broker uses its writer from another
/// module, unspecialized, so each copy of a nested request in `runGroup`'s loop went through the runtime's type
/// metadata (~8,000 instructions a job, a sixteenth of the broker's writer per one-mutation batch; callgrind).
private struct WriterRequest: Sendable {
  var id: UInt64
  var loop: Loop
  var isRead: Bool
  var work: @Sendable () throws -> any Sendable
  /// When it was submitted (`WriterTimings.queued`), `monotonicNanoseconds()`.
  var submitted: Int64
}

/// Where one committed job's time went on its way through the writer, from its submission to its completion
/// (`StoreWriter.submit(on:_:timedCompletion:)`), in nanoseconds of the monotonic clock: a metric can count them
/// without converting a `Duration` (a 128-bit multiply) or comparing two (a call each). The four add up to the
/// whole.
public struct WriterTimings: Sendable, Equatable {
  /// From `submit` until its group's BEGIN: waiting for the writer thread to wake, and for the groups before.
  /// A group that ran again, each job in its savepoint (`runsJobsWithoutSavepoints`), counts from its second
  /// BEGIN: the first pass is in this phase.
  public var queuedNanoseconds: Int64
  /// From BEGIN until COMMIT started: its group's jobs (its own and the others') applied.
  public var appliedNanoseconds: Int64
  /// The COMMIT, with the sync that makes it durable.
  public var committedNanoseconds: Int64
  /// From COMMIT's return until the completion ran on the loop's thread: the way back.
  public var handedBackNanoseconds: Int64

  public var queued: Duration { .nanoseconds(queuedNanoseconds) }
  public var applied: Duration { .nanoseconds(appliedNanoseconds) }
  public var committed: Duration { .nanoseconds(committedNanoseconds) }
  public var handedBack: Duration { .nanoseconds(handedBackNanoseconds) }

  public init(
    queuedNanoseconds: Int64, appliedNanoseconds: Int64, committedNanoseconds: Int64,
    handedBackNanoseconds: Int64
  ) {
    self.queuedNanoseconds = queuedNanoseconds
    self.appliedNanoseconds = appliedNanoseconds
    self.committedNanoseconds = committedNanoseconds
    self.handedBackNanoseconds = handedBackNanoseconds
  }

  /// The same from durations, to whole nanoseconds (clamped to what an `Int64` holds).
  public init(queued: Duration, applied: Duration, committed: Duration, handedBack: Duration) {
    func nanoseconds(_ duration: Duration) -> Int64 {
      let (seconds, attoseconds) = duration.components
      let (whole, overflow) = seconds.multipliedReportingOverflow(by: 1_000_000_000)
      let (sum, carried) = whole.addingReportingOverflow(attoseconds / 1_000_000_000)
      return overflow || carried ? (seconds < 0 ? .min : .max) : sum
    }
    self.init(
      queuedNanoseconds: nanoseconds(queued), appliedNanoseconds: nanoseconds(applied),
      committedNanoseconds: nanoseconds(committed), handedBackNanoseconds: nanoseconds(handedBack))
  }
}

/// Now on the monotonic clock (`CLOCK_MONOTONIC`: a vDSO call, no system call), in nanoseconds.
func monotonicNanoseconds() -> Int64 {
  var now = timespec()
  clock_gettime(CLOCK_MONOTONIC, &now)
  return Int64(now.tv_sec) &* 1_000_000_000 &+ Int64(now.tv_nsec)
}

/// A committed job's timings as the writer thread knows them: all but the way back, which ends on the loop.
private struct CommittedStamp: Sendable {
  var timings: WriterTimings
  var committedAt: Int64
}

/// Owns a connection on a dedicated WorkerThread. Jobs submitted from a loop thread while the writer is busy are
/// run together in ONE transaction (one fsync): each job inside its own SAVEPOINT, so a job that throws rolls back
/// only itself and gets its error; the others commit. Completions run on the submitting loop's thread only after
/// COMMIT returned (i.e. after the data is durable per the connection's synchronous setting). If COMMIT itself
/// fails, every job of the group gets the error.
///
/// ```
///   loop threads                     writer thread
///   submit ─▶ queue ──(first job)──▶ drain: take every queued job up to maxJobsPerTransaction
///                                      BEGIN IMMEDIATE
///                                      for each job: SAVEPOINT, job, RELEASE (or ROLLBACK TO + RELEASE)
///                                      COMMIT ──▶ loop.execute { completions, in submission order }
///                                    repeat while the queue is not empty (jobs that came in meanwhile)
/// ```
///
/// Jobs and reads run in submission order; a `read` runs alone, between groups.
///
/// Jobs that may run twice (`jobsMayRunTwice`, SQLite only): a group first runs its jobs without savepoints (two
/// statements fewer per job: 7% of the broker writer's instructions per one-mutation batch). A job that throws
/// having written nothing (`totalChanges` unchanged: its checks failed before its first write) has nothing to
/// undo; one that throws after writing cannot be undone alone, so the whole group rolls back and runs again,
/// each job in its savepoint as above. What completions see is the same either way; the jobs of such a group
/// run twice, so they must be functions of the store (what they change elsewhere, they change in their
/// completion).
///
/// Threading: `submit` and `read` are called on the thread of the loop they name; several loops may share a
/// writer. A completion never leaves its loop's thread, so it may capture loop-bound objects: it waits in a
/// table keyed by an id (as `Loop.offload` does), and only the id and the job's result cross to the writer and
/// back. The table is guarded by a lock because several loops may submit; the writer thread never touches it.
/// Errors cross threads as thrown: `Error` refines `Sendable` in Swift 6, so a job's own error type reaches its
/// completion unchanged (a class conforming to `Error` must be safe to send anyway).
///
/// Like `Loop.offload`, outstanding jobs do not keep a loop running: a loop that must wait for them sets
/// `keepsRunningWhenIdle` (as `LoopThread` does).
///
/// Jobs must not end the transaction themselves (COMMIT, ROLLBACK, BEGIN) and must not wait for a loop thread:
/// `shutdown()` may be blocking it.
///
/// Engines: the writer runs on any `StoreConnection` (SQLite, PostgreSQL), and hands jobs the connection as
/// `Connection`: `SQLiteWriter` (`StoreWriter<SQLiteConnection>`) for code written against SQLite, or
/// `StoreWriter<any StoreConnection>` for code that runs on either. A PostgreSQL connection lost between groups
/// is opened again by the next group's `beginGroup`; a group whose connection is lost fails whole (nothing of it
/// was committed).
public final class StoreWriter<Connection>: @unchecked Sendable {
  // @unchecked: `connection` is used only on the worker thread (and by `shutdown` after joining it); every
  // other variable is guarded by `lock`.
  private let job: Connection
  private let connection: any StoreConnection
  /// Told where jobs and groups end (`StoreGroupObserver`); used on the worker thread only.
  private let observer: (any StoreGroupObserver)?
  private let worker: WorkerThread
  /// The most jobs one transaction runs; more queued jobs wait for the next transaction.
  public let maxJobsPerTransaction: Int
  /// The most jobs waiting at once; a job submitted beyond it fails with `SQLiteWriterError.overloaded`.
  public let maxQueuedJobs: Int
  /// Whether a group first runs its jobs without a savepoint each (see above): jobs may run twice, and the
  /// connection is SQLite's (a failed statement on PostgreSQL aborts the whole transaction).
  public let runsJobsWithoutSavepoints: Bool

  private let lock = Lock()
  private var queue: [WriterRequest] = []
  private var drainScheduled = false
  private var accepting = true
  private var completions: [UInt64: (Outcome, WriterTimings?) -> Void] = [:]
  private var nextID: UInt64 = 0
  private var committedTransactionCount = 0
  private var committedJobCount = 0
  private var rerunGroupCount = 0
  private var lastFailure: String?

  private typealias Outcome = Result<any Sendable, any Error>
  private typealias Work = @Sendable (Connection) throws -> any Sendable

  /// Takes `connection` over: from now on only the writer's thread uses it, and `shutdown` closes it.
  /// Configure it (`configure`, migrations) before handing it over.
  init(
    job: Connection, connection: any StoreConnection, name: String, maxJobsPerTransaction: Int,
    maxQueuedJobs: Int, observer: (any StoreGroupObserver)? = nil, jobsMayRunTwice: Bool = false
  ) {
    precondition(maxJobsPerTransaction > 0 && maxQueuedJobs > 0, "limits must be positive")
    self.job = job
    self.connection = connection
    self.observer = observer
    runsJobsWithoutSavepoints = jobsMayRunTwice && connection.engine == .sqlite
    self.maxJobsPerTransaction = maxJobsPerTransaction
    self.maxQueuedJobs = maxQueuedJobs
    worker = WorkerThread(name: name)
  }

  deinit {
    // A last resort: owners call shutdown() themselves, at a time when blocking is fine.
    shutdown()
  }

  // MARK: Submitting (loop threads)

  /// Call on `loop`'s thread. `job` runs on the writer thread inside the group's transaction; `completion` runs
  /// on `loop`'s thread with its result, after the group's COMMIT returned: with `job`'s value if the commit
  /// succeeded, `job`'s error if it threw (only its own changes were rolled back), or the COMMIT's error.
  public func submit<T: Sendable>(
    on loop: Loop, _ job: @escaping @Sendable (Connection) throws -> T,
    completion: @escaping (Result<T, any Error>) -> Void
  ) {
    enqueue(on: loop, isRead: false, { try job($0) }, { outcome, _ in completion(outcome.map { $0 as! T }) })
  }

  /// `submit(on:_:completion:)`, whose completion also gets the job's `WriterTimings` when it was committed (nil
  /// when it was not: refused, or its group failed).
  public func submit<T: Sendable>(
    on loop: Loop, _ job: @escaping @Sendable (Connection) throws -> T,
    timedCompletion completion: @escaping (Result<T, any Error>, WriterTimings?) -> Void
  ) {
    enqueue(
      on: loop, isRead: false, { try job($0) },
      { outcome, timings in completion(outcome.map { $0 as! T }, timings) })
  }

  /// Runs `body` on the writer thread outside any group (reads, maintenance) — same completion rules. It runs
  /// after every job submitted before it, in autocommit mode.
  public func read<T: Sendable>(
    on loop: Loop, _ body: @escaping @Sendable (Connection) throws -> T,
    completion: @escaping (Result<T, any Error>) -> Void
  ) {
    enqueue(on: loop, isRead: true, { try body($0) }, { outcome, _ in completion(outcome.map { $0 as! T }) })
  }

  private func enqueue(
    on loop: Loop, isRead: Bool, _ work: @escaping Work,
    _ completion: @escaping (Outcome, WriterTimings?) -> Void
  ) {
    let submitted = monotonicNanoseconds()
    let (id, rejection) = lock.withLock { () -> (UInt64, SQLiteWriterError?) in
      let id = nextID
      nextID += 1
      completions[id] = completion
      if !accepting { return (id, .shutDown) }
      if queue.count >= maxQueuedJobs { return (id, .overloaded(queuedJobs: queue.count)) }
      // `self` is sendable where the job's connection type need not be; the request holds it only until it ran.
      queue.append(
        WriterRequest(
          id: id, loop: loop, isRead: isRead, work: { [self] in try work(self.job) }, submitted: submitted))
      if !drainScheduled {
        drainScheduled = true
        // Under the lock, so that `shutdown` cannot stop the worker between our append and this submit.
        worker.submit { [self] in drain() }
      }
      return (id, nil)
    }
    // Through the loop even now: a completion never runs inside `submit`, whose caller may not expect it.
    if let rejection { deliver([(id, loop, .failure(rejection))]) }
  }

  // MARK: Counters (any thread)

  /// Transactions committed so far (group commits; reads are not counted).
  public var transactionsCommitted: Int { lock.withLock { committedTransactionCount } }

  /// Jobs whose changes were committed so far (failed jobs are not counted).
  public var jobsCommitted: Int { lock.withLock { committedJobCount } }

  /// Groups rolled back and run again, each job in its savepoint, because a job threw after writing
  /// (`runsJobsWithoutSavepoints`).
  public var groupsRunAgain: Int { lock.withLock { rerunGroupCount } }

  /// Jobs and reads submitted whose completion has not run yet.
  public var pendingCompletions: Int { lock.withLock { completions.count } }

  /// Why the last group's transaction failed (BEGIN or COMMIT refused, or SQLite rolled it back: a full disk, an
  /// I/O error), if it did; nil once a later group commits. What a health check reports about writing, without
  /// joining the queue.
  public var lastTransactionFailure: String? { lock.withLock { lastFailure } }

  private func recordFailure(_ error: any Error) {
    let description = "\(error)"
    lock.withLock { lastFailure = description }
  }

  // MARK: Shutdown

  /// Stops accepting jobs (later ones fail with `.shutDown`), runs every job already queued, joins the writer
  /// thread and closes the connection. Blocks until then; completions of the last jobs run when their loops
  /// next run. Idempotent.
  public func shutdown() {
    let first = lock.withLock {
      defer { accepting = false }
      return accepting
    }
    worker.shutdown()
    if first { connection.close() }
  }

  // MARK: The writer thread

  private func drain() {
    while let batch = takeBatch() {
      if batch.count == 1 && batch[0].isRead {
        let request = batch[0]
        deliver([(request.id, request.loop, Outcome { try request.work() })])
      } else {
        var remaining = batch[...]
        while !remaining.isEmpty {
          if runsJobsWithoutSavepoints, let rest = runGroup(remaining, eachInSavepoint: false) {
            remaining = rest
          } else {
            remaining = runGroup(remaining, eachInSavepoint: true) ?? []
          }
        }
      }
    }
  }

  /// The next read alone, or the next run of jobs (up to `maxJobsPerTransaction`); nil when the queue is empty,
  /// in which case the next `enqueue` schedules a new drain.
  private func takeBatch() -> [WriterRequest]? {
    lock.withLock {
      guard let first = queue.first else {
        drainScheduled = false
        return nil
      }
      if first.isRead {
        queue.removeFirst()
        return [first]
      }
      var count = 1
      while count < queue.count && count < maxJobsPerTransaction && !queue[count].isRead { count += 1 }
      let batch = Array(queue[..<count])
      queue.removeFirst(count)
      return batch
    }
  }

  /// Runs `jobs` in one transaction and delivers their outcomes. Returns the jobs it did not run: those after a
  /// job whose failure made SQLite roll the whole transaction back (a full disk, an I/O error), which then run
  /// in a new transaction. Without a savepoint per job, returns nil, having rolled back and delivered nothing,
  /// when a job threw after writing: the group must run again, each job in its savepoint.
  private func runGroup(
    _ jobs: ArraySlice<WriterRequest>, eachInSavepoint: Bool
  ) -> ArraySlice<WriterRequest>? {
    TestCrashPoint.reach("begin", inTransaction: false)
    let began = monotonicNanoseconds()
    do {
      try connection.beginGroup()
    } catch {
      recordFailure(error)
      observer?.groupEnded(committed: false)
      deliver(jobs.map { ($0.id, $0.loop, .failure(error)) })
      return []
    }
    // However the group ends, the observer hears whether it committed.
    var committed = false
    defer { observer?.groupEnded(committed: committed) }
    var outcomes: [Outcome] = []
    outcomes.reserveCapacity(jobs.count)
    var deferred: ArraySlice<WriterRequest> = []
    for (index, job) in zip(jobs.indices, jobs) {
      let outcome: Outcome
      if eachInSavepoint {
        outcome = Outcome { try connection.savepoint("sqlite_writer_job") { try job.work() } }
      } else {
        let changesBefore = connection.totalChanges
        outcome = Outcome { try job.work() }
        if case .failure = outcome, connection.totalChanges != changesBefore || !connection.isInTransaction {
          // Its writes cannot be undone alone: the group runs again, each job in its savepoint.
          connection.rollbackIfOpen()
          lock.withLock { rerunGroupCount += 1 }
          return nil
        }
      }
      if let observer {
        if case .success = outcome { observer.jobEnded(kept: true) } else { observer.jobEnded(kept: false) }
      }
      if case .failure(let error) = outcome, error is StoreGroupMustEnd, index > jobs.startIndex {
        // Its workspace is another transaction's until that commits, and this one holds locks: commit what ran,
        // and run this job first in the next transaction (where it may wait).
        deferred = jobs[index...]
        break
      }
      outcomes.append(outcome)
      if !connection.isInTransaction {
        // The transaction is gone, and with it the work of every job so far: they fail with the cause.
        let cause: any Error
        if case .failure(let error) = outcome {
          cause = error
        } else {
          cause = SQLiteWriterError.transactionEndedByJob
        }
        recordFailure(cause)
        let failed = zip(jobs[...index], outcomes).map { job, outcome -> (UInt64, Loop, Outcome) in
          if case .failure = outcome { return (job.id, job.loop, outcome) }
          return (job.id, job.loop, .failure(cause))
        }
        deliver(failed)
        return jobs[(index + 1)...]
      }
    }
    var commitStarted = began
    do {
      // What the jobs kept for the end of the group is written before the crash point "commit": a crash there
      // finds every write of the group made and none committed.
      try observer?.groupWillCommit()
      TestCrashPoint.reach("commit", inTransaction: true)
      commitStarted = monotonicNanoseconds()
      try connection.commitGroup()
      committed = true
    } catch {
      // A failed COMMIT may leave the transaction open (SQLITE_BUSY, a deferred foreign key): end it.
      connection.rollbackIfOpen()
      recordFailure(error)
      deliver(jobs.prefix(outcomes.count).map { ($0.id, $0.loop, .failure(error)) })
      return deferred
    }
    TestCrashPoint.reach("committed", inTransaction: false)
    let succeeded = outcomes.count { if case .success = $0 { true } else { false } }
    lock.withLock {
      committedTransactionCount += 1
      committedJobCount += succeeded
      lastFailure = nil
    }
    let committedAt = monotonicNanoseconds()
    deliver(
      zip(jobs, outcomes).map { ($0.id, $0.loop, $1) },
      stamps: jobs.prefix(outcomes.count).map {
        CommittedStamp(
          timings: WriterTimings(
            queuedNanoseconds: began - $0.submitted, appliedNanoseconds: commitStarted - began,
            committedNanoseconds: committedAt - commitStarted, handedBackNanoseconds: 0),
          committedAt: committedAt)
      })
    return deferred
  }

  /// Posts outcomes to their loops: one `execute` per loop, completions in submission order. `stamps`, for a
  /// committed group, holds each outcome's timings.
  private func deliver(
    _ outcomes: [(id: UInt64, loop: Loop, outcome: Outcome)], stamps: [CommittedStamp]? = nil
  ) {
    var perLoop: [(loop: Loop, items: [(UInt64, Outcome, CommittedStamp?)])] = []
    for (index, (id, loop, outcome)) in outcomes.enumerated() {
      let item = (id, outcome, stamps?[index])
      if let slot = perLoop.firstIndex(where: { $0.loop === loop }) {
        perLoop[slot].items.append(item)
      } else {
        perLoop.append((loop, [item]))
      }
    }
    for (loop, items) in perLoop {
      loop.execute { [self] in
        for (id, outcome, stamp) in items { complete(id, outcome, stamp) }
      }
    }
  }

  /// On the loop thread: runs the completion waiting under `id`.
  private func complete(_ id: UInt64, _ outcome: Outcome, _ stamp: CommittedStamp?) {
    guard let completion = lock.withLock({ completions.removeValue(forKey: id) }) else { return }
    var timings = stamp?.timings
    if let stamp { timings?.handedBackNanoseconds = monotonicNanoseconds() - stamp.committedAt }
    completion(outcome, timings)
  }
}

/// The writer of code written against SQLite: jobs get the `SQLiteConnection`.
public typealias SQLiteWriter = StoreWriter<SQLiteConnection>

extension StoreWriter where Connection == SQLiteConnection {
  /// Takes `connection` over: from now on only the writer's thread uses it, and `shutdown` closes it.
  /// Configure it (`configure`, migrations) before handing it over.
  public convenience init(
    connection: SQLiteConnection, name: String = "sqlite-writer", maxJobsPerTransaction: Int = 1000,
    maxQueuedJobs: Int = 100_000, jobsMayRunTwice: Bool = false
  ) {
    self.init(
      job: connection, connection: connection, name: name, maxJobsPerTransaction: maxJobsPerTransaction,
      maxQueuedJobs: maxQueuedJobs, jobsMayRunTwice: jobsMayRunTwice)
  }
}

extension StoreWriter where Connection == any StoreConnection {
  /// Takes `connection` (of any engine) over: from now on only the writer's thread uses it, and `shutdown`
  /// closes it. Migrate it before handing it over.
  public convenience init(
    store connection: any StoreConnection, name: String, maxJobsPerTransaction: Int = 1000,
    maxQueuedJobs: Int = 100_000, observer: (any StoreGroupObserver)? = nil, jobsMayRunTwice: Bool = false
  ) {
    self.init(
      job: connection, connection: connection, name: name, maxJobsPerTransaction: maxJobsPerTransaction,
      maxQueuedJobs: maxQueuedJobs, observer: observer, jobsMayRunTwice: jobsMayRunTwice)
  }
}
