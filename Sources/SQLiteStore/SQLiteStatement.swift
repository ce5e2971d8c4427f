import CSQLite

/// A prepared statement of one `SQLiteConnection`.
///
/// Threading: like its connection, used by one thread at a time.
///
/// Lifecycle: `bind` (which resets), then `step` until it returns false (or `forEachRow`), then `reset`. A
/// statement left mid-way, not reset, keeps its read transaction open and so holds back WAL checkpoints.
/// A statement from `SQLiteConnection.cachedStatement` belongs to the connection's cache: closing the
/// connection finalizes it, and using it afterwards is a programming error (it traps). A statement from
/// `SQLiteConnection.prepare` is finalized when released.
public final class SQLiteStatement {
  private var handle: OpaquePointer?
  /// The SQL text the statement was prepared from.
  public let sql: String
  /// Set while `forEachRow` or a connection's `query` steps it, so that a nested use of the same cached SQL gets a
  /// statement of its own instead of resetting this one under its caller.
  var isIterating = false

  init(handle: OpaquePointer, sql: String) {
    self.handle = handle
    self.sql = sql
  }

  deinit {
    if let handle { sqlite3_finalize(handle) }
  }

  /// Finalizes now (the connection is closing); any later use traps.
  func finalize() {
    if let handle { sqlite3_finalize(handle) }
    handle = nil
  }

  private var statement: OpaquePointer {
    guard let handle else { preconditionFailure("SQLiteStatement used after its connection closed: \(sql)") }
    return handle
  }

  private func error(_ result: Int32) -> SQLiteError {
    SQLiteError(result: result, connection: sqlite3_db_handle(statement), sql: sql)
  }

  // MARK: Binding

  /// Binds `values` to the statement's parameters by position (`?`, `?NNN`, `:name` in order of index), after
  /// resetting it and clearing earlier bindings. Throws `SQLiteError.Code.range` when the number of values is
  /// not the number of parameters.
  public func bind(_ values: [SQLiteValue]) throws(SQLiteError) {
    reset()
    clearBindings()
    let expected = Int(sqlite3_bind_parameter_count(statement))
    guard values.count == expected else {
      throw .misuse(
        "wrong number of bindings: \(values.count), the statement has \(expected) parameters", sql: sql,
        code: SQLITE_RANGE)
    }
    for (offset, value) in values.enumerated() {
      let result = bind(value, at: Int32(offset + 1))
      if result != SQLITE_OK { throw error(result) }
    }
  }

  /// Binds `text` to the statement's one parameter, after resetting it: `bind([.text(text)])` without the array
  /// and the clearing, for a statement run once per id of a long list (a returning device's 10,000 pages).
  public func bind(text: String) throws(SQLiteError) {
    reset()
    guard sqlite3_bind_parameter_count(statement) == 1 else {
      throw .misuse("bind(text:) on a statement without exactly one parameter", sql: sql, code: SQLITE_RANGE)
    }
    let result = bind(.text(text), at: 1)
    if result != SQLITE_OK { throw error(result) }
  }

  private func bind(_ value: SQLiteValue, at index: Int32) -> Int32 {
    switch value {
    case .null:
      return sqlite3_bind_null(statement, index)
    case .integer(let value):
      return sqlite3_bind_int64(statement, index, value)
    case .real(let value):
      return sqlite3_bind_double(statement, index, value)
    case .text(var text):
      // With its length: the text may contain NULs. A nil pointer would bind NULL, hence the empty case.
      return text.withUTF8 { bytes in
        guard let base = bytes.baseAddress, bytes.count > 0 else {
          return sqlite3_bind_text(statement, index, "", 0, sqliteTransient)
        }
        return UnsafeRawPointer(base).withMemoryRebound(to: CChar.self, capacity: bytes.count) {
          sqlite3_bind_text64(
            statement, index, $0, sqlite3_uint64(bytes.count), sqliteTransient, UInt8(SQLITE_UTF8))
        }
      }
    case .blob(let bytes):
      // A nil pointer binds NULL: an empty blob is a zero-length zeroblob.
      if bytes.isEmpty { return sqlite3_bind_zeroblob(statement, index, 0) }
      return bytes.withUnsafeBytes {
        sqlite3_bind_blob64(statement, index, $0.baseAddress, sqlite3_uint64($0.count), sqliteTransient)
      }
    }
  }

