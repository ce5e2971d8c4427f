import DaemonCore
import SyncModel

// What the tests of the offline forest share, in DaemonCoreTests and DaemonStoreTests.

/// An id from a literal the tests know to be valid.
public func id(_ text: String) -> EntityID { try! EntityID(validating: text) }

/// Ids from literals the tests know to be valid.
public func ids(_ texts: String...) -> [EntityID] { texts.map(id) }

/// The local store's structure as plain dictionaries, editable between forest operations. Counts lookups, so
/// tests can see which pages an operation read.
public struct MapStructure: OfflineStructure {
  public var kinds: [EntityID: PageKind]
  public var inline: [EntityID: [EntityID]]
  public var rows: [EntityID: [EntityID]]
  /// Every page whose kind was asked, in order (a class so the forest's non-mutating calls can record).
  public let lookups = LookupLog()
  /// After this many lookups every page reads as unknown, so a walk that would never end stops, and fails its
  /// test instead of hanging it.
  public var lookupBudget = Int.max

  public final class LookupLog {
    public var pages: [EntityID] = []
  }

  public init(
    kinds: [EntityID: PageKind] = [:], inline: [EntityID: [EntityID]] = [:],
    rows: [EntityID: [EntityID]] = [:]
  ) {
    self.kinds = kinds
    self.inline = inline
    self.rows = rows
  }

  /// A page with inline databases.
  public mutating func page(_ page: String, inline databases: [String] = []) {
    kinds[id(page)] = .page
    inline[id(page)] = databases.map(id)
  }

  /// A database with rows in view.
  public mutating func database(_ database: String, rows inView: [String] = []) {
    kinds[id(database)] = .database
    rows[id(database)] = inView.map(id)
  }

  public func kind(of page: EntityID) -> PageKind? {
    lookups.pages.append(page)
    return lookups.pages.count > lookupBudget ? nil : kinds[page]
  }
  public func inlineDatabases(of page: EntityID) -> [EntityID] { inline[page] ?? [] }
  /// The first `limit` rows in view, as the local store answers.
  public func rowsInView(of database: EntityID, limit: Int) -> [EntityID] {
    Array((rows[database] ?? []).prefix(limit))
  }
}
