import SQLiteStore
import SyncModel

/// The digests of one client's recent mutation ids (`Mutation.contentDigest`), as one batch reads and writes
/// them. 64 ids to a chunk, a chunk a blob of 64 little-endian 64-bit digests (0 for none): the chunk of the
/// client's newest ids lives in its `client` row (`recent_digests`), which every batch rewrites anyway, and older
/// chunks in `mutation_digest`, one row each, written once when the client's ids leave them. So a batch of new
/// ids costs no statement of its own; a row a chunk kept in a table of their own cost a tenth of the writer
/// thread in W1 (10-mutation batches).
///
/// Kept: at least the client's newest `PageStore.digestsPerClient` ids (whole chunks: up to 63 more). Used
/// inside the batch's transaction, on the writer thread.
struct ClientDigests {
  static let idsPerChunk: UInt64 = 64
  static let chunkBytes = Int(idsPerChunk) * 8

  let client: EntityID
  /// The chunk the client row holds: that of its last id.
  private var recent: UInt64
  /// The chunks read or written by this batch, as stored (`chunkBytes` each).
  private var chunks: [UInt64: [UInt8]] = [:]
  /// Chunks this batch wrote to (one or two: a batch's ids are consecutive).
  private var changed: [UInt64] = []

  /// `last`: the client's last applied id; `recentDigests`: its row's `recent_digests`.
  init(client: EntityID, last: UInt64, recentDigests: SQLiteValue?) {
    self.client = client
    recent = last / Self.idsPerChunk
    if case .blob(let bytes)? = recentDigests, bytes.count == Self.chunkBytes { chunks[recent] = bytes }
  }

  /// A digest as stored: never 0, which marks an id without one.
  static func stored(_ digest: UInt64) -> UInt64 { digest == 0 ? 1 : digest }

  /// What `id` carried, if its digest is kept.
  mutating func digest(of id: UInt64, in store: PageStore) throws -> UInt64? {
    let number = id / Self.idsPerChunk
    try load(number, in: store)
    let offset = Int(id % Self.idsPerChunk) * 8
    let value = chunks[number]!.withUnsafeBufferPointer { bytes in
      (0..<8).reduce(UInt64(0)) { $0 | UInt64(bytes[offset + $1]) << UInt64($1 * 8) }
    }
    return value == 0 ? nil : value
  }

  /// Keeps what `id` carried (written by `save` and the client row).
  mutating func record(_ digest: UInt64, of id: UInt64, in store: PageStore) throws {
    let number = id / Self.idsPerChunk
    try load(number, in: store)
    let offset = Int(id % Self.idsPerChunk) * 8
    let value = Self.stored(digest)
    // In place, through the dictionary: no copy of the chunk per mutation.
    chunks[number]!.withUnsafeMutableBufferPointer { bytes in
      for index in 0..<8 { bytes[offset + index] = UInt8(truncatingIfNeeded: value >> UInt64(index * 8)) }
    }
    if !changed.contains(number) { changed.append(number) }
  }

  /// The client row's `recent_digests` once the client's last id is `last`: the chunk of `last`.
  func recentDigests(last: UInt64) -> SQLiteValue {
    chunks[last / Self.idsPerChunk].map { .blob($0) } ?? .null
  }

  /// Writes the chunks this batch changed, but the client row's (`recentDigests`), and a chunk the client row
  /// held that is no longer its last id's; then, if a chunk was written, drops the chunks wholly older than the
  /// newest `keep` ids up to `last`.
  func save(last: UInt64, keep: UInt64, in store: PageStore) throws {
    let newest = last / Self.idsPerChunk
    var written = changed
    if newest != recent, chunks[recent] != nil, !written.contains(recent) { written.append(recent) }
    written.removeAll { $0 == newest }
    guard !written.isEmpty else { return }
    let connection = store.connection
    for number in written.sorted() {
      let statement = try connection.statement(
        """
        INSERT INTO mutation_digest (client_id, chunk, digests) VALUES (?, ?, ?)
        ON CONFLICT (client_id, chunk) DO UPDATE SET digests = excluded.digests
        """)
      try statement.bind([.text(client.rawValue), .integer(Int64(number)), .blob(chunks[number] ?? [])])
      defer { statement.reset() }
      _ = try statement.step()
    }
    guard last >= keep else { return }
    let statement = try connection.statement(
      "DELETE FROM mutation_digest WHERE client_id = ? AND chunk < ?")
    try statement.bind([.text(client.rawValue), .integer(Int64((last - keep + 1) / Self.idsPerChunk))])
    defer { statement.reset() }
    _ = try statement.step()
  }

  /// Reads chunk `number` (all 0: none kept) into `chunks`, once per batch.
  private mutating func load(_ number: UInt64, in store: PageStore) throws {
    if chunks[number] != nil { return }
    var bytes = [UInt8](repeating: 0, count: Self.chunkBytes)
    if number != recent {
      let statement = try store.connection.statement(
        "SELECT digests FROM mutation_digest WHERE client_id = ? AND chunk = ?")
      try statement.bind([.text(client.rawValue), .integer(Int64(number))])
      defer { statement.reset() }
      // A blob of another length is not ours: as if none were kept.
      if try statement.step(), let stored = statement.blob(0), stored.count == Self.chunkBytes {
        bytes = stored
      }
    }
    chunks[number] = bytes
  }
}
