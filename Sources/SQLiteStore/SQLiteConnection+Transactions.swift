extension SQLiteConnection {
  /// Runs `body` in a transaction: BEGIN `kind`, then COMMIT when `body` returns, ROLLBACK when it throws.
  ///
  /// Rethrows `body`'s error after the rollback. If COMMIT fails (`SQLITE_BUSY`, a deferred foreign key), the
  /// transaction is rolled back and the commit's `SQLiteError` is thrown. Must not be nested: use `savepoint`
  /// inside a transaction.
  public func transaction<R>(_ kind: TransactionKind = .immediate, _ body: () throws -> R) throws -> R {
    // Test crash points (TestCrashPoint) of writing transactions: `.deferred` is what the stores read with.
    let writing = kind != .deferred
    if writing { TestCrashPoint.reach("begin", inTransaction: false) }
    try execute("BEGIN \(kind.rawValue) TRANSACTION", [])
    let result: R
    do {
      result = try body()
    } catch {
      rollbackIfOpen()
      throw error
    }
    if writing { TestCrashPoint.reach("commit", inTransaction: true) }
    do {
      try execute("COMMIT TRANSACTION", [])
    } catch {
      rollbackIfOpen()
      throw error
    }
    if writing { TestCrashPoint.reach("committed", inTransaction: false) }
    return result
  }

  /// Runs `body` inside SAVEPOINT `name`: RELEASE when it returns; ROLLBACK TO and RELEASE when it throws, which
  /// undoes `body`'s changes only and leaves an enclosing transaction open. Nests. Outside a transaction it
  /// behaves as a deferred transaction (RELEASE commits).
  public func savepoint<R>(_ name: String, _ body: () throws -> R) throws -> R {
    let sql = savepointStatements(name)
    let outermost = !isInTransaction
    try execute(sql.begin, [])
    let result: R
    do {
      result = try body()
    } catch {
      rollback(sql, outermost: outermost)
      throw error
    }
    do {
      try execute(sql.release, [])
    } catch {
      // Only an outermost savepoint's RELEASE can fail (it commits): undo it as a whole.
      rollback(sql, outermost: outermost)
      throw error
    }
    return result
  }

  private func savepointStatements(_ name: String) -> (begin: String, release: String, rollback: String) {
    if let known = savepointSQL[name] { return known }
    let quoted = Self.quoteIdentifier(name)
    let made = (
      begin: "SAVEPOINT \(quoted)", release: "RELEASE SAVEPOINT \(quoted)",
      rollback: "ROLLBACK TO SAVEPOINT \(quoted)"
    )
    if savepointSQL.count < 64 { savepointSQL[name] = made }
    return made
  }

  private func rollback(_ sql: (begin: String, release: String, rollback: String), outermost: Bool) {
    guard isInTransaction else { return }
    try? execute(sql.rollback, [])
    try? execute(sql.release, [])
    // An outermost savepoint is the transaction: if releasing it failed too, end the transaction.
    if outermost { rollbackIfOpen() }
  }

  /// `name` as an SQL identifier: in double quotes, inner quotes doubled.
  static func quoteIdentifier(_ name: String) -> String {
    var quoted = "\""
    for character in name {
      if character == "\"" { quoted.append("\"") }
      quoted.append(character)
    }
    quoted.append("\"")
    return quoted
  }
}
