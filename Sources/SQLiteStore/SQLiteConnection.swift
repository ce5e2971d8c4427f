import CSQLite

#if canImport(Glibc)
  import Glibc
#endif

/// One connection to an SQLite database file.
///
/// Threading: used by one thread at a time. It is opened with `SQLITE_OPEN_NOMUTEX`, so SQLite does no locking
/// of its own: the owner guarantees that two threads never use the connection (or its statements) at once.
/// `@unchecked Sendable` only so that it can be handed over once, e.g. to `SQLiteWriter`'s thread, after which
/// the previous owner must not touch it.
///
/// Statements: `cachedStatement(_:)` prepares a statement once per connection and SQL text; `execute(_:_:)`
/// and `query(_:_:)` go through that cache. Build SQL with bindings, not by interpolating values, or the cache
/// grows with every distinct text.
///
/// Errors are `SQLiteError` with the extended result code, SQLite's message and the SQL.
public final class SQLiteConnection: @unchecked Sendable {
  private var db: OpaquePointer?
  private var statementCache = StatementCache()
  /// What `sqlite3_wal_hook` calls after each commit (`setWALHook`), kept alive as long as the connection.
  private var walHook: WALHook?
  /// A savepoint name's statements (`savepoint(_:_:)`), made once: the writer opens one per job.
  var savepointSQL: [String: (begin: String, release: String, rollback: String)] = [:]
  /// The path the connection was opened with.
  public let path: String

  /// How to open the file.
  public enum OpenMode: Sendable {
    /// Read and write an existing database.
    case readWrite
    /// Read and write, creating the database file if it does not exist.
    case readWriteCreate
    /// Read only.
    case readOnly
  }

  /// SQLite's process-wide settings, made once before its first connection (`sqlite3_config` is refused once the
  /// library is initialised; then the settings stay SQLite's defaults, which are only slower):
  /// - no memory statistics: with them, every allocation and free SQLite makes takes a process-wide mutex and
  ///   updates counters (4% of the writer's instructions per one-mutation batch, callgrind). Nothing here reads
  ///   them (`sqlite3_memory_used`, `sqlite3_status64`), and no heap limit is set.
  static let configureLibrary: Void = { _ = pagesync_sqlite3_config_memstatus(0) }()

  /// `PRAGMA synchronous`: when SQLite waits for the disk.
  public enum Synchronous: String, Sendable {
    /// Never: a power loss can lose or corrupt recent transactions.
    case off = "OFF"
    /// In WAL mode, at checkpoints only: a power loss can lose the last transactions, never corrupts.
    case normal = "NORMAL"
    /// At every commit: a commit that returned survives a power loss.
    case full = "FULL"
  }

  /// How `transaction` begins: when the write lock is taken.
  public enum TransactionKind: String, Sendable {
    /// At the first write (a read may then fail to upgrade with `SQLITE_BUSY`).
    case deferred = "DEFERRED"
    /// At once (waits up to the busy timeout for other writers). The right kind for read-modify-write.
    case immediate = "IMMEDIATE"
    /// At once, and in rollback-journal mode also keeps readers out.
    case exclusive = "EXCLUSIVE"
  }

  /// Opens the database at `path`.
  ///
  /// A file this call creates gets `fileMode` exactly (owner-only by default), whatever the umask: it is created
  /// by us first, then opened by SQLite, so it never exists with wider permissions. SQLite gives the `-wal`,
  /// `-shm` and `-journal` files it creates later the permissions of the database file. An existing file keeps
  /// its permissions. `":memory:"`, `""` (a temporary database) and `file:` URIs are passed to SQLite as they are.
  public init(path: String, mode: OpenMode = .readWriteCreate, fileMode: mode_t = 0o600) throws(SQLiteError) {
    _ = Self.configureLibrary
    self.path = path
    var flags = SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_EXRESCODE
    switch mode {
    case .readWrite: flags |= SQLITE_OPEN_READWRITE
    case .readWriteCreate: flags |= SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE
    case .readOnly: flags |= SQLITE_OPEN_READONLY
    }
    let created = mode == .readWriteCreate ? try Self.createFile(path, mode: fileMode) : false
    var handle: OpaquePointer?
    let result = sqlite3_open_v2(path, &handle, flags, nil)
    guard result == SQLITE_OK, let handle else {
      let error = SQLiteError(result: result, connection: handle, sql: nil)
      // Even a failed open may allocate a handle: it must be closed.
      sqlite3_close_v2(handle)
      if created { unlink(path) }
      throw SQLiteError(extendedCode: error.extendedCode, message: "\(error.message): \(path)")
    }
    db = handle
  }

