/// One step of a schema on an engine without SQLite's `user_version`: SQL that takes the database from
/// `version - 1` to `version`. A migration that has shipped is never edited: add a new one.
public struct StoreMigration: Sendable {
  /// 1 for the first migration, then 2, 3, ...
  public var version: Int
  /// A short name, for errors and logs.
  public var name: String
  /// One or more statements, no bindings; they run inside a transaction.
  public var sql: String

  public init(version: Int, name: String, sql: String) {
    self.version = version
    self.name = name
    self.sql = sql
  }
}

/// Why `VersionTableMigrator.migrate` failed.
public enum StoreMigrationError: Error, CustomStringConvertible {
  /// The database was written by a newer program.
  case databaseNewerThanKnown(databaseVersion: Int, newestKnown: Int)
  /// A migration failed and was rolled back; the ones before it stay applied.
  case migrationFailed(version: Int, name: String, error: any Error)

  public var description: String {
    switch self {
    case .databaseNewerThanKnown(let databaseVersion, let newestKnown):
      "database schema version \(databaseVersion) is newer than the newest this program knows "
        + "(\(newestKnown)): refusing to open it"
    case .migrationFailed(let version, let name, let error):
      "migration \(version) (\(name)) failed and was rolled back: \(error)"
    }
  }
}

/// Brings a schema up to date with the number of migrations applied kept in a one-row table,
/// `schema_version (version)`: the PostgreSQL store's counterpart of `SQLiteMigrator` (`PRAGMA user_version`).
///
/// Each migration runs in a transaction of its own with its version bump, after `lockSQL` (PostgreSQL: an
/// advisory lock held to the transaction's end), so that brokers opening one store at once migrate it once.
public struct VersionTableMigrator: Sendable {
  public let migrations: [StoreMigration]
  /// Run first in every migration's transaction, to serialise migrators of one database.
  public let lockSQL: String

  /// `migrations` must have versions 1...n, each once; anything else is a programming error.
  public init(_ migrations: [StoreMigration], lockSQL: String) {
    let sorted = migrations.sorted { $0.version < $1.version }
    for (index, migration) in sorted.enumerated() {
      precondition(migration.version == index + 1, "migration versions must be 1...\(sorted.count)")
    }
    self.migrations = sorted
    self.lockSQL = lockSQL
  }

  public var newestVersion: Int { migrations.count }

  /// Applies every migration newer than the stored version; returns the versions before and after.
  @discardableResult
  public func migrate(_ connection: any StoreConnection) throws -> (from: Int, to: Int) {
    var from: Int?
    while true {
      let step = try connection.transaction(writing: true) { () throws -> (Int, Bool) in
        try connection.execute(lockSQL, [])
        try connection.execute("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)")
        let current: Int
        if case .integer(let version)? = try connection.query("SELECT max(version) FROM schema_version")
          .first?
          .first
        {
          current = Int(version)
        } else {
          current = 0
        }
        if current > newestVersion {
          throw StoreMigrationError.databaseNewerThanKnown(
            databaseVersion: current, newestKnown: newestVersion)
        }
        if current == newestVersion { return (current, true) }
        let migration = migrations[current]
        do {
          try connection.execute(migration.sql)
          try connection.execute("DELETE FROM schema_version", [])
          try connection.execute(
            "INSERT INTO schema_version (version) VALUES (?)", [.integer(Int64(migration.version))])
        } catch {
          throw StoreMigrationError.migrationFailed(
            version: migration.version, name: migration.name, error: error)
        }
        return (current, false)
      }
      if from == nil { from = step.0 }
      if step.1 { return (from ?? step.0, step.0) }
    }
  }
}
