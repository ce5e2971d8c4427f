import CSQLite
import EventLoopTestKit
import SQLiteStore
import Testing

#if canImport(Glibc)
  import Glibc
#endif

@Suite struct SQLiteConnectionTests {
  /// The statement cache tells apart texts whose hashed bytes (length, start, middle, end) are all alike, and
  /// keeps every statement as it grows: each of 300 texts differing only at bytes 20 to 22 answers its own value,
  /// the second time too (from the cache).
  @Test func theStatementCacheKeepsTextsThatHashAlikeApart() throws {
    let connection = try SQLiteConnection(path: ":memory:")
    defer { connection.close() }
    func text(_ number: Int) -> String {
      "SELECT '" + String(repeating: "a", count: 12) + format3(number) + String(repeating: "b", count: 60)
        + "' AS v"
    }
    #expect(text(1).count == text(299).count)
    for round in 0..<2 {
      for number in 0..<300 {
        let rows = try connection.query(text(number))
        guard case .text(let value)? = rows.first?.first else {
          Issue.record("no answer for \(number) in round \(round)")
          return
        }
        #expect(value.dropFirst(12).prefix(3) == format3(number)[...], "round \(round)")
      }
    }
  }

  /// SQLite keeps no memory statistics (with them, each of its allocations takes a process-wide mutex): its
  /// count of memory in use stays 0 however much a connection allocates.
  @Test func sqliteKeepsNoMemoryStatistics() throws {
    let connection = try SQLiteConnection(path: ":memory:")
    defer { connection.close() }
    try connection.execute("CREATE TABLE t (x)")
    try connection.execute("INSERT INTO t VALUES (randomblob(100000))")
    #expect(sqlite3_memory_used() == 0)
  }

  static let everyKindOfValue: [SQLiteValue] = [
    .null,
    .integer(0),
    .integer(Int64.min),
    .integer(Int64.max),
    .integer(-1),
    .real(3.25),
    .real(-1e300),
    .text(""),
    .text("plain"),
    .text("nul\u{0}inside\u{0}"),
    .text("non-ASCII: é ü ✓ 日本語 🙂"),
    .blob([]),
    .blob([0, 1, 2, 0, 255, 128]),
    .blob(Array(repeating: 0xAB, count: 100_000)),
  ]

  @Test func everyValueTypeRoundTrips() throws {
    let db = TemporaryDatabase()
    defer { db.remove() }
    let connection = try db.open()
    // No declared type: no affinity, every value is stored in its own class.
    try connection.execute("CREATE TABLE t(v)")
    for value in Self.everyKindOfValue {
      try connection.execute("INSERT INTO t(v) VALUES (?)", [value])
    }
    let rows = try connection.query("SELECT v, typeof(v), length(CAST(v AS BLOB)) FROM t ORDER BY rowid")
    #expect(rows.map { $0[0] } == Self.everyKindOfValue)
    // What SQLite stored, not only what we read back: empty text and blob are not NULL, NULs are counted.
    #expect(rows[7][1] == .text("text"))
    #expect(rows[9][2] == .integer(11))
    #expect(rows[11][1] == .text("blob"))
    #expect(rows[12][2] == .integer(6))

    // The typed accessors agree.
    let statement = try connection.prepare("SELECT v FROM t ORDER BY rowid")
    var read: [SQLiteValue] = []
    try statement.forEachRow { row in
      if row.isNull(0) {
        #expect(row.string(0) == nil && row.blob(0) == nil)
        read.append(.null)
      } else if case .integer(let value) = row.column(0) {
        #expect(row.int64(0) == value)
        read.append(.integer(row.int64(0)))
      } else if case .real = row.column(0) {
        read.append(.real(row.double(0)))
      } else if case .text = row.column(0) {
        read.append(.text(row.string(0)!))
      } else {
        read.append(.blob(row.blob(0)!))
      }
    }
    #expect(read == Self.everyKindOfValue)
  }