  /// Creates `path` with exactly `mode` unless it exists. Returns whether it created the file.
  private static func createFile(_ path: String, mode: mode_t) throws(SQLiteError) -> Bool {
    if path.isEmpty || path == ":memory:" || path.hasPrefix("file:") { return false }
    let fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, mode)
    if fd < 0 {
      let code = errno
      if code == EEXIST { return false }
      throw SQLiteError(
        extendedCode: SQLITE_CANTOPEN, message: "cannot create \(path): \(String(cString: strerror(code)))")
    }
    // The umask may have narrowed the mode given to open(2); set it exactly.
    fchmod(fd, mode)
    Glibc.close(fd)
    return true
  }

  deinit {
    close()
  }

  /// Finalizes the cached statements and closes the connection (`sqlite3_close_v2`: statements from `prepare`
  /// still alive keep SQLite's side open until they are released). Idempotent.
  public func close() {
    guard let db else { return }
    for statement in statementCache.removeAll() { statement.finalize() }
    sqlite3_close_v2(db)
    self.db = nil
    walHook = nil
  }

  /// Whether `close()` ran.
  public var isClosed: Bool { db == nil }

  /// The open handle, or a misuse error once closed.
  private func handle(_ sql: String?) throws(SQLiteError) -> OpaquePointer {
    guard let db else { throw .misuse("the connection is closed", sql: sql) }
    return db
  }

  // MARK: Configuration

  /// Sets, explicitly rather than trusting the build's defaults: the busy timeout (first, so that the other
  /// settings wait for other connections), the journal mode (`WAL`, or `DELETE` when `journalWAL` is false),
  /// `synchronous`, and `foreign_keys = ON`.
  ///
  /// Throws if the journal mode cannot be set (an in-memory database, a read-only file not already in WAL).
  public func configure(
    journalWAL: Bool = true, synchronous: Synchronous = .full, busyTimeoutMilliseconds: Int32 = 5000
  ) throws(SQLiteError) {
    sqlite3_busy_timeout(try handle(nil), busyTimeoutMilliseconds)
    let wanted = journalWAL ? "wal" : "delete"
    let sql = "PRAGMA journal_mode = \(wanted)"
    let rows = try query(sql)
    guard case .text(let mode)? = rows.first?.first, mode.lowercased() == wanted else {
      throw .misuse(
        "journal mode stays \(rows.first?.first ?? .null), not \(wanted)", sql: sql, code: SQLITE_ERROR)
    }
    try execute("PRAGMA synchronous = \(synchronous.rawValue)")
    try execute("PRAGMA foreign_keys = ON")
    // Savepoint sub-journals and sorter files in memory: they spill to a temporary file past 64 KiB otherwise,
    // which costs the broker's writer a pwrite per page in a large group.
    try execute("PRAGMA temp_store = MEMORY")
  }

  /// Calls `body` on the committing thread after each transaction this connection commits in WAL mode, with the
  /// handle and the pages now in the WAL (`sqlite3_wal_hook`). It replaces SQLite's automatic checkpoint on this
  /// connection (`PRAGMA wal_autocheckpoint`): `body` decides when to checkpoint. Set before any other thread uses
  /// the connection.
  func setWALHook(_ body: @escaping (OpaquePointer, Int) -> Void) {
    guard let db else { return }
    let hook = WALHook(body)
    walHook = hook
    sqlite3_wal_hook(
      db,
      { context, db, _, frames in
        Unmanaged<WALHook>.fromOpaque(context!).takeUnretainedValue().body(db!, Int(frames))
        return SQLITE_OK
      }, Unmanaged.passUnretained(hook).toOpaque())
  }

  /// A PASSIVE checkpoint of the main database (`sqlite3_wal_checkpoint_v2`): copies every WAL page no reader
  /// still needs into the file, waiting for no one. Returns the log's length and how much of it is now in the
  /// file, in pages; (0, 0) when another connection was checkpointing (`SQLITE_BUSY`: that one copies them).
  func checkpointPassive() throws(SQLiteError) -> (log: Int, checkpointed: Int) {
    try Self.checkpointPassive(try handle("wal_checkpoint"))
  }

  /// `checkpointPassive()` on a raw handle: the writer's, from inside its WAL hook (where the connection object is
  /// its caller's).
  static func checkpointPassive(_ db: OpaquePointer) throws(SQLiteError) -> (log: Int, checkpointed: Int) {
    var logFrames: Int32 = 0
    var checkpointed: Int32 = 0
    let result = sqlite3_wal_checkpoint_v2(db, nil, SQLITE_CHECKPOINT_PASSIVE, &logFrames, &checkpointed)
    if result == SQLITE_BUSY { return (0, 0) }
    guard result == SQLITE_OK else {
      throw SQLiteError(result: result, connection: db, sql: "wal_checkpoint")
    }
    return (Int(max(logFrames, 0)), Int(max(checkpointed, 0)))
  }

  // MARK: Statements

  /// Frees what SQLite can of this connection's memory (`sqlite3_db_release_memory`): the page cache's unused
  /// pages. They are read again from the file (the OS's cache) when next needed.
  public func releaseMemory() {
    guard let db else { return }
    sqlite3_db_release_memory(db)
  }

  /// Bytes this connection's page cache holds now (`SQLITE_DBSTATUS_CACHE_USED`): what `releaseMemory` frees,
  /// less the pages in use.
  public var cacheBytesUsed: Int {
    guard let db else { return 0 }
    var current: Int32 = 0
    var highwater: Int32 = 0
    sqlite3_db_status(db, SQLITE_DBSTATUS_CACHE_USED, &current, &highwater, 0)
    return Int(current)
  }

  /// Prepares one statement, not cached: it is finalized when released.
  public func prepare(_ sql: String) throws(SQLiteError) -> SQLiteStatement {
    try prepareOne(sql, persistent: false)
  }

  /// The statement for `sql`, prepared on first use and kept for the connection's life; reset, with its
  /// bindings cleared, each time it is returned. While that statement is inside `forEachRow` (or a `query`),
  /// a fresh uncached statement is returned instead, so nested use of the same SQL is safe.
  public func cachedStatement(_ sql: String) throws(SQLiteError) -> SQLiteStatement {
    if let statement = statementCache.find(sql) {
      if statement.isIterating { return try prepareOne(sql, persistent: false) }
      statement.reset()
      statement.clearBindings()
      return statement
    }
    let statement = try prepareOne(sql, persistent: true)
    statementCache.insert(sql, statement)
    return statement
  }

  /// Prepares exactly one statement; more than one (or none) in `sql` is an error.
  private func prepareOne(_ sql: String, persistent: Bool) throws(SQLiteError) -> SQLiteStatement {
    let db = try handle(sql)
    let flags = persistent ? UInt32(SQLITE_PREPARE_PERSISTENT) : 0
    var utf8 = sql.utf8CString
    return try utf8.withUnsafeMutableBufferPointer { (buffer) throws(SQLiteError) -> SQLiteStatement in
      let start = UnsafePointer(buffer.baseAddress!)
      let length = Int32(buffer.count - 1)
      var statement: OpaquePointer?
      var tail: UnsafePointer<CChar>?
      let result = sqlite3_prepare_v3(db, start, length, flags, &statement, &tail)
      guard result == SQLITE_OK else { throw SQLiteError(result: result, connection: db, sql: sql) }
      guard let statement else { throw .misuse("no statement in SQL", sql: sql) }
      if let tail, Self.hasStatement(db, tail) {
        sqlite3_finalize(statement)
        throw .misuse("more than one statement; use execute(_:) without bindings", sql: sql)
      }
      return SQLiteStatement(handle: statement, sql: sql)
    }
  }

  /// Whether the NUL-terminated SQL at `text` holds a statement (not only blanks, semicolons or comments).
  private static func hasStatement(_ db: OpaquePointer, _ text: UnsafePointer<CChar>) -> Bool {
    var cursor = text
    while cursor.pointee != 0 {
      switch UInt8(bitPattern: cursor.pointee) {
      case UInt8(ascii: " "), UInt8(ascii: "\t"), UInt8(ascii: "\n"), UInt8(ascii: "\r"), UInt8(ascii: ";"):
        cursor += 1
      default:
        // Something else, perhaps only a comment: let SQLite decide.
        var statement: OpaquePointer?
        let result = sqlite3_prepare_v2(db, cursor, -1, &statement, nil)
        sqlite3_finalize(statement)
        return result != SQLITE_OK || statement != nil
      }
    }
    return false
  }

  // MARK: Running SQL

  /// Runs every statement in `sql` (no bindings), discarding any rows. For schema scripts and pragmas. The
  /// statements are not cached. Stops at the first failing statement; the error names it.
  public func execute(_ sql: String) throws(SQLiteError) {
    let db = try handle(sql)
    var utf8 = sql.utf8CString
    try utf8.withUnsafeMutableBufferPointer { (buffer) throws(SQLiteError) in
      var cursor: UnsafePointer<CChar>? = UnsafePointer(buffer.baseAddress!)
      while let start = cursor, start.pointee != 0 {
        var statement: OpaquePointer?
        let result = sqlite3_prepare_v2(db, start, -1, &statement, &cursor)
        guard result == SQLITE_OK else { throw SQLiteError(result: result, connection: db, sql: sql) }
        guard let statement else { continue }  // blanks or a comment
        defer { sqlite3_finalize(statement) }
        while true {
          let step = sqlite3_step(statement)
          if step == SQLITE_DONE { break }
          if step != SQLITE_ROW {
            let text = sqlite3_sql(statement).map { String(cString: $0) } ?? sql
            throw SQLiteError(result: step, connection: db, sql: text)
          }
        }
      }
    }
  }

  /// Runs one statement with `bindings`, discarding any rows. Cached.
  public func execute(_ sql: String, _ bindings: [SQLiteValue]) throws(SQLiteError) {
    let statement = try cachedStatement(sql)
    try statement.bind(bindings)
    defer { statement.reset() }
    while try statement.step() {}
  }

  /// Runs one statement with `bindings` and returns all its rows. Cached.
  public func query(_ sql: String, _ bindings: [SQLiteValue] = []) throws(SQLiteError) -> [[SQLiteValue]] {
    let statement = try cachedStatement(sql)
    try statement.bind(bindings)
    statement.isIterating = true
    defer {
      statement.isIterating = false
      statement.reset()
    }
    let columns = statement.columnCount
    var rows: [[SQLiteValue]] = []
    while try statement.step() {
      var row: [SQLiteValue] = []
      row.reserveCapacity(columns)
      for index in 0..<columns { row.append(statement.column(index)) }
      rows.append(row)
    }
    return rows
  }

  // MARK: State

  /// The rowid of the last successful INSERT on this connection.
  public var lastInsertRowID: Int64 { db.map { sqlite3_last_insert_rowid($0) } ?? 0 }

  /// Rows changed by the last INSERT, UPDATE or DELETE on this connection.
  public var changes: Int { db.map { Int(sqlite3_changes64($0)) } ?? 0 }

  /// Rows changed by every INSERT, UPDATE and DELETE since the connection opened (`sqlite3_total_changes64`):
  /// equal before and after some work means the work wrote nothing.
  public var totalChanges: Int { db.map { Int(sqlite3_total_changes64($0)) } ?? 0 }

  /// Whether a transaction is open (SQLite is not in autocommit mode).
  public var isInTransaction: Bool { db.map { sqlite3_get_autocommit($0) == 0 } ?? false }

  /// `PRAGMA integrity_check`: `["ok"]` for a sound database, otherwise one line per problem found.
  public func integrityCheck() throws(SQLiteError) -> [String] {
    try query("PRAGMA integrity_check").map { row in
      if case .text(let line)? = row.first { return line }
      return "\(row.first ?? .null)"
    }
  }
}

