import EventLoopTestKit
import PostgresStore
import PostgresTestKit
import SQLiteStore

/// The shared suite: every test that takes an `engine` runs once on SQLite (a file) and once on PostgreSQL (a
/// database of its own on the test process's server, `TestPostgres`). The same `PageStore` code runs on both; a
/// test that fails on one engine only names it in its arguments.
extension StoreEngine {
  static let tested: [StoreEngine] = [.sqlite, .postgres]
}

/// One test's database: a temporary SQLite file, or a fresh PostgreSQL database. `open()` may be called again to
/// reopen the same store.
struct TestStoreDatabase {
  let engine: StoreEngine
  let file = TemporaryDatabase()
  let url: String?

  init(_ engine: StoreEngine) throws {
    self.engine = engine
    url = engine == .postgres ? try TestPostgres.shared().makeDatabase() : nil
  }

  /// A new connection to the store.
  func open() throws -> any StoreConnection {
    if let url { return try PostgresConnection(url: url) }
    let connection = try SQLiteConnection(path: file.path)
    try connection.configure(synchronous: .normal)
    return connection
  }

  /// The SQLite file's path (SQLite only).
  var path: String { file.path }

  func remove() { file.remove() }
}
