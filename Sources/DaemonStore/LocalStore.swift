import DaemonCore
import FoundationEssentials
import SQLiteStore
import StrictJSON
import SyncModel

/// The device daemon's local store: the offline set (`offline_page`, `offline_action`), the local copies of pages
/// and blocks, the mutation queue and the sync metadata, in one SQLite file (DESIGN.md, "The daemon's local
/// store").
///
/// Threading: one connection, used by one thread (the daemon's loop thread). Not `Sendable`: the connection is
/// opened without SQLite's own mutex, so two threads must never use one store.
///
/// Every method that writes more than one row does so in one IMMEDIATE transaction: a crash (kill -9, power loss)
/// leaves either all of it or none of it.
public final class LocalStore {
  let connection: SQLiteConnection
  let encoder: JSONEncoder = {
    let encoder = JSONEncoder()
    encoder.outputFormatting = [.sortedKeys]
    return encoder
  }()
  let decoder = JSONDecoder()
  /// The first error a structure read (`OfflineStructure`'s non-throwing methods) hit since
  /// `readingStructure` began; `readingStructure` throws it. See LocalStore+Structure.swift.
  var structureReadError: (any Error)?

  /// This device's client id: random, made when the store file was created, and replaced by a new random one when
  /// the broker answers that another copy of this store used its mutation ids (`id_reused`: a store restored
  /// from a backup, a cloned image; see `settle`).
  public internal(set) var clientID: EntityID
  /// How far ahead of the wall clock the device's clock may be (`[sync] clock_ahead_seconds`): a broker's clock
  /// beyond it is not merged, a stored clock beyond it is dropped for the wall clock (`ClockBound`).
  public var clockBound = ClockBound.default

  /// Opens (creating it owner-only, 0600, if needed) and migrates the store at `path`.
  ///
  /// WAL with `synchronous = FULL`: a local edit is acknowledged to the user once its transaction commits, and
  /// DESIGN promises that nothing acknowledged is lost, across power loss too. NORMAL would only sync at
  /// checkpoints, so a power cut could lose the last commits; FULL syncs the WAL at every commit.
  ///
  /// `cacheKiB`: the most memory SQLite's page cache may hold (`PRAGMA cache_size`), `[store] cache_kib`.
  public init(path: String, cacheKiB: Int = LocalStore.defaultCacheKiB) throws {
    let connection = try SQLiteConnection(path: path, mode: .readWriteCreate, fileMode: 0o600)
    try connection.configure(journalWAL: true, synchronous: .full)
    try connection.execute("PRAGMA cache_size = -\(max(cacheKiB, 1))")
    _ = try SQLiteMigrator(Self.migrations).migrate(connection)
    try connection.transaction(.immediate) {
      let seeds: [(String, String)] = [
        ("client_id", EntityID.random().rawValue), ("next_mutation_id", "1"),
        ("hlc", HLCTimestamp.zero.description),
      ]
      for (key, value) in seeds {
        try connection.execute(
          "INSERT INTO sync_meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO NOTHING",
          [.text(key), .text(value)])
      }
    }
    self.connection = connection
    guard let text = try Self.meta("client_id", connection) else {
      throw LocalStoreError.missingMeta("client_id")
    }
    guard let client = try? EntityID(validating: text) else {
      throw LocalStoreError.corruptValue(table: "sync_meta", column: "client_id", value: text)
    }
    clientID = client
  }

  /// `[store] cache_kib`'s default: 512 KiB of page cache, a quarter of SQLite's own default (a first sync of
  /// 10,000 pages filled SQLite's 2 MiB; docs/benchmarks.md, issue #22 round 13).
  public static let defaultCacheKiB = 512

  /// This connection's page cache limit in KiB (`PRAGMA cache_size`, negative in SQLite's terms).
  public func cacheKiB() throws -> Int {
    guard case .integer(let size)? = try connection.query("PRAGMA cache_size").first?.first else { return 0 }
    return Int(size < 0 ? -size : size)
  }

  /// Closes the connection; the store must not be used afterwards. Idempotent.
  public func close() {
    connection.close()
  }

  /// Gives SQLite's unused cache pages back (the daemon calls it once a burst of work is over).
  public func releaseMemory() {
    connection.releaseMemory()
  }

  /// This connection's `PRAGMA synchronous` (2 is FULL): a per-connection setting no other connection can see,
  /// so the tests ask the store itself.
  func synchronousSetting() throws -> SQLiteValue? {
    try connection.query("PRAGMA synchronous").first?.first
  }

  // MARK: Sync metadata

  static func meta(_ key: String, _ connection: SQLiteConnection) throws -> String? {
    guard
      case .text(let value)? = try connection.query("SELECT value FROM sync_meta WHERE key = ?", [.text(key)])
        .first?.first
    else { return nil }
    return value
  }

  func meta(_ key: String) throws -> String? { try Self.meta(key, connection) }

  func setMeta(_ key: String, _ value: String) throws {
    try connection.execute(
      "INSERT INTO sync_meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
      [.text(key), .text(value)])
  }

  /// What the broker's mutation ids are below the queue's row ids (`mutation_id_base`, 0 until the client id is
  /// replaced): the queue's ids go on growing on this device, and the new client's ids start at 1 on the broker.
  func mutationIDBase() throws -> UInt64 {
    try metaNumber("mutation_id_base") ?? 0
  }

  /// A `sync_meta` value that is a number, nil when absent.
  func metaNumber(_ key: String) throws -> UInt64? {
    guard let text = try meta(key) else { return nil }
    guard let value = UInt64(text) else {
      throw LocalStoreError.corruptValue(table: "sync_meta", column: key, value: text)
    }
    return value
  }