/// Prepared statements by their SQL text: an open-addressed table keyed by a hash of the text's length and 48 of
/// its bytes (sixteen from each end and from the middle), read as words, without `Hasher`. A statement is looked up for
/// every query (a one-mutation batch runs about ten), and `Dictionary`'s SipHash of a key over those bytes, with
/// its probing, cost 9,500 of the writer's 140,000 instructions per batch (callgrind). Statements of one shape
/// differ in their tables, columns and conditions, which those bytes reach in every statement of the stores;
/// texts that hash alike only cost a comparison, and a literal compared with itself is equal at once (the same
/// storage). Statements are never removed: the stores' SQL is a fixed set.
struct StatementCache {
  private struct Slot {
    let hash: UInt64
    let sql: String
    let statement: SQLiteStatement
  }

  private var slots: [Slot?] = Array(repeating: nil, count: 64)
  private(set) var count = 0

  /// The statement prepared for `sql`, if there is one.
  func find(_ sql: String) -> SQLiteStatement? {
    let hash = Self.hash(sql)
    let mask = slots.count - 1
    var index = Int(truncatingIfNeeded: hash) & mask
    while let slot = slots[index] {
      if slot.hash == hash && slot.sql == sql { return slot.statement }
      index = (index + 1) & mask
    }
    return nil
  }

