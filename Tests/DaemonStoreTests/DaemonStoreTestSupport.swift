import DaemonCore
import DaemonStore
import EventLoop
import EventLoopTestKit
import FoundationEssentials
import SQLiteStore
import SyncModel
import Testing

#if canImport(Glibc)
  import Glibc
#endif

/// An id from a literal the tests know to be valid.
func id(_ text: String) -> EntityID { try! EntityID(validating: text) }

/// A store path under /tmp that no other test uses (EventLoopTestKit's `TemporaryDatabase`).
typealias TemporaryStore = TemporaryDatabase

extension TemporaryDatabase {
  /// A second connection on the file, to look at rows (and, in one test, to get in the store's way).
  func inspect() throws -> SQLiteConnection {
    let connection = try SQLiteConnection(path: path, mode: .readWrite)
    try connection.configure()
    return connection
  }
}

/// The single value of a one-row, one-column query.
func scalar(_ connection: SQLiteConnection, _ sql: String, _ bindings: [SQLiteValue] = []) throws
  -> SQLiteValue?
{
  try connection.query(sql, bindings).first?.first
}

/// A page hierarchy as dictionaries, for building forests.
struct MapStructure: OfflineStructure {
  var kinds: [EntityID: PageKind] = [:]
  var inline: [EntityID: [EntityID]] = [:]
  var rows: [EntityID: [EntityID]] = [:]

  func kind(of page: EntityID) -> PageKind? { kinds[page] }
  func inlineDatabases(of page: EntityID) -> [EntityID] { inline[page] ?? [] }
  func rowsInView(of database: EntityID, limit: Int) -> [EntityID] {
    Array((rows[database] ?? []).prefix(limit))
  }
}

/// Decodes a broker answer (a delta, a batch outcome) from its JSON, as the daemon receives it.
func decodeJSON<T: Decodable>(_ type: T.Type, _ text: String) throws -> T {
  try JSONDecoder().decode(type, from: Data(text.utf8))
}

/// The permission bits of `path`, or nil if it does not exist.
func permissions(_ path: String) -> mode_t? {
  var info = stat()
  guard stat(path, &info) == 0 else { return nil }
  return info.st_mode & 0o7777
}
