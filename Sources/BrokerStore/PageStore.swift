import FoundationEssentials
import SQLiteStore
import StoreInterface
import SyncModel

/// The broker's authoritative page store over one connection of the store interface: SQLite or PostgreSQL
/// (`StoreConnection`; the SQL is shared, the schema has a migration list per engine).
///
/// Threading: owned by the thread that runs its connection (the broker's writer thread); never the loop thread.
/// Writes are expected inside a transaction the caller opened (`SQLiteWriter` groups batches into one, each
/// batch in a savepoint). A mutation has no savepoint of its own: every rejection is decided before its first
/// write, so a rejected one leaves nothing behind (`apply` checks that rule on every rejection).
public final class PageStore {
  public let connection: any StoreConnection
  /// A random id made when the store was created: a restored or replaced store has another, which tells clients
  /// that sequence numbers they hold mean nothing here.
  public let epoch: String
  /// The sequence of the last batch that changed something. Read from the store, except inside a writer group
  /// that keeps it (`defersGroupWrites`): then the group's newest, which the group forgets when its transaction
  /// ends, so a group that rolls back leaves nothing stale behind.
  public var sequence: UInt64 { (try? currentSequence()) ?? 0 }
  /// The seed API's cursor (`GET /v1/sync`'s `latest`, `mutationsSince`): a read from this cursor misses no page
  /// changed by a commit it did not see. SQLite: the sequence (one writer commits in sequence order).
  /// PostgreSQL: the oldest transaction still running when the read's snapshot was taken
  /// (`pg_snapshot_xmin`), compared with each page's `change_xid`: every transaction below it has ended, so
  /// nothing that commits later lands below it. Opaque to clients; read it in the same transaction as the pages.
  public var syncCursor: UInt64 {
    switch connection.engine {
    case .sqlite: return sequence
    case .postgres:
      guard
        case .integer(let xmin)? = try? connection.query("SELECT pg_snapshot_xmin(pg_current_snapshot())")
          .first?.first
      else { return 0 }
      return UInt64(clamping: xmin)
    }
  }

  /// The query that reads the store's sequence on `engine` (the health check's too).
  public static func sequenceSQL(_ engine: StoreEngine) -> String {
    switch engine {
    case .sqlite: "SELECT value FROM meta WHERE key = 'sequence'"
    // The newest committed batch that changed something (the log keeps at least the newest batches; numbers
    // `batch_sequence` handed to batches that changed nothing, or are not committed yet, are not sequences).
    case .postgres: "SELECT coalesce(max(seq), 0) FROM change_log"
    }
  }

  func currentSequence() throws -> UInt64 {
    if let kept = jobWrites.sequence ?? groupWrites.sequence { return kept }
    return switch try connection.query(Self.sequenceSQL(connection.engine)).first?.first {
    case .integer(let value)?: UInt64(clamping: value)
    case .text(let value)?: UInt64(value) ?? 0
    default: 0
    }
  }

  /// The sequence a batch that changes something takes: the next after the last (SQLite, whose one writer
  /// stores it at the batch's end, or at its group's end when `defersGroupWrites`), or PostgreSQL's `nextval`, taken under the batch's workspace lock so that
  /// within a workspace sequence order is commit order.
  func nextSequence() throws -> UInt64 {
    switch connection.engine {
    case .sqlite: return try (jobWrites.sequence ?? groupWrites.sequence ?? metaNumber("sequence")) + 1
    case .postgres:
      guard case .integer(let value)? = try connection.query("SELECT nextval('batch_sequence')").first?.first
      else { return 0 }
      return UInt64(clamping: value)
    }
  }
  /// The change log holds every change after this sequence; a delta from an older time is a snapshot.
  public var logFloor: UInt64 { (try? metaNumber("log_floor")) ?? 0 }
  public var limits: MutationLimits
  /// Most mutations one batch may carry.
  public var maxMutationsPerBatch = 1000
  /// How far (ms) a mutation's time may be ahead of the broker's wall clock; beyond it, `clock_ahead`.
  public var maxClockAheadMillis: UInt64 = 86_400_000
  /// The most pages from a top-level page down to any page, both counted (`[limits] tree_depth`); a create or
  /// move beyond it is rejected `too_deep`.
  public var maxTreeDepth = 1000
  /// The work one batch may do, in `BatchWork` units (`[limits] batch_work`): once a batch has done this much,
  /// the store takes none of its later mutations (the answer covers the first ones; the client sends the rest
  /// again), so one batch holds the writer thread for a bounded time.
  public var maxBatchWork = 100_000
  /// How many of each client's newest mutation ids keep their digest (`[limits] mutation_digests_per_client`):
  /// a re-send within them is checked against what the id carried before (`id_reused`); 0 records and checks none.
  public var digestsPerClient: UInt64 = 10_000

