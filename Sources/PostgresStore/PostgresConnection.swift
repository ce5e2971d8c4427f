import CLibPQ
import StoreInterface

/// One connection to a PostgreSQL database through libpq, behind the store interface.
///
/// Threading: used by one thread at a time, the store thread that owns it (the broker's writer thread, or one
/// reader thread). Every call is libpq's blocking API: the thread waits for the server's answer. That is why a
/// connection lives on a store thread and never on a loop thread (docs/architecture.md, "The store").
///
/// Statements are prepared once per connection and SQL text (`PQprepare`, named `s1`, `s2`, ...), after
/// `PostgresSQL.translate`. Values travel as text, but blobs and texts as their raw bytes (binary format:
/// `bytea` without escaping, and a text with a NUL is refused by the server rather than cut short).
///
/// A lost connection: the call that finds it throws `PostgresUnavailable` (the open transaction, if any, is
/// gone, uncommitted). The next transaction (`beginGroup`, `transaction`) or statement outside one connects
/// again, preparing statements afresh; while the server is unreachable each of those throws
/// `PostgresUnavailable` in turn, after at most `connect_timeout` (10 s unless the URL sets it).
public final class PostgresConnection: StoreConnection, @unchecked Sendable {
  private var connection: OpaquePointer?
  /// The connection string or URL (`postgres://USER@HOST:PORT/DB`).
  public let url: String
  private var statements: [String: PostgresStatement] = [:]
  private var nextStatement = 0
  /// Incremented at every (re)connection: a statement prepared in an earlier session prepares again.
  private(set) var session = 0
  public private(set) var changes = 0
  public private(set) var totalChanges = 0
  /// Whether the open transaction took a batch lock (`lockForBatch`); false at every BEGIN.
  private var holdsBatchLock = false

  public var engine: StoreEngine { .postgres }

  /// Connects to `url`. Throws `PostgresUnavailable` when the server cannot be reached or refuses.
  public init(url: String) throws {
    self.url = Self.withConnectTimeout(url)
    try connect()
  }

  deinit { close() }

  /// libpq waits for a connection without end unless told: 10 s unless the URL says otherwise.
  private static func withConnectTimeout(_ url: String) -> String {
    if url.contains("connect_timeout") { return url }
    if url.hasPrefix("postgres://") || url.hasPrefix("postgresql://") {
      return url + (url.contains("?") ? "&" : "?") + "connect_timeout=10"
    }
    return url + " connect_timeout=10"
  }

  private func connect() throws {
    let handle = PQconnectdb(url)
    guard let handle, PQstatus(handle) == CONNECTION_OK else {
      let message = handle.map { String(cString: PQerrorMessage($0)) } ?? "out of memory"
      PQfinish(handle)
      throw PostgresUnavailable(Self.trimmed(message))
    }
    connection = handle
    session += 1
    statements = [:]
    // Stated, not assumed from the server's defaults: UTF-8 text, a commit waits for its WAL to be flushed; and
    // no NOTICE on stderr (libpq prints them there: "relation ... already exists, skipping" at every start).
    let setup = PQexec(
      handle, "SET client_encoding = 'UTF8'; SET synchronous_commit = on; SET client_min_messages = warning")
    defer { PQclear(setup) }
    guard PQresultStatus(setup) == PGRES_COMMAND_OK else {
      throw PostgresUnavailable(Self.trimmed(String(cString: PQerrorMessage(handle))))
    }
  }

  /// Connects again if the connection was lost (or never made), outside a transaction.
  func ensureConnected() throws {
    if let connection, PQstatus(connection) == CONNECTION_OK { return }
    if let connection { PQfinish(connection) }
    connection = nil
    try connect()
  }

  /// The live handle for a statement: outside a transaction a lost connection is made again first.
  func handle(for sql: String?) throws -> OpaquePointer {
    if !isInTransaction { try ensureConnected() }
    guard let connection, PQstatus(connection) == CONNECTION_OK else {
      throw PostgresUnavailable("the connection was lost")
    }
    return connection
  }

  /// The connection's socket (`PQsocket`), -1 without one: for a test that breaks the connection under libpq.
  public var socket: Int32 { connection.map { PQsocket($0) } ?? -1 }