  @Test func textWithNULsIsComparedWhole() throws {
    let connection = try SQLiteConnection(path: ":memory:")
    // Bound with its length, the text is three bytes; bound as a C string it would be "a".
    let rows = try connection.query(
      "SELECT ? = 'a', length(CAST(? AS BLOB))", [.text("a\u{0}b"), .text("a\u{0}b")])
    #expect(rows == [[.integer(0), .integer(3)]])
  }

  /// `bind(text:)`, the one-parameter bind of per-id lookups: it rewinds a statement stepped before, binds the
  /// whole text (NULs and all), and refuses a statement that does not have exactly one parameter.
  @Test func bindTextRewindsBindsWholeAndRefusesOtherParameterCounts() throws {
    let connection = try SQLiteConnection(path: ":memory:")
    let statement = try connection.prepare("SELECT length(CAST(? AS BLOB)), ? IS NULL")
    #expect(throws: SQLiteError.self) { try statement.bind(text: "a") }
    let one = try connection.prepare("SELECT length(CAST(?1 AS BLOB)), ?1 = 'a'")
    try one.bind(text: "a\u{0}b")
    #expect(try one.step())
    #expect(one.int64(0) == 3 && one.int64(1) == 0)
    try one.bind(text: "a")
    #expect(try one.step())
    #expect(one.int64(0) == 1 && one.int64(1) == 1)
    // The same statement, bound again mid-iteration: rewound, not stepped past its one row.
    try one.bind(text: "bc")
    #expect(try one.step())
    #expect(one.int64(0) == 2)
    #expect(try !one.step())
  }

  @Test func cachedStatementsArePreparedOnceAndResetBeforeReuse() throws {
    let connection = try SQLiteConnection(path: ":memory:")
    try connection.execute("CREATE TABLE t(id INTEGER PRIMARY KEY); INSERT INTO t VALUES (1), (2), (3)")
    let sql = "SELECT id FROM t WHERE id >= ? ORDER BY id"
    let first = try connection.cachedStatement(sql)
    try first.bind([.integer(2)])
    #expect(try first.step())
    #expect(first.int64(0) == 2)

    // Same object, rewound, bindings cleared (NULL matches nothing).
    let again = try connection.cachedStatement(sql)
    #expect(again === first)
    #expect(try !again.step())
    try again.bind([.integer(1)])
    var ids: [Int64] = []
    try again.forEachRow { ids.append($0.int64(0)) }
    #expect(ids == [1, 2, 3])

    // query and execute go through the same cache.
    _ = try connection.query(sql, [.integer(3)])
    #expect(try connection.cachedStatement(sql) === first)
    #expect(try connection.prepare(sql) !== first)
  }

  @Test func nestedUseOfTheSameCachedSQLDoesNotDisturbTheOuterIteration() throws {
    let connection = try SQLiteConnection(path: ":memory:")
    try connection.execute("CREATE TABLE t(id INTEGER PRIMARY KEY); INSERT INTO t VALUES (1), (2), (3)")
    let sql = "SELECT id FROM t WHERE id >= ? ORDER BY id"
    let outer = try connection.cachedStatement(sql)
    try outer.bind([.integer(1)])
    var pairs: [[Int64]] = []
    try outer.forEachRow { row in
      // Were the outer statement reset by the inner query, it would start over for ever.
      if pairs.count == 3 { throw TestJobError.failed(pairs.count) }
      let id = row.int64(0)
      let inner = try connection.query(sql, [.integer(id)]).map { row -> Int64 in
        guard case .integer(let value) = row[0] else { return -1 }
        return value
      }
      pairs.append([id] + inner)
    }
    #expect(pairs == [[1, 1, 2, 3], [2, 2, 3], [3, 3]])
  }