  /// The last value of the hybrid logical clock (persisted with every stamp, so it never goes back across
  /// restarts).
  public func clockValue() throws -> HLCTimestamp {
    guard let text = try meta("hlc") else { throw LocalStoreError.missingMeta("hlc") }
    guard let value = try? HLCTimestamp(parsing: text) else {
      throw LocalStoreError.corruptValue(table: "sync_meta", column: "hlc", value: text)
    }
    return value
  }

  /// Records a sync attempt's start time (`lastSyncAttempt`).
  public func recordSyncAttempt(nowMillis: UInt64) throws {
    try setMeta("lastSyncAttempt", String(nowMillis))
  }

  /// Records a successful sync (`lastSuccessfulSync`): a catch-up that completed, or a push that was answered
  /// (`acknowledge` records it too). Milliseconds, for display only: no decision is taken on the device's clock.
  public func markSynced(nowMillis: UInt64) throws {
    try setMeta("lastSuccessfulSync", String(nowMillis))
  }

  /// The broker store's epoch the local times refer to, nil before the first answer. When the broker reports
  /// another epoch, every `last_downloaded_timestamp` is meaningless there (the fetch answers with whole pages).
  public func epoch() throws -> String? {
    try meta("epoch")
  }

  /// Records the broker's epoch (from a catch-up or fetch answer; `acknowledge` records a batch answer's).
  public func setEpoch(_ epoch: String) throws {
    try setMeta("epoch", epoch)
  }

  // MARK: Status

  /// The counts `pagesync status` reports.
  public struct Status: Hashable, Sendable {
    /// Queued mutations not yet acknowledged.
    public var pendingMutations: Int
    /// Mutations the broker rejected, kept for recovery.
    public var failedMutations: Int
    /// Pages and databases in the offline set.
    public var offlinePages: Int
    /// Offline pages the broker said this device may not see (`OfflineEntry.missing`).
    public var missingPages: Int
    /// When the last batch was acknowledged or the last sync completed (milliseconds), nil if never.
    public var lastSuccessfulSync: UInt64?
    /// When the last sync attempt started (milliseconds), nil if never.
    public var lastSyncAttempt: UInt64?
    /// When the broker last answered a batch that carried mutations (milliseconds), nil if never.
    public var lastMutationAt: UInt64?
  }

  /// Queued mutations not yet acknowledged (what `status` counts as `pendingMutations`).
  public func pendingMutationCount() throws -> Int {
    guard
      case .integer(let value)? = try connection.query(
        "SELECT count(*) FROM mutation_queue WHERE status = 'pending'"
      ).first?.first
    else { return 0 }
    return Int(value)
  }

  /// The current `Status`, from the queue, the offline set and `sync_meta`.
  public func status() throws -> Status {
    func count(_ sql: String) throws -> Int {
      guard case .integer(let value)? = try connection.query(sql).first?.first else { return 0 }
      return Int(value)
    }
    return Status(
      pendingMutations: try pendingMutationCount(),
      failedMutations: try count("SELECT count(*) FROM mutation_queue WHERE status = 'rejected'"),
      offlinePages: try count("SELECT count(*) FROM offline_page"),
      missingPages: try count("SELECT count(*) FROM missing_page"),
      lastSuccessfulSync: try metaNumber("lastSuccessfulSync"),
      lastSyncAttempt: try metaNumber("lastSyncAttempt"),
      lastMutationAt: try metaNumber("lastMutationAt"))
  }

  // MARK: Decoding helpers

  /// `value` as an SQLite integer; `numberOutOfRange` (never a trap) above `Int64.max`: the broker's numbers
  /// are checked when its answers are read, and this keeps any other way in from crashing the daemon.
  func storedInteger(_ value: UInt64, _ what: @autoclosure () -> String) throws -> SQLiteValue {
    guard let stored = Int64(exactly: value) else { throw LocalStoreError.numberOutOfRange(what(), value) }
    return .integer(stored)
  }

  func entityID(_ value: SQLiteValue, table: String, column: String) throws -> EntityID {
    guard case .text(let text) = value, let id = try? EntityID(validating: text) else {
      throw LocalStoreError.corruptValue(table: table, column: column, value: "\(value)")
    }
    return id
  }

  func optionalEntityID(_ value: SQLiteValue, table: String, column: String) throws -> EntityID? {
    if value == .null { return nil }
    return try entityID(value, table: table, column: column)
  }

  func json<T: Encodable>(_ value: T) throws -> String {
    String(decoding: try encoder.encode(value), as: UTF8.self)
  }

  /// A stored JSON list of ids (`rows`, `databases`), read with StrictJSON: the offline walk reads one per
  /// database and page it visits, thousands in a first sync, and Foundation's decoder is code (resident at the
  /// sync's peak) and time it need not spend.
  func decodeIDs(_ value: SQLiteValue, table: String, column: String) throws -> [EntityID] {
    guard case .text(var text) = value,
      let ids = try? text.withUTF8({ bytes throws(JSONReadError) in
        try JSONReader.decode([EntityID].self, from: bytes)
      })
    else {
      throw LocalStoreError.corruptValue(table: table, column: column, value: "\(value)")
    }
    return ids
  }

  func decode<T: Decodable>(_ type: T.Type, _ value: SQLiteValue, table: String, column: String) throws -> T {
    guard case .text(let text) = value, let decoded = try? decoder.decode(type, from: Data(text.utf8)) else {
      throw LocalStoreError.corruptValue(table: table, column: column, value: "\(value)")
    }
    return decoded
  }
}
