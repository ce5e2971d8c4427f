import StoreInterface

/// A statement PostgreSQL refused: its SQLSTATE, message and the SQL (as sent, after translation).
public struct PostgresError: Error, CustomStringConvertible, Sendable {
  /// The five-character SQLSTATE (`23505` a unique violation, ...), empty when libpq gave none.
  public var sqlState: String
  public var message: String
  public var sql: String?

  public init(sqlState: String, message: String, sql: String?) {
    self.sqlState = sqlState
    self.message = message
    self.sql = sql
  }

  public var description: String {
    let state = sqlState.isEmpty ? "" : " [\(sqlState)]"
    return "PostgreSQL error\(state): \(message)" + (sql.map { " in: \($0)" } ?? "")
  }
}

/// The PostgreSQL server cannot be reached: the connection could not be made, or was lost (a restart, a network
/// cut, an administrator's shutdown). Whatever the transaction held is gone, uncommitted; the connection is made
/// again at the next transaction. The broker answers 503.
public struct PostgresUnavailable: StoreUnavailableError, CustomStringConvertible, Sendable {
  public var message: String

  public init(_ message: String) { self.message = message }

  public var description: String { "PostgreSQL unavailable: \(message)" }
}
