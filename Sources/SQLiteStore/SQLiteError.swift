import CSQLite

/// A failed SQLite call: its result codes, SQLite's message and the SQL that was running.
///
/// Connections are opened with extended result codes, so `extendedCode` says which constraint failed
/// (`SQLITE_CONSTRAINT_UNIQUE` is 2067) where `code` only says that one did (`SQLITE_CONSTRAINT`, 19).
/// The constants a caller needs are in `SQLiteError.Code` and `SQLiteError.ExtendedCode`.
public struct SQLiteError: Error, Equatable, Sendable, CustomStringConvertible {
  /// The primary result code (the low 8 bits of `extendedCode`), e.g. 19 for a constraint violation.
  public var code: Int32
  /// The extended result code, e.g. 2067 for a UNIQUE constraint violation.
  public var extendedCode: Int32
  /// SQLite's message, e.g. `UNIQUE constraint failed: page.id`.
  public var message: String
  /// The SQL being prepared or run, if any.
  public var sql: String?

  /// An error with the given codes; `code` is derived from `extendedCode`.
  public init(extendedCode: Int32, message: String, sql: String? = nil) {
    self.code = extendedCode & 0xFF
    self.extendedCode = extendedCode
    self.message = message
    self.sql = sql
  }

  /// The error SQLite reports for `result`, with the connection's message when it is about the same failure.
  init(result: Int32, connection db: OpaquePointer?, sql: String?) {
    var extended = result
    var message = String(cString: sqlite3_errstr(result))
    if let db, sqlite3_extended_errcode(db) & 0xFF == result & 0xFF {
      extended = sqlite3_extended_errcode(db)
      message = String(cString: sqlite3_errmsg(db))
    }
    self.init(extendedCode: extended, message: message, sql: sql)
  }

  /// An error of our own making (a misuse SQLite does not report by itself), with SQLite's code for its kind.
  static func misuse(_ message: String, sql: String? = nil, code: Int32 = SQLITE_MISUSE) -> SQLiteError {
    SQLiteError(extendedCode: code, message: message, sql: sql)
  }

  /// `SQLite error 19 (constraint failed), extended code 2067: UNIQUE constraint failed: t.id - while executing
  /// `INSERT INTO t VALUES (?)``.
  public var description: String {
    var text = "SQLite error \(code) (\(String(cString: sqlite3_errstr(code))))"
    text += ", extended code \(extendedCode): \(message)"
    if let sql { text += " - while executing `\(sql)`" }
    return text
  }

  /// Primary result codes (SQLite's values, which never change).
  public enum Code {
    /// Generic error: a syntax error, a missing table, ...
    public static let error = SQLITE_ERROR
    /// Another connection holds a lock longer than the busy timeout.
    public static let busy = SQLITE_BUSY
    /// A write on a read-only connection or file.
    public static let readOnly = SQLITE_READONLY
    /// A disk I/O error.
    public static let ioError = SQLITE_IOERR
    /// The database file is malformed.
    public static let corrupt = SQLITE_CORRUPT
    /// The disk is full.
    public static let full = SQLITE_FULL
    /// The file could not be opened.
    public static let cantOpen = SQLITE_CANTOPEN
    /// A constraint (UNIQUE, NOT NULL, CHECK, FOREIGN KEY) failed.
    public static let constraint = SQLITE_CONSTRAINT
    /// The API was used wrongly (wrong number of bindings, a closed connection, ...).
    public static let misuse = SQLITE_MISUSE
    /// A binding index out of range.
    public static let range = SQLITE_RANGE
    /// The file is not a database.
    public static let notADatabase = SQLITE_NOTADB
  }

  /// Extended result codes that callers test for. (Their C macros are expressions, which do not import.)
  public enum ExtendedCode {
    /// A UNIQUE constraint failed (2067).
    public static let constraintUnique: Int32 = 2067
    /// A PRIMARY KEY constraint failed (1555).
    public static let constraintPrimaryKey: Int32 = 1555
    /// A FOREIGN KEY constraint failed (787).
    public static let constraintForeignKey: Int32 = 787
    /// A NOT NULL constraint failed (1299).
    public static let constraintNotNull: Int32 = 1299
    /// A CHECK constraint failed (275).
    public static let constraintCheck: Int32 = 275
  }
}
