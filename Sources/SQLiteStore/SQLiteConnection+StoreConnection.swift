import CSQLite

/// SQLite behind the store interface: the methods it already has, and the writer's group transaction.
extension SQLiteConnection: StoreConnection {
  public var engine: StoreEngine { .sqlite }

  /// `query(sql, [])` with SQLite's typed error (the interface's extension throws any error).
  public func query(_ sql: String) throws(SQLiteError) -> [[SQLiteValue]] { try query(sql, []) }

  public func statement(_ sql: String) throws -> any StoreStatement { try cachedStatement(sql) }

  public func beginGroup() throws { try execute("BEGIN IMMEDIATE TRANSACTION", []) }

  public func commitGroup() throws { try execute("COMMIT TRANSACTION", []) }

  public func rollbackIfOpen() {
    // Some errors (a full disk, an I/O error) roll the transaction back by themselves.
    guard isInTransaction else { return }
    try? execute("ROLLBACK TRANSACTION", [])
  }

  /// Nothing: the one writer of an SQLite file holds its write lock for the whole group.
  public func lockForBatch(workspace: String, client: String) {}

  public func transaction<R>(writing: Bool, _ body: () throws -> R) throws -> R {
    try transaction(writing ? .immediate : .deferred, body)
  }
}

extension SQLiteStatement: StoreStatement {
  public func eachRow(_ body: (any StoreStatement) throws -> Void) throws {
    try forEachRow { try body($0) }
  }
}