  public func close() {
    statements = [:]
    if let connection { PQfinish(connection) }
    connection = nil
  }

  static func trimmed(_ message: String) -> String {
    var text = message
    while let last = text.last, last.isWhitespace { text.removeLast() }
    return text
  }

  /// The error of a failed `result` (not cleared): `PostgresUnavailable` when the connection is gone or the
  /// server is shutting down (SQLSTATE classes 08 and 57P), or the transaction was chosen to roll back (class 40:
  /// a deadlock, a serialization failure), else `PostgresError`.
  func error(of result: OpaquePointer?, sql: String?) -> any Error {
    let message: String
    var state = ""
    if let result {
      message = Self.trimmed(String(cString: PQresultErrorMessage(result)))
      if let field = PQresultErrorField(result, Int32(UInt8(ascii: "C"))) { state = String(cString: field) }
    } else {
      message = connection.map { Self.trimmed(String(cString: PQerrorMessage($0))) } ?? "no connection"
    }
    let lost = connection.map { PQstatus($0) != CONNECTION_OK } ?? true
    // No SQLSTATE: libpq's own error, not the server's (every server error carries one): the connection broke
    // under the call ("server closed the connection unexpectedly" when a server stopped at once closed it
    // without a word), which libpq may report before it marks the connection bad.
    if lost || state.isEmpty || state.hasPrefix("08") || state.hasPrefix("57P") {
      return PostgresUnavailable(message)
    }
    // Class 40 (a deadlock victim, a serialization failure): the statement's work was undone and the same batch
    // may succeed if sent again, so the client is told to retry (503), not that the batch is bad (500).
    if state.hasPrefix("40") { return PostgresUnavailable("transaction rolled back, send again: \(message)") }
    return PostgresError(sqlState: state, message: message, sql: sql)
  }

  /// Counts a command's changed rows (INSERT, UPDATE, DELETE only: SELECT counts are not changes).
  func count(_ result: OpaquePointer) {
    let status = String(cString: PQcmdStatus(result))
    guard status.hasPrefix("INSERT") || status.hasPrefix("UPDATE") || status.hasPrefix("DELETE") else {
      changes = 0
      return
    }
    changes = Int(String(cString: PQcmdTuples(result))) ?? 0
    totalChanges += changes
  }

  /// A name for the next prepared statement.
  func nextStatementName() -> String {
    nextStatement += 1
    return "s\(nextStatement)"
  }

  // MARK: StoreConnection

  public func execute(_ sql: String) throws {
    let handle = try handle(for: sql)
    // Translated too (a script has no parameters, but may count bytes with CAST(... AS BLOB)).
    let result = PQexec(handle, PostgresSQL.translate(sql).sql)
    defer { PQclear(result) }
    let status = PQresultStatus(result)
    guard status == PGRES_COMMAND_OK || status == PGRES_TUPLES_OK else { throw error(of: result, sql: sql) }
    if let result { count(result) }
  }

  public func execute(_ sql: String, _ bindings: [SQLValue]) throws {
    let statement = try self.statement(sql)
    try statement.bind(bindings)
    defer { statement.reset() }
    while try statement.step() {}
  }

  public func query(_ sql: String, _ bindings: [SQLValue]) throws -> [[SQLValue]] {
    let statement = try cached(sql)
    try statement.bind(bindings)
    statement.isIterating = true
    defer {
      statement.isIterating = false
      statement.reset()
    }
    var rows: [[SQLValue]] = []
    while try statement.step() {
      let columns = statement.columnCount
      var row: [SQLValue] = []
      row.reserveCapacity(columns)
      for index in 0..<columns { row.append(statement.column(index)) }
      rows.append(row)
    }
    return rows
  }

  public func statement(_ sql: String) throws -> any StoreStatement { try cached(sql) }

  private func cached(_ sql: String) throws -> PostgresStatement {
    if let statement = statements[sql] {
      if statement.isIterating { return PostgresStatement(connection: self, sql: sql) }
      statement.reset()
      return statement
    }
    let statement = PostgresStatement(connection: self, sql: sql)
    statements[sql] = statement
    return statement
  }