  /// Keeps `statement` for `sql` (which it does not hold yet).
  mutating func insert(_ sql: String, _ statement: SQLiteStatement) {
    if (count + 1) * 2 > slots.count {
      let old = slots
      slots = Array(repeating: nil, count: old.count * 2)
      for case let slot? in old { place(slot) }
    }
    place(Slot(hash: Self.hash(sql), sql: sql, statement: statement))
    count += 1
  }

  private mutating func place(_ slot: Slot) {
    let mask = slots.count - 1
    var index = Int(truncatingIfNeeded: slot.hash) & mask
    while slots[index] != nil { index = (index + 1) & mask }
    slots[index] = slot
  }

  /// Every statement kept, and none after.
  mutating func removeAll() -> [SQLiteStatement] {
    let statements = slots.compactMap { $0?.statement }
    slots = Array(repeating: nil, count: 64)
    count = 0
    return statements
  }

  /// The length and three runs of up to sixteen bytes, read eight at a time, each word multiplied in and its
  /// high bits folded down, so that the table's low bits depend on every byte hashed.
  static func hash(_ sql: String) -> UInt64 {
    if let hash = sql.utf8.withContiguousStorageIfAvailable({ hash(UnsafeRawBufferPointer($0)) }) {
      return hash
    }
    return Array(sql.utf8).withUnsafeBytes { hash($0) }
  }

