import SyncModel

/// What a rebase decides about the lists a page keeps of other pages, without I/O. When the daemon stores the
/// broker's copy of a page (or records a local edit), the page's own fields get this device's unsent edits
/// re-applied on top; the lists it holds about OTHER pages (a page's inline `databases`, a database's `rows` in
/// view) must follow those pages' unsent edits too. `LocalStore` reads the rows these need and writes what they
/// return.
public enum Rebase {
  /// Where a page stands locally, as far as a list about it cares.
  public struct Placement: Equatable, Sendable {
    public var id: EntityID
    public var parent: EntityID?
    public var deleted: Bool

    public init(id: EntityID, parent: EntityID?, deleted: Bool) {
      self.id = id
      self.parent = parent
      self.deleted = deleted
    }
  }

  /// A page's inline databases: `listed` (the broker's answer, or what is stored) brought in line with the
  /// databases this device has unsent edits of (`edited`, in the order their copies were first stored here): one
  /// that is live with `page` as its parent is listed (appended, if it was not), one that is not is removed.
  /// Databases nobody edited here keep the broker's answer and its order.
  public static func inlineDatabases(of page: EntityID, listed: [EntityID], edited: [Placement]) -> [EntityID]
  {
    var list = listed
    for database in edited {
      if database.parent == page && !database.deleted {
        if !list.contains(database.id) { list.append(database.id) }
      } else {
        list.removeAll { $0 == database.id }
      }
    }
    return list
  }

  /// Whether a database's rows in view can be computed here exactly, as the broker would: when the database
  /// was never downloaded (its rows are the ones made here), or when its view had no filter (so `stored` lists
  /// every live row) and every listed row has a local copy (`known`).
  public static func canRecomputeRows(
    neverDownloaded: Bool, viewBefore: ViewState, stored: [EntityID]?, known: Set<EntityID>
  ) -> Bool {
    if neverDownloaded { return true }
    guard viewBefore.filter == nil, let stored else { return false }
    return stored.allSatisfy(known.contains)
  }

  /// When the rows cannot be recomputed: the stored list less what is certain, the rows deleted here or moved
  /// out of `database` here (`copies`: the local copies of listed rows; a row without one stays). The broker's
  /// next delta brings the exact order.
  public static func rowsStillIn(
    _ database: EntityID, stored: [EntityID], copies: [EntityID: Placement]
  ) -> [EntityID] {
    stored.filter { row in
      guard let copy = copies[row] else { return true }
      return copy.parent == database && !copy.deleted
    }
  }
}
