import BrokerStore
import ByteBuffers
import FoundationEssentials
import SyncModel
import SyncProtocol
import Web

/// The page store's read side with the encoder of its answers, as one thread owns them: a reader thread of
/// `BrokerServer.readers` (its own connection), or the writer thread when there are no readers.
///
/// Threading: the thread that made it, only.
final class PageReader {
  let store: PageStore
  /// `JSONBodies`' encoder: sorted keys, slashes unescaped, the bytes every other answer has.
  let encoder = JSONBodies().encoder

  init(store: PageStore) { self.store = store }
}

/// What a page answer's encoding did not look like (a bug here, never the client's: HTTP 500).
struct PageAnswerError: Error, CustomStringConvertible {
  var description: String
}

/// The JSON answers that carry pages (`GET /v1/pages/ID`, `POST /v1/fetch`, `GET /v1/sync`) and the store's
/// catch-up, written off the loop thread, from the store, a block at a time.
///
/// The bytes are those `JSONEncoder` (sorted keys, slashes unescaped) writes for the whole answer (tests hold
/// them equal), written without the whole answer ever being a value: each block is encoded alone as the store
/// reads it (`PageStore.forEachBlock`), and each envelope (a page without its blocks, an answer without its
/// pages) is encoded with that array empty and the blocks or pages written between its brackets. A page's
/// blocks are never all in memory as values, nor the encoder's tree of a whole page: what an answer costs is
/// its bytes, plus one block's encoding, plus (in a fetch or a pull) one page's bytes while they are weighed
/// against the answer's bound.
///
/// Bounds: a fetch or a pull stops adding pages once the next would take the answer past `maxBytes`
/// (`[limits] answer_bytes`) and says where to continue (`nextCursor`, `nextOffset`); its first page always
/// goes, however large, so that a client always gets past it. One page (`GET /v1/pages/ID`) is sent whole.
extension PageReader {
  /// `GET /v1/pages/ID`: the page, if it exists in `workspaces`.
  func pageAnswer(_ id: EntityID, workspaces: Set<EntityID>) throws -> ByteBuffer? {
    guard let header = try store.snapshotHeader(of: id, workspaces: workspaces) else { return nil }
    // Room for the page as stored (its state goes in base64, a third more): one allocation, not a doubling.
    let estimate = try store.storedBytes(of: id)
    var out = ByteBuffer(capacity: min(estimate / 3 * 4 + 4096, 1 << 30))
    try writeSnapshot(header, into: &out)
    return out
  }

  /// `POST /v1/fetch`: deltas of `request.pages` after its cursor in page-id order, at most `limit` pages and,
  /// past the first, at most `maxBytes` of them; `nextCursor` when pages remain.
  func fetchAnswer(
    _ request: BrokerProtocol.FetchRequest, workspaces: Set<EntityID>, limit: Int, maxBytes: Int
  ) throws -> ByteBuffer {
    let sameEpoch = request.epoch == nil || request.epoch == store.epoch
    var ids = request.pages.keys.sorted()
    if let cursor = request.cursor { ids = ids.filter { $0 > cursor } }
    var out = ByteBuffer(capacity: 4096)
    out.append(contentsOf: Self.deltasPrefix)
    var gone: [EntityID] = []
    var written = 0
    var taken = 0
    for id in ids.prefix(limit) {
      let since = sameEpoch ? request.pages[id] ?? 0 : 0
      guard let (delta, blocks) = try store.deltaHeader(of: id, since: since, workspaces: workspaces) else {
        gone.append(id)
        taken += 1
        continue
      }
      var one = ByteBuffer(capacity: 1024)
      try writeDelta(delta, blocks, into: &one)
      if written > 0 && out.readableBytes + 1 + one.readableBytes > maxBytes { break }
      if written > 0 { out.append(byte: UInt8(ascii: ",")) }
      out.append(one)
      written += 1
      taken += 1
    }
    let envelope = BrokerProtocol.FetchResponse(
      epoch: store.epoch, deltas: [], gone: gone, nextCursor: taken < ids.count ? ids[taken - 1] : nil)
    try appendRest(of: encoder.encode(envelope), after: Self.deltasPrefix, into: &out)
    return out
  }

  /// `GET /v1/sync`: the pages of `workspaces` changed after `since`, `limit` from `offset`, oldest change
  /// first, and past the first at most `maxBytes` of them; `hasMore` and `nextOffset` when pages remain.
  func syncPullAnswer(
    after since: UInt64, workspaces: Set<EntityID>, page: Int, offset: Int, limit: Int, maxBytes: Int
  ) throws -> ByteBuffer {
    let found = try store.pagesChanged(after: since, workspaces: workspaces, offset: offset, limit: limit)
    var out = ByteBuffer(capacity: 4096)
    out.append(contentsOf: Self.changesPrefix)
    var written = 0
    var taken = 0
    for id in found.pages {
      if let header = try store.snapshotHeader(of: id, workspaces: workspaces) {
        var one = ByteBuffer(capacity: 1024)
        try writeSnapshot(header, into: &one)
        if written > 0 && out.readableBytes + 1 + one.readableBytes > maxBytes { break }
        if written > 0 { out.append(byte: UInt8(ascii: ",")) }
        out.append(one)
        written += 1
      }
      taken += 1
    }
    let hasMore = found.hasMore || taken < found.pages.count
    let envelope = BrokerProtocol.SyncPull(
      changes: [], page: page, limit: limit, hasMore: hasMore, latest: store.syncCursor, epoch: store.epoch,
      nextOffset: hasMore ? offset + taken : nil)
    try appendRest(of: encoder.encode(envelope), after: Self.changesPrefix, into: &out)
    return out
  }