  private static func hash(_ bytes: UnsafeRawBufferPointer) -> UInt64 {
    let count = bytes.count
    // Up to eight bytes from `offset`, zero-padded past the end.
    func word(at offset: Int) -> UInt64 {
      if offset + 8 <= count { return bytes.loadUnaligned(fromByteOffset: offset, as: UInt64.self) }
      var value: UInt64 = 0
      var index = offset
      while index < count {
        value |= UInt64(bytes[index]) << (8 * UInt64(index - offset))
        index += 1
      }
      return value
    }
    let multiplier: UInt64 = 0x9e37_79b9_7f4a_7c15
    var hash = UInt64(truncatingIfNeeded: count) &* multiplier
    let middle = max(0, count / 2 - 8)
    let end = max(0, count - 16)
    func mix(_ offset: Int) {
      hash = (hash ^ word(at: offset)) &* multiplier
      hash ^= hash >> 29
    }
    mix(0)
    mix(8)
    mix(middle)
    mix(middle + 8)
    mix(end)
    mix(end + 8)
    return hash
  }
}

/// The body of a connection's WAL hook, boxed for C.
private final class WALHook {
  let body: (OpaquePointer, Int) -> Void
  init(_ body: @escaping (OpaquePointer, Int) -> Void) { self.body = body }
}