  /// Whether the store's sequence and each client's row are written once per writer group rather than once per
  /// batch (`defersWritesToGroupEnd`): the batches of a group commit together, so what they write to one row is
  /// needed only as the group's last batch left it. Reads inside the group see the kept values.
  public private(set) var defersGroupWrites = false
  /// Kept for the end of the group: by the jobs that ended kept (`jobEnded(kept: true)`), and by the running one.
  var groupWrites = GroupWrites()
  var jobWrites = GroupWrites()
  /// Rows the writer keeps between its batches when `defersGroupWrites` (`WriterCache`).
  var writerCache = WriterCache()
  /// The most page rows, the most client rows and the most property stamps `writerCache` holds (`[store]
  /// writer_cache_rows`); past it, that part starts over. 0 keeps none.
  public var writerCacheRows = 10_000

  let encoder: JSONEncoder = {
    let encoder = JSONEncoder()
    encoder.outputFormatting = [.sortedKeys]
    return encoder
  }()
  let decoder = JSONDecoder()

  /// Opens the store on `connection`, migrating it to the newest schema, and creating its epoch on first use.
  public init(connection: any StoreConnection, limits: MutationLimits = MutationLimits()) throws {
    self.connection = connection
    self.limits = limits
    try PageStore.migrate(connection)
    try PageStore.backfillTextStates(connection)
    try PageStore.countPageSizes(connection)
    try PageStore.backfillHeights(connection)
    if let epoch = try PageStore.readMeta(connection)["epoch"] {
      self.epoch = epoch
    } else {
      // Brokers sharing a PostgreSQL store may open it at once: the first insert wins, all read its epoch.
      try connection.execute(
        "INSERT INTO meta (key, value) VALUES ('epoch', ?) ON CONFLICT (key) DO NOTHING",
        [.text(Crypto.randomHex(16))])
      guard let epoch = try PageStore.readMeta(connection)["epoch"] else { throw PageStoreOpenError.noEpoch }
      self.epoch = epoch
    }
  }

  /// A store that only reads, on a connection of its own to a file that a writing `PageStore` opened first
  /// (migrated, with an epoch): the broker's reader threads. It migrates and writes nothing.
  public init(reading connection: any StoreConnection) throws {
    self.connection = connection
    limits = MutationLimits()
    guard let epoch = try PageStore.readMeta(connection)["epoch"] else {
      throw PageStoreOpenError.noEpoch
    }
    self.epoch = epoch
  }

  func metaNumber(_ key: String) throws -> UInt64 {
    guard
      case .text(let value)? = try connection.query("SELECT value FROM meta WHERE key = ?", [.text(key)])
        .first?
        .first
    else { return 0 }
    return UInt64(value) ?? 0
  }

  private static func readMeta(_ connection: any StoreConnection) throws -> [String: String] {
    var meta: [String: String] = [:]
    for row in try connection.query("SELECT key, value FROM meta") {
      if case .text(let key) = row[0], case .text(let value) = row[1] { meta[key] = value }
    }
    return meta
  }

  func setMeta(_ key: String, _ value: String) throws {
    try connection.execute(
      "INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
      [.text(key), .text(value)])
  }

  /// Forgets change-log entries at or below `sequence - keep`; deltas from before then become snapshots.
  /// Returns how many entries went.
  @discardableResult
  public func pruneLog(keepingSequences keep: UInt64) throws -> Int {
    let sequence = try currentSequence()
    guard sequence > keep else { return 0 }
    let floor = sequence - keep
    guard floor > (try metaNumber("log_floor")) else { return 0 }
    try connection.execute("DELETE FROM change_log WHERE seq <= ?", [.integer(Int64(floor))])
    let removed = connection.changes
    try setMeta("log_floor", String(floor))
    return removed
  }

