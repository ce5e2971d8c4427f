import StoreInterface

/// One step of a schema: SQL that takes the database from `version - 1` to `version` (the type both engines'
/// migrators take). A migration that has shipped is never edited: add a new one. Its SQL runs inside a transaction,
/// so on SQLite it must not contain BEGIN/COMMIT, `PRAGMA journal_mode` or VACUUM.
public typealias SQLiteMigration = StoreMigration

/// Why `SQLiteMigrator.migrate` failed.
public enum SQLiteMigrationError: Error, Equatable, Sendable, CustomStringConvertible {
  /// The database was written by a newer program: its `user_version` is beyond every migration we know.
  case databaseNewerThanKnown(databaseVersion: Int, newestKnown: Int)
  /// A migration failed and was rolled back with its `user_version` bump; the ones before it stay applied.
  case migrationFailed(version: Int, name: String, error: SQLiteError)
  /// Reading the database's version failed.
  case versionUnreadable(SQLiteError)

  public var description: String {
    switch self {
    case .databaseNewerThanKnown(let databaseVersion, let newestKnown):
      "database schema version \(databaseVersion) is newer than the newest this program knows "
        + "(\(newestKnown)): refusing to open it"
    case .migrationFailed(let version, let name, let error):
      "migration \(version) (\(name)) failed and was rolled back: \(error)"
    case .versionUnreadable(let error):
      "cannot read the schema version (PRAGMA user_version): \(error)"
    }
  }
}

/// Brings a database's schema up to date, using `PRAGMA user_version` as the number of migrations applied.
public struct SQLiteMigrator: Sendable {
  /// Ordered by version: `migrations[i].version == i + 1`.
  public let migrations: [SQLiteMigration]

  /// `migrations` must have versions 1...n, each once (in any order); anything else is a programming error.
  public init(_ migrations: [SQLiteMigration]) {
    let sorted = migrations.sorted { $0.version < $1.version }
    for (index, migration) in sorted.enumerated() {
      precondition(
        migration.version == index + 1,
        "migration versions must be 1...\(sorted.count) without gaps or repeats; found \(migration.version) "
          + "(\(migration.name)) where \(index + 1) belongs")
    }
    self.migrations = sorted
  }

  /// The version a fully migrated database has.
  public var newestVersion: Int { migrations.count }

  /// Applies every migration newer than the database's `PRAGMA user_version`, each in its own IMMEDIATE
  /// transaction together with its `user_version` bump, and returns the versions before and after (equal when
  /// there was nothing to do).
  ///
  /// Refuses (`databaseNewerThanKnown`) a database whose version is beyond `newestVersion`. Safe against another
  /// process migrating the same file at the same time: each step re-reads the version under the write lock.
  public func migrate(_ connection: SQLiteConnection) throws(SQLiteMigrationError) -> (from: Int, to: Int) {
    let from: Int
    do {
      from = try Self.userVersion(connection)
    } catch {
      throw .versionUnreadable(error)
    }
    var current = from
    while true {
      if current > newestVersion {
        throw .databaseNewerThanKnown(databaseVersion: current, newestKnown: newestVersion)
      }
      if current == newestVersion { return (from, current) }
      let migration = migrations[current]
      do {
        current = try connection.transaction(.immediate) { () throws -> Int in
          let found = try Self.userVersion(connection)
          // Another connection got here first: start again from what it left.
          if found != current { return found }
          try connection.execute(migration.sql)
          try connection.execute("PRAGMA user_version = \(migration.version)")
          return migration.version
        }
      } catch let error as SQLiteError {
        throw .migrationFailed(version: migration.version, name: migration.name, error: error)
      } catch {
        preconditionFailure("only SQLiteError is thrown inside a migration: \(error)")
      }
    }
  }

  /// `PRAGMA user_version` of `connection`'s main database.
  public static func userVersion(_ connection: SQLiteConnection) throws(SQLiteError) -> Int {
    guard case .integer(let version)? = try connection.query("PRAGMA user_version").first?.first else {
      throw .misuse("PRAGMA user_version returned no integer", sql: "PRAGMA user_version")
    }
    return Int(version)
  }
}
