import EventLoop
import EventLoopTestKit
import SQLiteStore
import Testing

@Suite struct SQLiteMigratorTests {
  static let migrations = [
    SQLiteMigration(
      version: 1, name: "pages",
      sql:
        "CREATE TABLE page(id TEXT PRIMARY KEY, title TEXT NOT NULL); INSERT INTO page VALUES ('root', 'Root')"
    ),
    SQLiteMigration(
      version: 2, name: "blocks",
      sql: """
        CREATE TABLE block(id TEXT PRIMARY KEY, page_id TEXT NOT NULL REFERENCES page(id), text TEXT);
        CREATE INDEX block_page ON block(page_id);
        """),
    SQLiteMigration(version: 3, name: "page updated", sql: "ALTER TABLE page ADD COLUMN updated INTEGER"),
    SQLiteMigration(
      version: 4, name: "backfill", sql: "UPDATE page SET updated = 0; CREATE TABLE meta(key TEXT, value)"),
  ]

  /// The schema as SQLite records it, for comparing databases migrated by different paths.
  static func schema(_ connection: SQLiteConnection) throws -> [[SQLiteValue]] {
    try connection.query("SELECT type, name, sql FROM sqlite_schema ORDER BY name")
  }

  @Test func migratesAnEmptyDatabaseToTheNewestVersion() throws {
    let db = TemporaryDatabase()
    defer { db.remove() }
    let connection = try db.open()
    let result = try SQLiteMigrator(Self.migrations).migrate(connection)
    #expect(result == (from: 0, to: 4))
    #expect(try SQLiteMigrator.userVersion(connection) == 4)
    #expect(
      try connection.query("SELECT id, title, updated FROM page") == [
        [.text("root"), .text("Root"), .integer(0)]
      ])
    connection.close()
    #expect(try sqlite3(db.path, "PRAGMA user_version") == "4")
    #expect(
      try sqlite3(db.path, "SELECT name FROM sqlite_schema WHERE type = 'table' ORDER BY name")
        == "block\nmeta\npage")
  }

  @Test func migratesFromEveryEarlierVersion() throws {
    let reference = try SQLiteConnection(path: ":memory:")
    _ = try SQLiteMigrator(Self.migrations).migrate(reference)
    let expected = try Self.schema(reference)

    for k in 0...Self.migrations.count {
      let db = TemporaryDatabase("version\(k)")
      defer { db.remove() }
      let connection = try db.open()
      let early = try SQLiteMigrator(Array(Self.migrations.prefix(k))).migrate(connection)
      #expect(early == (from: 0, to: k))
      let late = try SQLiteMigrator(Self.migrations).migrate(connection)
      #expect(late == (from: k, to: 4), "from version \(k)")
      #expect(try Self.schema(connection) == expected, "from version \(k)")
      #expect(try connection.query("SELECT updated FROM page") == [[.integer(0)]])
    }
  }

  @Test func aSecondRunChangesNothing() throws {
    let connection = try SQLiteConnection(path: ":memory:")
    let migrator = SQLiteMigrator(Self.migrations)
    _ = try migrator.migrate(connection)
    try connection.execute("INSERT INTO page VALUES ('other', 'Other', 1)")
    let again = try migrator.migrate(connection)
    #expect(again == (from: 4, to: 4))
    #expect(try connection.query("SELECT count(*) FROM page") == [[.integer(2)]])
  }

  @Test func aDatabaseNewerThanKnownIsRefused() throws {
    let connection = try SQLiteConnection(path: ":memory:")
    _ = try SQLiteMigrator(Self.migrations).migrate(connection)
    try connection.execute("PRAGMA user_version = 9")
    let error = #expect(throws: SQLiteMigrationError.self) {
      _ = try SQLiteMigrator(Self.migrations).migrate(connection)
    }
    #expect(error == .databaseNewerThanKnown(databaseVersion: 9, newestKnown: 4))
    let description = error?.description ?? ""
    #expect(description.contains("9") && description.contains("4"), "\(description)")
    // Refused as a whole: an older program does not touch it.
    #expect(throws: SQLiteMigrationError.databaseNewerThanKnown(databaseVersion: 9, newestKnown: 2)) {
      _ = try SQLiteMigrator(Array(Self.migrations.prefix(2))).migrate(connection)
    }
    #expect(try SQLiteMigrator.userVersion(connection) == 9)
  }

  @Test func aFailingMigrationRollsBackItselfAndKeepsTheEarlierOnes() throws {
    let db = TemporaryDatabase()
    defer { db.remove() }
    let connection = try db.open()
    let broken =
      Array(Self.migrations.prefix(2)) + [
        SQLiteMigration(
          version: 3, name: "broken",
          sql: "CREATE TABLE half(x); INSERT INTO page VALUES ('p', 'P'); INSERT INTO nowhere VALUES (1)"),
        Self.migrations[3],
      ]
    let error = #expect(throws: SQLiteMigrationError.self) {
      _ = try SQLiteMigrator(broken).migrate(connection)
    }
    guard case .migrationFailed(let version, let name, let cause)? = error else {
      Issue.record("unexpected \(String(describing: error))")
      return
    }
    #expect(version == 3 && name == "broken")
    #expect(cause.code == SQLiteError.Code.error && cause.message == "no such table: nowhere")
    #expect(error?.description.contains("migration 3 (broken)") == true)
    #expect(!connection.isInTransaction)
    #expect(try SQLiteMigrator.userVersion(connection) == 2)
    // Migration 3's own statements are gone; 1 and 2 stay.
    let tables = try connection.query("SELECT name FROM sqlite_schema WHERE type = 'table' ORDER BY name")
    #expect(tables == [[.text("block")], [.text("page")]])
    #expect(try connection.query("SELECT id FROM page") == [[.text("root")]])
    connection.close()
    #expect(try sqlite3(db.path, "PRAGMA user_version") == "2")

    // Once fixed, it carries on from there.
    let fixed = try db.open()
    #expect(try SQLiteMigrator(Self.migrations).migrate(fixed) == (from: 2, to: 4))
  }

  @Test func twoProcessesMigratingOneFileApplyEachStepOnce() throws {
    // Two connections on two threads race from version 0; each step re-reads the version under the write lock,
    // so the loser of a step skips it instead of failing on "table already exists".
    final class Outcomes: @unchecked Sendable {
      let lock = Lock()
      var results: [Result<Int, SQLiteMigrationError>] = []
    }
    for round in 0..<10 {
      let db = TemporaryDatabase("race\(round)")
      defer { db.remove() }
      try db.open().close()
      let outcomes = Outcomes()
      let gate = ThreadGate()
      let workers = [WorkerThread(name: "migrate-a"), WorkerThread(name: "migrate-b")]
      for worker in workers {
        worker.submit {
          let result = Result { () throws(SQLiteMigrationError) -> Int in
            let connection: SQLiteConnection
            do { connection = try db.open() } catch { throw .versionUnreadable(error as! SQLiteError) }
            gate.wait()
            return try SQLiteMigrator(Self.migrations).migrate(connection).to
          }
          outcomes.lock.withLock { outcomes.results.append(result) }
        }
      }
      gate.open()
      for worker in workers { worker.shutdown() }
      let results = outcomes.lock.withLock { outcomes.results.map { try? $0.get() } }
      #expect(results == [4, 4], "round \(round): \(outcomes.results)")
      #expect(try SQLiteMigrator.userVersion(db.open()) == 4)
    }
  }

  @Test func migrationsMayBeListedInAnyOrder() throws {
    let connection = try SQLiteConnection(path: ":memory:")
    let migrator = SQLiteMigrator(Self.migrations.reversed())
    #expect(migrator.migrations.map(\.version) == [1, 2, 3, 4])
    #expect(try migrator.migrate(connection) == (from: 0, to: 4))
  }
}