  // MARK: Stepping

  /// Runs the statement to its next row. Returns true when a row is available, false when it is done.
  public func step() throws(SQLiteError) -> Bool {
    if TestCrashPoint.isArmed { TestCrashPoint.stepping(statement) }
    let result = sqlite3_step(statement)
    switch result {
    case SQLITE_ROW: return true
    case SQLITE_DONE: return false
    default: throw error(result)
    }
  }

  /// Sets every parameter back to NULL.
  public func clearBindings() {
    sqlite3_clear_bindings(statement)
  }

  /// Rewinds the statement so that it can run again; keeps its bindings. Ends its read transaction.
  public func reset() {
    // sqlite3_reset repeats the last step's error, which step already reported.
    sqlite3_reset(statement)
  }

  /// Steps through every row, calling `body` with the statement positioned on it, then resets.
  /// Rethrows `body`'s error (after resetting); throws `SQLiteError` when a step fails.
  public func forEachRow(_ body: (SQLiteStatement) throws -> Void) throws {
    isIterating = true
    defer {
      isIterating = false
      reset()
    }
    while try step() { try body(self) }
  }

  // MARK: Columns of the current row

  /// The number of columns in the statement's result (0 for a statement that returns no data).
  public var columnCount: Int { Int(sqlite3_column_count(statement)) }

  /// The name of result column `index`.
  public func columnName(_ index: Int) -> String {
    sqlite3_column_name(statement, Int32(index)).map { String(cString: $0) } ?? ""
  }

  /// Column `index` of the current row, in its storage class.
  public func column(_ index: Int) -> SQLiteValue {
    let column = Int32(index)
    switch sqlite3_column_type(statement, column) {
    case SQLITE_INTEGER: return .integer(sqlite3_column_int64(statement, column))
    case SQLITE_FLOAT: return .real(sqlite3_column_double(statement, column))
    case SQLITE_TEXT: return .text(text(column))
    case SQLITE_BLOB: return .blob(bytes(column))
    default: return .null
    }
  }

  /// Column `index` as an integer (SQLite's conversion: NULL is 0, text is parsed).
  public func int64(_ index: Int) -> Int64 { sqlite3_column_int64(statement, Int32(index)) }

  /// Column `index` as a double (SQLite's conversion: NULL is 0.0).
  public func double(_ index: Int) -> Double { sqlite3_column_double(statement, Int32(index)) }

  /// Column `index` as text, nil when NULL. Built from the UTF-8 bytes and their count: NULs survive.
  public func string(_ index: Int) -> String? {
    isNull(index) ? nil : text(Int32(index))
  }

  /// Calls `body` with column `index`'s UTF-8 bytes, valid only during the call, without making a string; nil
  /// when NULL.
  public func withText<R>(_ index: Int, _ body: (UnsafeBufferPointer<UInt8>) throws -> R) rethrows -> R? {
    guard !isNull(index) else { return nil }
    let column = Int32(index)
    // Pointer first, then the count (see `text`).
    guard let pointer = sqlite3_column_text(statement, column) else {
      return try body(UnsafeBufferPointer(start: nil, count: 0))
    }
    let count = Int(sqlite3_column_bytes(statement, column))
    return try body(UnsafeBufferPointer(start: pointer, count: count))
  }

  /// Column `index` as bytes, nil when NULL.
  public func blob(_ index: Int) -> [UInt8]? {
    isNull(index) ? nil : bytes(Int32(index))
  }

  /// Whether column `index` is NULL.
  public func isNull(_ index: Int) -> Bool {
    sqlite3_column_type(statement, Int32(index)) == SQLITE_NULL
  }

  private func text(_ column: Int32) -> String {
    // Pointer first, then the count: that order gives the count of the UTF-8 form.
    guard let pointer = sqlite3_column_text(statement, column) else { return "" }
    let count = Int(sqlite3_column_bytes(statement, column))
    return String(decoding: UnsafeBufferPointer(start: pointer, count: count), as: UTF8.self)
  }

  private func bytes(_ column: Int32) -> [UInt8] {
    guard let pointer = sqlite3_column_blob(statement, column) else { return [] }
    let count = Int(sqlite3_column_bytes(statement, column))
    return Array(UnsafeRawBufferPointer(start: pointer, count: count))
  }
}
