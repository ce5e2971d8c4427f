// StoreInterface: what the broker's page store needs of an SQL engine, so that one `PageStore` runs on SQLite
// (the embedded default) and on PostgreSQL (several brokers on one store). Statements with positional
// bindings (`?`, `?NNN`), stepping and columns, scripts, transactions and savepoints, change counts. The SQL
// itself is written once, in the dialect both engines accept; what still differs is translated by the
// PostgreSQL connection when it prepares a statement (`?` → `$n`, `CAST(x AS BLOB)` → `convert_to(x, 'UTF8')`),
// and the schema has one migration list per engine (`StoreEngine`).
//
// Threading: a connection and its statements are used by one thread at a time (the broker's writer thread, or
// one reader thread each). Every call blocks that thread until the engine answered: never call one on a loop
// thread.

/// Which engine a connection talks to: where the schema or SQL must differ.
public enum StoreEngine: String, Sendable {
  case sqlite
  case postgres
}

/// A prepared statement of one `StoreConnection`: `bind` (which resets), `step` until it returns false, `reset`.
///
/// The column accessors read the current row (after a `step` that returned true).
public protocol StoreStatement: AnyObject {
  /// Binds `values` by position after resetting the statement; a count other than the statement's parameters
  /// is an error.
  func bind(_ values: [SQLValue]) throws
  /// Binds the statement's one parameter to `text`, after resetting it.
  func bind(text: String) throws
  /// Runs to the next row: true when a row is available, false when done.
  func step() throws -> Bool
  /// Rewinds the statement so that it can run again.
  func reset()
  /// Steps through every row, calling `body` on each, then resets.
  func eachRow(_ body: (any StoreStatement) throws -> Void) throws
  /// Column `index` of the current row as stored.
  func column(_ index: Int) -> SQLValue
  /// Column `index` as an integer (NULL is 0).
  func int64(_ index: Int) -> Int64
  /// Column `index` as a double (NULL is 0.0).
  func double(_ index: Int) -> Double
  /// Column `index` as text, nil when NULL.
  func string(_ index: Int) -> String?
  /// Column `index` as bytes, nil when NULL.
  func blob(_ index: Int) -> [UInt8]?
  /// Whether column `index` is NULL.
  func isNull(_ index: Int) -> Bool
  /// Calls `body` with column `index`'s UTF-8 bytes, valid only during the call; nil when NULL.
  func withText<R>(_ index: Int, _ body: (UnsafeBufferPointer<UInt8>) throws -> R) rethrows -> R?
}

/// One connection to the store's database. See the file's header for threading.
public protocol StoreConnection: AnyObject {
  /// The engine behind it.
  var engine: StoreEngine { get }
  /// Runs every statement in `sql` (no bindings), discarding rows: schema scripts.
  func execute(_ sql: String) throws
  /// Runs one statement with `bindings`, discarding rows. Prepared once per connection and SQL text.
  func execute(_ sql: String, _ bindings: [SQLValue]) throws
  /// Runs one statement with `bindings` and returns its rows. Prepared once per connection and SQL text.
  func query(_ sql: String, _ bindings: [SQLValue]) throws -> [[SQLValue]]
  /// The statement for `sql`, prepared on first use and kept for the connection's life, reset. While it is
  /// inside `eachRow` (or a `query`), a fresh one is returned instead, so nested use of one SQL is safe.
  func statement(_ sql: String) throws -> any StoreStatement
  /// Rows changed by the last INSERT, UPDATE or DELETE.
  var changes: Int { get }
  /// Rows changed by every INSERT, UPDATE and DELETE since the connection opened: equal before and after some
  /// work means the work wrote nothing.
  var totalChanges: Int { get }
  /// Whether a transaction is open.
  var isInTransaction: Bool { get }
  /// Opens the writer's group transaction (SQLite: BEGIN IMMEDIATE, the write lock at once). A connection that
  /// was lost is opened again first.
  func beginGroup() throws
  /// Commits the group transaction.
  func commitGroup() throws
  /// Rolls an open transaction back; errors are swallowed (the caller reports the original one).
  func rollbackIfOpen()
  /// Runs `body` in a transaction: COMMIT when it returns, ROLLBACK when it throws. `writing: false` is a read
  /// transaction (one consistent snapshot for several queries).
  func transaction<R>(writing: Bool, _ body: () throws -> R) throws -> R
  /// Runs `body` inside SAVEPOINT `name`: released when it returns, rolled back to when it throws (only `body`'s
  /// changes are undone). Inside a transaction.
  func savepoint<R>(_ name: String, _ body: () throws -> R) throws -> R
  /// Closes the connection; idempotent.
  func close()
  /// Takes the locks that serialise batches of `workspace` and of `client` until the transaction ends, before a
  /// batch applies (docs/architecture.md, "Time across brokers"): every row a batch writes is its workspace's
  /// (pages, blocks, the change log) or its client's (`client`, `rejection`, `mutation_digest`), so no batch
  /// waits on a row lock that another holds without holding these. SQLite: nothing (its one writer holds the
  /// database's write lock). PostgreSQL: a transaction holding no such lock yet waits for them, the workspace's
  /// first; one that holds some only tries, and throws `StoreGroupMustEnd` when another transaction has one, so
  /// that two brokers' groups never wait for each other in a cycle.
  func lockForBatch(workspace: String, client: String) throws
  /// Frees what the engine can of this connection's memory while keeping it open: SQLite's page cache pages not in
  /// use (read again from the file, through the OS's cache, when next needed). PostgreSQL: nothing (the default).
  /// On the thread that uses the connection.
  func releaseMemory()
}

/// The writer's group must commit before this job can run: the job, rolled back to its savepoint, runs first in
/// the next transaction (`StoreConnection.lockForBatch`).
public struct StoreGroupMustEnd: Error, CustomStringConvertible {
  public init() {}
  public var description: String { "the batch's workspace is locked by another transaction: next group" }
}

/// Code whose jobs run on the writer and keep some of their writes for the end of the group, written once for
/// all its jobs (`PageStore`: the store's sequence, each client's row). The writer calls it on its thread:
/// `jobEnded` after each job's savepoint (`kept`: released, so the job's deferred writes join the group's; or
/// rolled back, so they are forgotten with its other changes), `groupWillCommit` inside the transaction after
/// its last job and before COMMIT (a throw fails the whole group, as a failed COMMIT does), and `groupEnded` once
/// the transaction is over, saying whether it committed (what the jobs wrote is then the store's; otherwise none
/// of it is).
public protocol StoreGroupObserver: AnyObject {
  func jobEnded(kept: Bool)
  func groupWillCommit() throws
  func groupEnded(committed: Bool)
}

extension StoreConnection {
  /// `query(sql, [])`.
  public func query(_ sql: String) throws -> [[SQLValue]] { try query(sql, []) }

  public func releaseMemory() {}
}

/// An error that means the store could not be reached (a lost PostgreSQL connection, a server shutting down):
/// nothing was committed, and the same request may succeed later. The broker answers 503.
public protocol StoreUnavailableError: Error {}