  @Test func aUniqueViolationCarriesItsCodesMessageAndSQL() throws {
    let connection = try SQLiteConnection(path: ":memory:")
    try connection.execute("CREATE TABLE page(id TEXT UNIQUE)")
    let insert = "INSERT INTO page(id) VALUES (?)"
    try connection.execute(insert, [.text("a")])
    let error = #expect(throws: SQLiteError.self) { try connection.execute(insert, [.text("a")]) }
    #expect(error?.code == SQLiteError.Code.constraint)
    #expect(error?.code == 19)
    #expect(error?.extendedCode == SQLiteError.ExtendedCode.constraintUnique)
    #expect(error?.extendedCode == 2067)
    #expect(error?.message == "UNIQUE constraint failed: page.id")
    #expect(error?.sql == insert)
    let description = error?.description ?? ""
    for part in ["19", "2067", "UNIQUE constraint failed: page.id", insert] {
      #expect(description.contains(part), "\(description) lacks \(part)")
    }
  }

  @Test func aSyntaxErrorCarriesCodeOneAndTheSQL() throws {
    let connection = try SQLiteConnection(path: ":memory:")
    let error = #expect(throws: SQLiteError.self) { _ = try connection.query("SELEC 1") }
    #expect(error?.code == 1)
    #expect(error?.extendedCode == 1)
    #expect(error?.message.contains("syntax error") == true)
    #expect(error?.sql == "SELEC 1")

    // In a script, the error names the statement that failed.
    let script = #expect(throws: SQLiteError.self) {
      try connection.execute("CREATE TABLE t(x); INSERT INTO nowhere VALUES (1)")
    }
    #expect(script?.message == "no such table: nowhere")
    #expect(script?.sql == "CREATE TABLE t(x); INSERT INTO nowhere VALUES (1)")
    let stepError = #expect(throws: SQLiteError.self) {
      try connection.execute("INSERT INTO t VALUES (1); INSERT INTO t VALUES (1, 2)")
    }
    #expect(stepError?.message.contains("1 columns but 2 values") == true)
  }

  @Test func misuseIsReportedNotIgnored() throws {
    let connection = try SQLiteConnection(path: ":memory:")
    try connection.execute("CREATE TABLE t(a, b)")
    let wrongCount = #expect(throws: SQLiteError.self) {
      try connection.execute("INSERT INTO t VALUES (?, ?)", [.integer(1)])
    }
    #expect(wrongCount?.code == SQLiteError.Code.range)
    let twoStatements = #expect(throws: SQLiteError.self) {
      try connection.execute("INSERT INTO t VALUES (1, 2); DELETE FROM t", [])
    }
    #expect(twoStatements?.code == SQLiteError.Code.misuse)
    #expect(try connection.query("SELECT count(*) FROM t") == [[.integer(0)]])
    // A trailing semicolon and comment are not a second statement.
    try connection.execute("INSERT INTO t VALUES (1, 2); -- done", [])
    #expect(try connection.query("SELECT count(*) FROM t") == [[.integer(1)]])
  }

  @Test func aTransactionThatThrowsLeavesNothingAndRethrows() throws {
    let connection = try SQLiteConnection(path: ":memory:")
    try connection.execute("CREATE TABLE t(x)")
    let error = #expect(throws: TestJobError.self) {
      try connection.transaction {
        try connection.execute("INSERT INTO t VALUES (?)", [.integer(1)])
        try connection.execute("INSERT INTO t VALUES (?)", [.integer(2)])
        #expect(connection.isInTransaction)
        throw TestJobError.failed(7)
      }
    }
    #expect(error == .failed(7))
    #expect(!connection.isInTransaction)
    #expect(try connection.query("SELECT count(*) FROM t") == [[.integer(0)]])

    let value = try connection.transaction(.deferred) { () throws -> Int64 in
      try connection.execute("INSERT INTO t VALUES (?)", [.integer(3)])
      return connection.lastInsertRowID
    }
    #expect(value == 1)
    #expect(!connection.isInTransaction)
    #expect(try connection.query("SELECT x FROM t") == [[.integer(3)]])
  }

  @Test func aSavepointRollsBackOnlyItselfInsideACommittedTransaction() throws {
    let connection = try SQLiteConnection(path: ":memory:")
    try connection.execute("CREATE TABLE t(x)")
    try connection.transaction {
      try connection.execute("INSERT INTO t VALUES (1)", [])
      #expect(throws: TestJobError.failed(2)) {
        try connection.savepoint("inner \"quoted\" name") {
          try connection.execute("INSERT INTO t VALUES (2)", [])
          try connection.savepoint("innermost") { try connection.execute("INSERT INTO t VALUES (22)", []) }
          throw TestJobError.failed(2)
        }
      }
      #expect(connection.isInTransaction)
      try connection.savepoint("kept") { try connection.execute("INSERT INTO t VALUES (3)", []) }
    }
    #expect(try connection.query("SELECT x FROM t ORDER BY x") == [[.integer(1)], [.integer(3)]])

    // Outside a transaction a savepoint is one.
    #expect(throws: TestJobError.self) {
      try connection.savepoint("alone") {
        try connection.execute("INSERT INTO t VALUES (4)", [])
        throw TestJobError.failed(4)
      }
    }
    #expect(!connection.isInTransaction)
    try connection.savepoint("alone") { try connection.execute("INSERT INTO t VALUES (5)", []) }
    #expect(!connection.isInTransaction)
    #expect(
      try connection.query("SELECT x FROM t ORDER BY x") == [[.integer(1)], [.integer(3)], [.integer(5)]])
  }

  @Test func aFailingCommitRollsBackAndThrowsTheCommitError() throws {
    let connection = try SQLiteConnection(path: ":memory:")
    try connection.execute(
      """
      PRAGMA foreign_keys = ON;
      CREATE TABLE parent(id INTEGER PRIMARY KEY);
      CREATE TABLE child(parent INTEGER REFERENCES parent(id) DEFERRABLE INITIALLY DEFERRED);
      """)
    let error = #expect(throws: SQLiteError.self) {
      try connection.transaction { try connection.execute("INSERT INTO child VALUES (?)", [.integer(9)]) }
    }
    #expect(error?.extendedCode == SQLiteError.ExtendedCode.constraintForeignKey)
    #expect(error?.sql == "COMMIT TRANSACTION")
    #expect(!connection.isInTransaction)
    #expect(try connection.query("SELECT count(*) FROM child") == [[.integer(0)]])
  }

  @Test func rowIDChangesAndTransactionState() throws {
    let connection = try SQLiteConnection(path: ":memory:")
    try connection.execute("CREATE TABLE t(id INTEGER PRIMARY KEY, x)")
    try connection.execute("INSERT INTO t(x) VALUES (?), (?), (?)", [.integer(1), .integer(2), .integer(3)])
    #expect(connection.lastInsertRowID == 3)
    #expect(connection.changes == 3)
    try connection.execute("UPDATE t SET x = x + 1 WHERE id < ?", [.integer(3)])
    #expect(connection.changes == 2)
    #expect(!connection.isInTransaction)
    try connection.execute("BEGIN")
    #expect(connection.isInTransaction)
    try connection.execute("ROLLBACK")
    #expect(!connection.isInTransaction)
  }

  @Test func configureSetsWALAsTheSQLite3ProgramSeesIt() throws {
    let db = TemporaryDatabase()
    defer { db.remove() }
    let connection = try SQLiteConnection(path: db.path)
    try connection.configure(synchronous: .normal, busyTimeoutMilliseconds: 1234)
    #expect(try connection.query("PRAGMA journal_mode") == [[.text("wal")]])
    #expect(try connection.query("PRAGMA synchronous") == [[.integer(1)]])
    #expect(try connection.query("PRAGMA foreign_keys") == [[.integer(1)]])
    #expect(try connection.query("PRAGMA busy_timeout") == [[.integer(1234)]])
    try connection.execute("CREATE TABLE t(x)")
    try connection.transaction {
      for i in 0..<500 { try connection.execute("INSERT INTO t VALUES (?)", [.text("row \(i)")]) }
    }
    #expect(try connection.integrityCheck() == ["ok"])
    #expect(try sqlite3(db.path, "PRAGMA journal_mode") == "wal")
    #expect(try sqlite3(db.path, "PRAGMA integrity_check") == "ok")
    #expect(try sqlite3(db.path, "SELECT count(*) FROM t") == "500")

    try connection.configure(journalWAL: false)
    #expect(try connection.query("PRAGMA synchronous") == [[.integer(2)]])
    connection.close()
    #expect(try sqlite3(db.path, "PRAGMA journal_mode") == "delete")
  }

  @Test func configureRefusesWhatCannotBeWAL() throws {
    let connection = try SQLiteConnection(path: ":memory:")
    let error = #expect(throws: SQLiteError.self) { try connection.configure() }
    #expect(error?.message.contains("memory") == true)
  }

  @Test func newFilesAreOwnerOnlyIncludingTheWAL() throws {
    let db = TemporaryDatabase()
    defer { db.remove() }
    let connection = try db.open()
    try connection.execute("CREATE TABLE t(x); INSERT INTO t VALUES (1)")
    #expect(permissions(db.path) == 0o600)
    #expect(permissions(db.path + "-wal") == 0o600)
    #expect(permissions(db.path + "-shm") == 0o600)
    connection.close()

    // The mode is exact, whatever the umask (022 here would make 0666 into 0644).
    let wide = TemporaryDatabase()
    defer { wide.remove() }
    let shared = try SQLiteConnection(path: wide.path, fileMode: 0o666)
    try shared.configure()
    try shared.execute("CREATE TABLE t(x)")
    #expect(permissions(wide.path) == 0o666)
    #expect(permissions(wide.path + "-wal") == 0o666)
    shared.close()

    // An existing file keeps its mode.
    chmod(db.path, 0o640)
    let reopened = try SQLiteConnection(path: db.path)
    #expect(try reopened.query("SELECT x FROM t") == [[.integer(1)]])
    #expect(permissions(db.path) == 0o640)
  }

  @Test func openFailuresAndReadOnlyConnections() throws {
    let missing = TemporaryDatabase()
    let notFound = #expect(throws: SQLiteError.self) {
      _ = try SQLiteConnection(path: missing.path, mode: .readWrite)
    }
    #expect(notFound?.code == SQLiteError.Code.cantOpen)
    #expect(notFound?.message.contains(missing.path) == true)
    #expect(permissions(missing.path) == nil)

    let db = TemporaryDatabase()
    defer { db.remove() }
    try db.open().execute("CREATE TABLE t(x)")
    let reader = try SQLiteConnection(path: db.path, mode: .readOnly)
    let write = #expect(throws: SQLiteError.self) { try reader.execute("INSERT INTO t VALUES (1)") }
    #expect(write?.code == SQLiteError.Code.readOnly)
  }

  @Test func closeIsIdempotentAndLaterUseFails() throws {
    let connection = try SQLiteConnection(path: ":memory:")
    let statement = try connection.prepare("SELECT 1")
    _ = try connection.cachedStatement("SELECT 2")
    connection.close()
    connection.close()
    #expect(connection.isClosed)
    let error = #expect(throws: SQLiteError.self) { _ = try connection.query("SELECT 1") }
    #expect(error?.code == SQLiteError.Code.misuse)
    // A statement prepared outside the cache still works until released (sqlite3_close_v2).
    #expect(try statement.step())
    #expect(statement.int64(0) == 1)
  }
}

private func format3(_ number: Int) -> String {
  let digits = String(number)
  return String(repeating: "0", count: 3 - digits.count) + digits
}
