import CSQLite
import EventLoop

#if canImport(Glibc)
  import Glibc
#endif

/// A TEST HOOK, for the fault-injection suite only: kill -9 of this very process at the n-th time it reaches a
/// labelled point of its write paths, so crashes land exactly inside commits (docs/architecture.md, "Testing").
///
/// Armed only by the environment variable `PAGESYNC_TEST_CRASH_AT=LABEL:N` (N ≥ 1), read once by
/// `armFromEnvironment()` when the broker or the daemon starts, before any other thread runs. There is no
/// configuration key for it and none can be added by a file: a config file cannot crash a process. Unset, every
/// point costs one load of a cached Bool and one branch.
///
/// The labels (each counts on its own, from process start):
/// - `write`: before the n-th write statement (INSERT, UPDATE, DELETE, ...: `sqlite3_stmt_readonly` false) any
///   connection of the process steps through `SQLiteStatement` (not `execute(_:)` scripts: schema and pragmas):
///   "after n-1 statements", usually inside a transaction;
/// - `begin`, `commit`, `committed`: before BEGIN, before COMMIT, after COMMIT returned (before the answer or
///   completion leaves) of a writing transaction: `SQLiteConnection.transaction` (not `.deferred`, the reads) and
///   `SQLiteWriter`'s group commit;
/// - labels its callers name (`LocalStore`: `edit`, `acknowledge`, `delta`, half-way inside those transactions).
///
/// At the point the process writes one line to stderr (`pagesync test crash point: LABEL #N reached, in a
/// transaction: yes|no`), then raises SIGKILL: no cleanup, no atexit, as `kill -9`.
///
/// Debug builds only (the tests and the fault suite run them): in a release build, such as `make install`
/// makes, every point is empty and setting the variable is an error that says the build has no test hooks.
public enum TestCrashPoint {
  /// The environment variable that arms the hook.
  public static let environmentVariable = "PAGESYNC_TEST_CRASH_AT"

  // Written once by `armFromEnvironment`, before other threads start; read-only afterwards.
  nonisolated(unsafe) private static var armed = false
  nonisolated(unsafe) private static var armedLabel = ""
  nonisolated(unsafe) private static var target = 0
  private static let lock = Lock()
  nonisolated(unsafe) private static var reached = 0

  /// Whether a crash point is armed: the one branch every point costs when it is not.
  @inline(__always) public static var isArmed: Bool { compiledIn && armed }

  /// Reads `PAGESYNC_TEST_CRASH_AT` and arms the hook. Returns what it armed (`LABEL:N`) to log, nil when the
  /// variable is unset or empty; throws a message when it is malformed. Call once, at start-up, before threads.
  @discardableResult
  public static func armFromEnvironment() throws(TestCrashPointError) -> String? {
    guard let raw = getenv(environmentVariable), raw.pointee != 0 else { return nil }
    let spec = String(cString: raw)
    guard compiledIn else {
      throw TestCrashPointError(spec: spec, problem: "this is a release build: it has no test hooks")
    }
    guard let (label, count) = parse(spec) else { throw TestCrashPointError(spec: spec) }
    armedLabel = label
    target = count
    reached = 0
    armed = true
    return "\(label):\(count)"
  }

  /// `LABEL:N` with a non-empty label and N ≥ 1, or nil.
  public static func parse(_ spec: String) -> (label: String, count: Int)? {
    guard let colon = spec.lastIndex(of: ":") else { return nil }
    let label = String(spec[..<colon])
    guard !label.isEmpty, let count = Int(spec[spec.index(after: colon)...]), count >= 1 else { return nil }
    return (label, count)
  }

  #if DEBUG
    static let compiledIn = true
  #else
    static let compiledIn = false
  #endif

  /// A labelled point: crashes here if it is the armed label's n-th arrival.
  @inline(__always) public static func reach(_ label: StaticString, inTransaction: Bool) {
    #if DEBUG
      guard armed else { return }
      arrive(label.description, inTransaction: inTransaction)
    #endif
  }

  /// Called by `SQLiteStatement.step` when armed: counts the first step of each write statement as `write`.
  static func stepping(_ statement: OpaquePointer) {
    guard compiledIn, armedLabel == "write", sqlite3_stmt_busy(statement) == 0,
      sqlite3_stmt_readonly(statement) == 0
    else {
      return
    }
    let inTransaction = sqlite3_get_autocommit(sqlite3_db_handle(statement)) == 0
    arrive("write", inTransaction: inTransaction)
  }

  private static func arrive(_ label: String, inTransaction: Bool) {
    guard label == armedLabel else { return }
    let hit = lock.withLock {
      reached += 1
      return reached == target
    }
    guard hit else { return }
    let line =
      "pagesync test crash point: \(label) #\(target) reached, in a transaction: "
      + (inTransaction ? "yes" : "no") + "\n"
    var bytes = Array(line.utf8)
    _ = bytes.withUnsafeMutableBytes { write(2, $0.baseAddress, $0.count) }
    raise(SIGKILL)
    _exit(137)  // SIGKILL cannot be caught; this is never reached
  }
}

/// `PAGESYNC_TEST_CRASH_AT` is set but is not `LABEL:N`.
public struct TestCrashPointError: Error, CustomStringConvertible {
  public var spec: String
  public var problem = "expected LABEL:N with N >= 1"
  public var description: String {
    "\(TestCrashPoint.environmentVariable)=\(spec): \(problem) (a test hook; unset it)"
  }
}