  // MARK: Encoding helpers

  func json<T: Encodable>(_ value: T) -> String {
    // Encoding our own value types cannot fail.
    String(decoding: try! encoder.encode(value), as: UTF8.self)
  }

  func decode<T: Decodable>(_ type: T.Type, _ text: String?) -> T? {
    guard let text else { return nil }
    return try? decoder.decode(type, from: Data(text.utf8))
  }
}

/// Small crypto helpers without Foundation's `UUID` (which would pull in more than FoundationEssentials).
enum Crypto {
  static func randomHex(_ bytes: Int) -> String {
    var generator = SystemRandomNumberGenerator()
    let hex = Array("0123456789abcdef".utf8)
    var out: [UInt8] = []
    for _ in 0..<bytes {
      let byte = UInt8.random(in: 0...255, using: &generator)
      out.append(hex[Int(byte >> 4)])
      out.append(hex[Int(byte & 0x0F)])
    }
    return String(decoding: out, as: UTF8.self)
  }
}

/// Why a store could not be opened.
public enum PageStoreOpenError: Error, CustomStringConvertible {
  /// The store has no epoch: a reader opened it before any writer created it.
  case noEpoch

  public var description: String {
    switch self {
    case .noEpoch: "the store has no epoch: open it for writing first"
    }
  }
}

/// What a group's batches write once for the whole group (`PageStore.defersGroupWrites`).
struct GroupWrites {
  /// The sequence of the group's last batch that changed something (the store's `meta` `sequence`).
  var sequence: UInt64?
  /// Each client's row as the group's last batch of that client left it.
  var clients: [EntityID: ClientRow] = [:]

  /// A kept job's writes join the group's: the job ran after every write already kept.
  mutating func absorb(_ job: GroupWrites) {
    if let sequence = job.sequence { self.sequence = sequence }
    for (client, row) in job.clients { clients[client] = row }
  }
}

/// Rows the SQLite writer read or wrote, kept between its batches so that the next batch need not read them again
/// (`PageStore.defersGroupWrites` only: SQLite's one writer is the only code that changes them, so what it last
/// saw is what is stored; on PostgreSQL other brokers write them).
/// - Page rows (`PageRow`: what a mutation checks) as `loadPage` read them; a mutation that writes one of their
///   columns drops the row (`forgetPage`), read again when next needed. A row read after a job's writes may hold
///   them, so a job or group that rolls back drops every page row.
/// - Client rows as the last committed group left them: `groupWillCommit` writes the group's, which become the
///   cache's only once COMMIT returned.
/// - Each property's stamp and stored size (what `set_property` checks and counts before it writes), as read or
///   as last written; like page rows, all dropped when a job or group rolls back.
struct WriterCache {
  var pages: [EntityID: PageRow] = [:]
  var clients: [EntityID: ClientRow] = [:]
  var properties: [PropertyKey: PropertyState] = [:]
  /// The client rows the committing group wrote.
  var committing: [EntityID: ClientRow] = [:]

  /// Drops what a job or group that rolled back may have left: rows read after its writes, its own writes.
  mutating func forgetRolledBack() {
    pages.removeAll(keepingCapacity: true)
    properties.removeAll(keepingCapacity: true)
  }
}

/// A property of a page, as the writer's cache keys it.
struct PropertyKey: Hashable {
  var page: EntityID
  var name: String
}

/// A stored property's stamp and its share of the page's stored size (its name's and value's bytes; 0 for a
/// value of null).
struct PropertyState {
  var stamp: String
  var bytes: Int
}

/// A client's row: its user, its last applied mutation id and the digests of its newest ids.
struct ClientRow {
  var user: String
  var last: UInt64
  var recentDigests: SQLValue
}

extension PageStore: StoreGroupObserver {
  /// Asks the store to keep its sequence and clients' rows for the end of each writer group. SQLite only: its
  /// one writer holds the database's write lock for the whole group. On PostgreSQL each batch writes its client's
  /// row at once (row locks are part of how two brokers' groups order themselves: docs/architecture.md).
  /// Only for a store whose connection a `StoreWriter` runs with this store as its observer, which tells it where
  /// groups end; otherwise the kept writes would never be written.
  public func defersWritesToGroupEnd() {
    defersGroupWrites = connection.engine == .sqlite
  }