  public var isInTransaction: Bool {
    guard let connection else { return false }
    let status = PQtransactionStatus(connection)
    return status == PQTRANS_INTRANS || status == PQTRANS_INERROR || status == PQTRANS_ACTIVE
  }

  public func beginGroup() throws { try begin("BEGIN") }

  /// Opens a transaction. A connection that died while idle (a server restart, a cut) is only found out when
  /// used: if BEGIN finds it lost, nothing has run on it yet, so it is made again and BEGIN tried once more.
  private func begin(_ sql: String) throws {
    holdsBatchLock = false
    try ensureConnected()
    do {
      try execute(sql)
    } catch is PostgresUnavailable {
      if let connection { PQfinish(connection) }
      connection = nil
      try connect()
      try execute(sql)
    }
  }

  public func commitGroup() throws {
    let handle = try handle(for: "COMMIT")
    let result = PQexec(handle, "COMMIT")
    defer { PQclear(result) }
    guard PQresultStatus(result) == PGRES_COMMAND_OK else { throw error(of: result, sql: "COMMIT") }
    // COMMIT of a transaction in error rolls it back and says so only in its command tag.
    if String(cString: PQcmdStatus(result)) != "COMMIT" {
      throw PostgresError(
        sqlState: "", message: "the transaction was rolled back, not committed", sql: "COMMIT")
    }
  }

  public func rollbackIfOpen() {
    guard isInTransaction, let connection else { return }
    PQclear(PQexec(connection, "ROLLBACK"))
  }

  public func transaction<R>(writing: Bool, _ body: () throws -> R) throws -> R {
    // A read inside a reader's transaction (the reader pool opens one per read) shares it.
    if isInTransaction { return try body() }
    // A read sees one snapshot of the store for all its queries, as an SQLite read transaction does.
    try begin(writing ? "BEGIN" : "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
    let result: R
    do {
      result = try body()
    } catch {
      rollbackIfOpen()
      throw error
    }
    do {
      try commitGroup()
    } catch {
      rollbackIfOpen()
      throw error
    }
    return result
  }

  public func lockForBatch(workspace: String, client: String) throws {
    // A workspace's key hashes with seed 0, a client's with seed 1: a workspace and a client of the same name
    // are different locks.
    if holdsBatchLock {
      // Waiting while holding a lock could close a cycle with another broker's group: only try, both.
      let rows = try query(
        "SELECT pg_try_advisory_xact_lock(hashtextextended(?, 0)), pg_try_advisory_xact_lock(hashtextextended(?, 1))",
        [.text(workspace), .text(client)])
      guard rows.first == [.integer(1), .integer(1)] else { throw StoreGroupMustEnd() }
    } else {
      // Holding none, waiting for the workspace cannot close a cycle; holding it, waiting for the client cannot
      // either: whoever holds the client's lock holds all it waits for (a first batch waits in this order, a
      // later one never), and no other transaction waits for this workspace's rows without its lock.
      try execute("SELECT pg_advisory_xact_lock(hashtextextended(?, 0))", [.text(workspace)])
      holdsBatchLock = true
      try execute("SELECT pg_advisory_xact_lock(hashtextextended(?, 1))", [.text(client)])
    }
  }

  public func savepoint<R>(_ name: String, _ body: () throws -> R) throws -> R {
    let quoted = "\"" + name.replacingOccurrences("\"", "\"\"") + "\""
    try execute("SAVEPOINT \(quoted)")
    let result: R
    do {
      result = try body()
    } catch {
      // A statement that failed put the transaction in error: only ROLLBACK TO makes it usable again.
      if isInTransaction, let connection {
        PQclear(PQexec(connection, "ROLLBACK TO SAVEPOINT \(quoted)"))
        PQclear(PQexec(connection, "RELEASE SAVEPOINT \(quoted)"))
      }
      throw error
    }
    try execute("RELEASE SAVEPOINT \(quoted)")
    return result
  }
}

extension String {
  fileprivate func replacingOccurrences(_ target: Character, _ replacement: String) -> String {
    var out = ""
    for character in self { if character == target { out += replacement } else { out.append(character) } }
    return out
  }
}
