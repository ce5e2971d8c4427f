extension OfflineForest {
  /// The trees a page is in, for `treesByPage`. Almost every page is in one tree (a database row kept by its
  /// database, a child by its parent page), so one key is held inline and a set is made only for a page in two or
  /// more. With a `Set` for each, 10,200 offline pages held 2 MB of small sets (scripts/idle-daemon.py).
  struct TreeKeys: Sequence, Equatable, ExpressibleByArrayLiteral, Sendable {
    private enum Storage: Equatable, Sendable {
      case none
      case one(TreeKey)
      /// Two or more keys: never fewer (`remove` goes back to `one`).
      case many(Set<TreeKey>)
    }
    private var storage: Storage

    init(arrayLiteral keys: TreeKey...) {
      storage = .none
      for key in keys { insert(key) }
    }

    var isEmpty: Bool {
      if case .none = storage { return true }
      return false
    }

    var count: Int {
      switch storage {
      case .none: 0
      case .one: 1
      case .many(let keys): keys.count
      }
    }

    func contains(_ key: TreeKey) -> Bool {
      switch storage {
      case .none: false
      case .one(let only): only == key
      case .many(let keys): keys.contains(key)
      }
    }

    mutating func insert(_ key: TreeKey) {
      switch storage {
      case .none: storage = .one(key)
      case .one(let only): if only != key { storage = .many([only, key]) }
      case .many(var keys):
        storage = .none  // the set is uniquely referenced while it grows
        keys.insert(key)
        storage = .many(keys)
      }
    }

    mutating func remove(_ key: TreeKey) {
      switch storage {
      case .none: break
      case .one(let only): if only == key { storage = .none }
      case .many(var keys):
        storage = .none
        keys.remove(key)
        storage = keys.count == 1 ? .one(keys.first!) : .many(keys)
      }
    }

    /// Walks the keys without boxing: `refresh` iterates the keys of every page a fetch stored.
    struct Iterator: IteratorProtocol {
      fileprivate var only: TreeKey?
      fileprivate var many: Set<TreeKey>.Iterator?

      mutating func next() -> TreeKey? {
        if let key = only {
          only = nil
          return key
        }
        return many?.next()
      }
    }

    func makeIterator() -> Iterator {
      switch storage {
      case .none: Iterator(only: nil, many: nil)
      case .one(let only): Iterator(only: only, many: nil)
      case .many(let keys): Iterator(only: nil, many: keys.makeIterator())
      }
    }

    /// Equal when they hold the same keys (`many` never holds fewer than two, so the storage decides).
    static func == (lhs: TreeKeys, rhs: TreeKeys) -> Bool { lhs.storage == rhs.storage }
  }
}