  public func jobEnded(kept: Bool) {
    if kept {
      groupWrites.absorb(jobWrites)
    } else {
      writerCache.forgetRolledBack()
    }
    jobWrites = GroupWrites()
  }

  public func groupWillCommit() throws {
    defer { groupWrites = GroupWrites() }
    if let sequence = groupWrites.sequence { try setMeta("sequence", String(sequence)) }
    guard !groupWrites.clients.isEmpty else { return }
    let upsert = try connection.statement(Self.clientUpsertSQL)
    for (client, row) in groupWrites.clients.sorted(by: { $0.key.rawValue < $1.key.rawValue }) {
      try upsert.bind([.text(client.rawValue), .text(row.user), .integer(Int64(row.last)), row.recentDigests])
      _ = try upsert.step()
      upsert.reset()
    }
    writerCache.committing = groupWrites.clients
  }

  public func groupEnded(committed: Bool) {
    groupWrites = GroupWrites()
    jobWrites = GroupWrites()
    if committed {
      if writerCache.clients.count + writerCache.committing.count > writerCacheRows {
        writerCache.clients.removeAll(keepingCapacity: true)
      }
      if writerCacheRows > 0 { writerCache.clients.merge(writerCache.committing) { $1 } }
    } else {
      writerCache.forgetRolledBack()
    }
    writerCache.committing = [:]
  }

  /// How many page rows, client rows and property stamps the writer's cache holds now.
  public var writerCacheCounts: (pages: Int, clients: Int, properties: Int) {
    (writerCache.pages.count, writerCache.clients.count, writerCache.properties.count)
  }

  /// A property's stamp and stored size: from the writer's cache, or read (and kept); nil if it was never set.
  func propertyState(_ key: PropertyKey) throws -> PropertyState? {
    if defersGroupWrites, let kept = writerCache.properties[key] { return kept }
    let statement = try connection.statement(
      """
      SELECT stamp, coalesce(length(CAST(name AS BLOB)) + length(CAST(value AS BLOB)), 0) FROM property
      WHERE page_id = ? AND name = ?
      """)
    try statement.bind([.text(key.page.rawValue), .text(key.name)])
    defer { statement.reset() }
    guard try statement.step() else { return nil }
    let state = PropertyState(stamp: statement.string(0) ?? "", bytes: Int(statement.int64(1)))
    cacheProperty(key, state)
    return state
  }

  /// Keeps a property's stamp and size as read, or as a mutation just wrote them.
  func cacheProperty(_ key: PropertyKey, _ state: PropertyState) {
    guard defersGroupWrites, writerCacheRows > 0 else { return }
    if writerCache.properties.count >= writerCacheRows, writerCache.properties[key] == nil {
      writerCache.properties.removeAll(keepingCapacity: true)
    }
    writerCache.properties[key] = state
  }

  /// Keeps a page row read from the store in the writer's cache, if it keeps one.
  func cachePage(_ row: PageRow) {
    guard defersGroupWrites, writerCacheRows > 0 else { return }
    if writerCache.pages.count >= writerCacheRows { writerCache.pages.removeAll(keepingCapacity: true) }
    writerCache.pages[row.id] = row
  }

  /// Changes a page row the writer's cache holds as a mutation changes it in the store.
  func updateCachedPage(_ id: EntityID, _ change: (inout PageRow) -> Void) {
    // One lookup, the row changed in place (a test for the key, then a forced subscript, looked it up twice).
    guard defersGroupWrites, let index = writerCache.pages.index(forKey: id) else { return }
    change(&writerCache.pages.values[index])
  }

  /// Drops a page row from the writer's cache: a mutation is writing one of its columns.
  func forgetPage(_ id: EntityID) {
    if defersGroupWrites { writerCache.pages[id] = nil }
  }

  static let clientUpsertSQL = """
    INSERT INTO client (id, user_id, last_mutation_id, recent_digests) VALUES (?, ?, ?, ?)
    ON CONFLICT (id) DO UPDATE SET last_mutation_id = excluded.last_mutation_id,
      recent_digests = excluded.recent_digests
    """
}
