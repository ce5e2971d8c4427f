import DaemonCore
import DaemonCoreTestKit
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

/// A store path under /tmp that no other test uses (EventLoopTestKit's `TemporaryDatabase`).
typealias TemporaryStore = TemporaryDatabase

/// A fresh local store on a file of its own (named after the test), and the file, to read it from outside
/// (`sqlite3`, `inspect()`). `closeAndRemove(_:_:)` both at the end (`defer`).
func freshStore(_ label: String = #function) throws -> (TemporaryStore, LocalStore) {
  let file = TemporaryStore(label)
  do {
    return (file, try LocalStore(path: file.path))
  } catch {
    file.remove()
    throw error
  }
}

/// Closes `store`, then removes its file (and the file's -wal and -shm).
func closeAndRemove(_ store: LocalStore, _ file: TemporaryStore) {
  store.close()
  file.remove()
}

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

/// Decodes a broker answer (a delta, a batch outcome) from its JSON, as the daemon receives it.
func decodeJSON<T: Decodable>(_ type: T.Type, _ text: String) throws -> T {
  try JSONDecoder().decode(type, from: Data(text.utf8))
}

/// A whole page as the broker's fetch answers it (`full: true`), for `applyDelta`. A database gets the default
/// view and no rows unless told; `blocks` are (id, text, position).
func wholePage(
  _ page: String, time: UInt64, kind: String = "page", title: String = "", parent: String? = nil,
  properties: String = "{}", blocks: [(String, String, Double)] = [], databases: [String] = [],
  view: String? = nil, rows: [String]? = nil
) throws -> PageDelta {
  func list(_ ids: [String]) -> String { "[" + ids.map { "\"\($0)\"" }.joined(separator: ", ") + "]" }
  let blockJSON = blocks.map { block in
    """
    {"id": "\(block.0)", "type": "text", "text": "\(block.1)", "attributes": {}, "position": \(block.2),
     "deleted": false}
    """
  }.joined(separator: ", ")
  var header =
    #""id": "\#(page)", "workspace": "W", "kind": "\#(kind)", "title": "\#(title)", "deleted": false"#
  if let parent { header += #", "parent": "\#(parent)""# }
  if kind == "database" {
    header += #", "view": \#(view ?? "{}"), "rows": \#(list(rows ?? []))"#
  }
  return try decodeJSON(
    PageDelta.self,
    """
    {"id": "\(page)", "since": 0, "lastUpdatedTime": \(time), "full": true, "properties": {}, "blocks": [],
     "page": {\(header), "properties": \(properties), "blocks": [\(blockJSON)], "databases": \(list(databases)),
       "lastUpdatedTime": \(time)}}
    """)
}

/// A partial delta (`full: false`) carrying the header and `extra` header fields (`"rows": [...]`, ...), changed
/// properties and changed blocks as JSON.
func partialDelta(
  _ page: String, since: UInt64, time: UInt64, kind: String = "page", title: String = "", extra: String = "",
  properties: String = "{}", blocks: String = "[]"
) throws -> PageDelta {
  try decodeJSON(
    PageDelta.self,
    """
    {"id": "\(page)", "since": \(since), "lastUpdatedTime": \(time), "full": false,
     "page": {"id": "\(page)", "workspace": "W", "kind": "\(kind)", "title": "\(title)", "deleted": false,
       "properties": {}, "blocks": [], "lastUpdatedTime": \(time)\(extra.isEmpty ? "" : ", " + extra)},
     "properties": \(properties), "blocks": \(blocks)}
    """)
}

/// Makes each page an offline origin (`toggled`), as the forest would write it.
func toggleOffline(_ store: LocalStore, _ pages: [String]) throws {
  let rows = pages.map { OfflineAction(origin: id($0), from: nil, impacted: id($0), type: .toggled) }
  try store.applyForestChange(
    ForestChange(insertedActions: rows, addedPages: pages.map { id($0) }), recentOrder: [])
}

/// The broker's answer applying every given mutation.
func appliedOutcome(_ mutations: [Mutation]) throws -> BatchOutcome {
  let results = mutations.map { #"{"mutationId": \#($0.id), "page": "\#($0.page)", "status": "applied"}"# }
  return try decodeJSON(
    BatchOutcome.self,
    """
    {"results": [\(results.joined(separator: ", "))], "pages": {}, "lastMutationId": \(mutations.last?.id ?? 0),
     "epoch": "e1"}
    """)
}