  /// `POST /v1/catchup` from the store: which of the client's pages changed, and which it may not see.
  func catchUpAnswer(_ request: BrokerProtocol.CatchUpRequest, workspaces: Set<EntityID>) throws -> ByteBuffer
  {
    let answer = try store.changedPages(
      since: request.pages, workspaces: workspaces, clientEpoch: request.epoch)
    let response = BrokerProtocol.CatchUpResponse(
      epoch: store.epoch, epochChanged: request.epoch != nil && request.epoch != store.epoch,
      sequence: store.sequence, changed: answer.changed, gone: answer.gone)
    return ByteBuffer(bytes: try encoder.encode(response))
  }

  // MARK: Writing

  static let deltasPrefix = Array(#"{"deltas":["#.utf8)
  static let changesPrefix = Array(#"{"changes":["#.utf8)
  /// Where a page's blocks go: its first key (`blocks` sorts first).
  static let blocksMarker = Array(#"{"blocks":["#.utf8)
  /// Where a whole page's blocks go in a full delta: the delta's own `blocks` come first, then its `page`.
  static let fullDeltaBlocksMarker = Array(#""page":{"blocks":["#.utf8)

  /// Appends the JSON of the page whose header (blocks empty) is `header`, with its live blocks.
  func writeSnapshot(_ header: PageSnapshot, into out: inout ByteBuffer) throws {
    var header = header
    header.blocks = []
    try splice(encoder.encode(header), at: Self.blocksMarker, into: &out) { out in
      try writeBlocks(of: header.id, .live, into: &out)
    }
  }

  /// Appends the JSON of the delta whose header (blocks empty) is `delta`, with `blocks` where they go.
  func writeDelta(_ delta: PageDelta, _ blocks: PageStore.BlockSelection, into out: inout ByteBuffer) throws {
    var delta = delta
    delta.blocks = []
    delta.page.blocks = []
    let marker = delta.full ? Self.fullDeltaBlocksMarker : Self.blocksMarker
    try splice(encoder.encode(delta), at: marker, into: &out) { out in
      try writeBlocks(of: delta.id, blocks, into: &out)
    }
  }

  private func writeBlocks(
    of page: EntityID, _ selection: PageStore.BlockSelection, into out: inout ByteBuffer
  ) throws {
    var first = true
    try store.forEachBlock(of: page, selection) { block in
      if !first { out.append(byte: UInt8(ascii: ",")) }
      first = false
      try encoder.encode(block).withUnsafeBytes { out.append(contentsOf: $0) }
    }
  }

  /// Appends `envelope`, the JSON of a value with one empty array, with `fill` writing the array's items between
  /// its brackets. `marker`: the bytes ending with that array's `[` where they first occur in `envelope` (a
  /// string's quotes are escaped, so a value cannot hold them).
  private func splice(
    _ envelope: Data, at marker: [UInt8], into out: inout ByteBuffer, fill: (inout ByteBuffer) throws -> Void
  ) throws {
    try envelope.withUnsafeBytes { bytes in
      guard let end = Self.end(of: marker, in: bytes), end < bytes.count, bytes[end] == UInt8(ascii: "]")
      else {
        throw PageAnswerError(description: "no empty array after \(String(decoding: marker, as: UTF8.self))")
      }
      out.append(contentsOf: UnsafeRawBufferPointer(rebasing: bytes[..<end]))
      try fill(&out)
      out.append(contentsOf: UnsafeRawBufferPointer(rebasing: bytes[end...]))
    }
  }

  /// Appends what follows `prefix` in `envelope` (whose array after `prefix` is empty): the rest of an answer
  /// whose `prefix` and items are already written.
  private func appendRest(of envelope: Data, after prefix: [UInt8], into out: inout ByteBuffer) throws {
    try envelope.withUnsafeBytes { bytes in
      guard bytes.starts(with: prefix), bytes.count > prefix.count, bytes[prefix.count] == UInt8(ascii: "]")
      else {
        throw PageAnswerError(description: "no empty array after \(String(decoding: prefix, as: UTF8.self))")
      }
      out.append(contentsOf: UnsafeRawBufferPointer(rebasing: bytes[prefix.count...]))
    }
  }

  /// The index just past the first occurrence of `marker` in `bytes`.
  private static func end(of marker: [UInt8], in bytes: UnsafeRawBufferPointer) -> Int? {
    guard let first = marker.first, bytes.count >= marker.count else { return nil }
    var start = 0
    while start + marker.count <= bytes.count {
      if bytes[start] == first && bytes[start..<(start + marker.count)].elementsEqual(marker) {
        return start + marker.count
      }
      start += 1
    }
    return nil
  }
}
