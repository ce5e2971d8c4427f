import CSQLite
import EventLoop

/// Copies a WAL database's committed pages back into its file (a checkpoint) mostly on a thread and connection
/// of its own, so that the writer's commits do not.
///
/// By default SQLite checkpoints inside the COMMIT that takes the WAL past 1,000 pages: that commit's caller (the
/// broker's writer thread, with a group of batches waiting for their answers) copies ~4 MiB and syncs both files
/// before it returns. Here the writer's connection only counts (`sqlite3_wal_hook`, which replaces SQLite's own
/// automatic checkpoint), and the work is split:
/// - **the checkpointer copies the bulk**: woken when `pages / 2` pages wait to be copied, its PASSIVE checkpoint
///   copies them into the file and syncs it while the writer goes on committing (WAL mode lets one writer and one
///   checkpointer work at once);
/// - **the writer ends it**: the log can only start over from its beginning when a write finds every page of it
///   copied, which a checkpoint running beside a busy writer never leaves. So once the log holds `pages` and at
///   most `pages / 8` of them wait, the writer checkpoints those few itself, right after its COMMIT, and its next
///   transaction writes the log from the start. Should the checkpointer fall behind (readers holding old pages, a
///   slow disk), the writer checkpoints whatever waits once the log reaches `4 × pages`, as SQLite would have at
///   `pages`: the log stays bounded either way.
///
/// Durability is unchanged: a transaction is durable when its COMMIT returns (`synchronous = FULL`); a checkpoint
/// only moves durable pages, syncing the log before and the file after, with the writer's `synchronous`.
///
/// Threading: `walCommitted` runs on the writer's thread (inside its COMMIT); the checkpoint on the checkpointer's
/// thread; the counters and `shutdown` on any thread.
public final class SQLiteCheckpointer: @unchecked Sendable {
  // @unchecked: `connection` is used on the worker thread only (and closed by `shutdown` after joining it); the
  // other variables are guarded by `lock`.
  private let connection: SQLiteConnection
  private let worker: WorkerThread
  /// The log's length at which the writer ends a checkpoint (copies what is left, so that the log starts over).
  public let pages: Int
  /// The log's length at which the writer checkpoints whatever waits, the checkpointer having fallen behind.
  public let writerPages: Int

  private let lock = Lock()
  private var scheduled = false
  private var stopped = false
  private var byCheckpointer = 0
  private var byWriter = 0
  private var copiedByCheckpointer = 0
  private var copiedByWriter = 0
  /// Pages of the current log already in the file (`sqlite3_wal_checkpoint_v2`'s checkpointed count).
  private var backfilled = 0
  private var lastError: String?
  /// Tests only: a checkpoint waits while this is set (`hold`), as one on a stalled disk would.
  private let gate = ConditionLock()
  private var held = false

  /// Opens a connection of its own to `path` (which the writer has configured for WAL) and starts its thread.
  /// `writerPages` defaults to four times `pages`.
  public init(
    path: String, synchronous: SQLiteConnection.Synchronous, pages: Int = 1000, writerPages: Int? = nil,
    name: String = "sqlite-checkpointer"
  ) throws(SQLiteError) {
    precondition(pages > 0, "pages must be positive")
    connection = try SQLiteConnection(path: path, mode: .readWrite)
    try connection.configure(synchronous: synchronous)
    self.pages = pages
    self.writerPages = max(writerPages ?? pages * 4, pages)
    worker = WorkerThread(name: name)
  }

  /// Makes `writer` (the only connection that writes `path`) count its WAL pages for this checkpointer instead of
  /// checkpointing by itself at SQLite's default. Call before handing `writer` to its thread. The writer keeps the
  /// checkpointer alive until it is closed.
  public func attach(to writer: SQLiteConnection) {
    writer.setWALHook { [self] db, frames in walCommitted(db: db, frames: frames) }
  }

  /// On the writer's thread, after each COMMIT: `frames` pages are in the WAL now.
  private func walCommitted(db: OpaquePointer, frames: Int) {
    let (writerEnds, wake) = lock.withLock { () -> (Bool, Bool) in
      // A log shorter than what was copied of it started over.
      if frames < backfilled { backfilled = 0 }
      let waiting = frames - backfilled
      if frames >= writerPages || (frames >= pages && waiting <= pages / 8) { return (true, false) }
      guard waiting >= pages / 2 && !scheduled && !stopped else { return (false, false) }
      scheduled = true
      return (false, true)
    }
    if wake {
      worker.submit { [self] in checkpoint() }
      return
    }
    guard writerEnds else { return }
    // PASSIVE: never waits. What it leaves (pages a reader still uses) the next commit tries again.
    let before = lock.withLock { backfilled }
    do {
      let (log, checkpointed) = try SQLiteConnection.checkpointPassive(db)
      // (0, 0): the checkpointer is copying right now; the next commit tries again.
      guard log > 0 else { return }
      lock.withLock {
        byWriter += 1
        copiedByWriter += max(checkpointed - before, 0)
        backfilled = checkpointed
        lastError = nil
      }
    } catch {
      lock.withLock { lastError = "the writer's checkpoint failed: \(error)" }
    }
  }

  /// On the checkpointer's thread.
  private func checkpoint() {
    gate.lock()
    while held { gate.wait() }
    gate.unlock()
    do {
      let before = lock.withLock { backfilled }
      let (log, checkpointed) = try connection.checkpointPassive()
      lock.withLock {
        scheduled = false
        lastError = nil
        // (0, 0): the writer was checkpointing, or the log was empty.
        guard log > 0 else { return }
        byCheckpointer += 1
        // What it copied; if the log started over meanwhile (the writer ended a checkpoint), all of the new one's.
        copiedByCheckpointer += checkpointed >= before ? checkpointed - before : checkpointed
        backfilled = checkpointed
      }
    } catch {
      lock.withLock {
        scheduled = false
        lastError = "\(error)"
      }
    }
  }

  // MARK: Counters (any thread)

  /// Checkpoints run by the checkpointer's thread.
  public var checkpointsByCheckpointer: Int { lock.withLock { byCheckpointer } }
  /// Checkpoints the writer ran itself: the last few pages of a log the checkpointer copied (so that it starts
  /// over), or all of it once the log passed `writerPages`.
  public var checkpointsByWriter: Int { lock.withLock { byWriter } }
  /// WAL pages the checkpointer copied into the database file so far.
  public var pagesCopiedByCheckpointer: Int { lock.withLock { copiedByCheckpointer } }
  /// WAL pages the writer copied into the database file so far.
  public var pagesCopiedByWriter: Int { lock.withLock { copiedByWriter } }
  /// Whether the checkpointer is neither woken nor copying (tests wait for it).
  var isIdle: Bool { lock.withLock { !scheduled } }
  /// Why the last checkpoint failed, if it did; nil once one succeeds.
  public var lastFailure: String? { lock.withLock { lastError } }

  // MARK: Tests

  /// Holds the checkpointer's thread before its next checkpoint until `release`.
  func hold() {
    gate.lock()
    held = true
    gate.unlock()
  }

  func release() {
    gate.lock()
    held = false
    gate.broadcast()
    gate.unlock()
  }

  /// Stops waking the thread, lets a checkpoint under way finish, joins the thread and closes the connection.
  /// Call after the writer's connection is closed or its thread joined. Idempotent.
  public func shutdown() {
    let first = lock.withLock {
      defer { stopped = true }
      return !stopped
    }
    release()
    worker.shutdown()
    if first { connection.close() }
  }

  deinit {
    shutdown()
  }
}
