import ByteBuffers
import DaemonCore
import EventLoop
import SyncModel
import Web

/// The daemon's change stream, `GET /v1/events` (docs/protocol.md, "The change stream"): Server-Sent Events for
/// every app on the device. Events go into a `ChangeFeed` (a window of `[api] events_kept`) already written as
/// SSE frames; each open stream is a position in it.
///
/// - **Slow readers.** A stream is written only while its connection holds less than `highWater` bytes not yet
///   taken by the kernel; past that it keeps only its position, and the pump tries again every `pumpInterval`
///   (only while some stream is behind). Read again from the window, its events are coalesced per page, and if it
///   fell out of the window it gets a `reset` and goes on from the newest event. Memory is the window plus at most
///   `highWater` and one read per connection, whatever readers do; a reader that reads nothing at all is closed by
///   the server's write-stall timeout.
/// - **Keep-alive.** A comment every `keepAliveInterval` while streams are open, so that a reader (or a proxy)
///   can tell a quiet daemon from a dead one.
/// - **Order.** Events are published after their transaction commits, in commit order (loop thread).
///
/// Loop thread only.
final class ChangeStream {
  private let loop: Loop
  /// The window keeps the events, not their frames: a frame is written when a stream is sent it. Kept as frames,
  /// 10,000 events held 2.6 MB of a daemon idle after its first sync; as events with their keys, in an array
  /// doubled to 16,384 entries' room, 1.3 MB; as events alone (56 bytes each) in a ring of exactly 10,000, 0.56 MB.
  private var feed: ChangeFeed<ChangeEventKey, ChangeEvent>
  /// `[api] event_streams`: the most streams open at once.
  var maxStreams: Int
  /// A stream's unsent bytes above which it is not written (it keeps its position).
  let highWater: Int
  /// Events written to one stream per pass.
  private let readLimit = 256
  private var streams: [ObjectIdentifier: Reader] = [:]
  private let pumpTimer: LoopTimer
  private let keepAliveTimer: LoopTimer
  private let pumpInterval: UInt64
  private let keepAliveInterval: UInt64
  /// The last `sync` event published: what a new stream is told first, and what a new one is compared with.
  private var lastSync: ChangeEvent?
  private var closed = false

  private final class Reader {
    let responder: HTTPResponder
    var position: UInt64
    init(responder: HTTPResponder, position: UInt64) {
      self.responder = responder
      self.position = position
    }
  }

  init(
    loop: Loop, eventsKept: Int, maxStreams: Int, firstID: UInt64, highWater: Int = 64 << 10,
    pumpInterval: UInt64 = 100, keepAliveInterval: UInt64 = 15_000
  ) {
    self.loop = loop
    feed = ChangeFeed(capacity: eventsKept, firstID: firstID, key: \.key)
    self.maxStreams = maxStreams
    self.highWater = highWater
    self.pumpInterval = pumpInterval
    self.keepAliveInterval = keepAliveInterval
    pumpTimer = LoopTimer(loop: loop)
    keepAliveTimer = LoopTimer(loop: loop)
  }

  /// Streams open now.
  var openStreams: Int { streams.count }
  /// The bytes each open stream has queued and the kernel has not taken (tests of the bound).
  var queuedBytesOfStreams: [Int] { streams.values.map(\.responder.queuedBytes) }
  /// The id of the newest event.
  var newestID: UInt64 { feed.newestID }

  // MARK: Publishing

  /// Adds `event` to the window and writes it to every stream that is keeping up. A `sync` event equal to the
  /// last one is dropped (nothing changed).
  func publish(_ event: ChangeEvent) {
    if case .sync = event {
      guard event != lastSync else { return }
      lastSync = event
    }
    feed.append(event)
    for reader in streams.values { pump(reader) }
  }

  // MARK: Streams

  /// Answers `GET /v1/events`: 503 past `maxStreams`, 400 for a `Last-Event-ID` that is not a number; otherwise
  /// starts the stream with the sync state and, when resuming, the events after the given id (or a `reset`).
  func open(_ request: HTTPRequest, _ responder: HTTPResponder) {
    guard !closed else {
      responder.respond(HTTPResponseError(.serviceUnavailable, "the daemon is stopping").response)
      return
    }
    prune()
    guard streams.count < maxStreams else {
      responder.respond(
        HTTPResponseError(
          .serviceUnavailable,
          "too many change streams open (\(streams.count)): [api] event_streams is \(maxStreams)"
        ).response)
      return
    }
    var position = feed.newestID
    var resetReason: String?
    if let value = request.head.headers["Last-Event-ID"]?.trimmingSpaces, !value.isEmpty {
      guard value.utf8.count <= 20, value.utf8.allSatisfy({ (48...57).contains($0) }), let id = UInt64(value)
      else {
        let shown = value.count > 40 ? "\(value.prefix(40))…" : value
        responder.respond(
          HTTPResponseError(
            .badRequest, "invalid Last-Event-ID \"\(shown)\": an event id is a decimal number"
          )
          .response)
        return
      }
      if feed.canResume(after: id) {
        position = id
      } else {
        resetReason =
          id > feed.newestID || id < feed.firstID
          ? "event \(id) is not from this run of the daemon: re-read what you show"
          : "events after \(id) are no longer kept ([api] events_kept is \(feed.capacity)): re-read what you show"
      }
    }
    responder.startStreaming(
      HTTPResponseHead(
        status: .ok,
        headers: [
          "Content-Type": "text/event-stream", "Cache-Control": "no-store", "X-Accel-Buffering": "no",
        ]), endsWithPeer: true)
    var start: [UInt8] = Array("retry: 1000\n\n".utf8)
    // A fresh stream's snapshot carries the newest id, so that a reader that saw nothing else resumes exactly
    // from it (and is told `reset` by a later run). A resumed one's has none: events older than it follow.
    if let lastSync { start += Self.frame(lastSync, id: position == feed.newestID ? position : nil) }
    if let resetReason { start += Self.frame(.reset(reason: resetReason), id: feed.newestID) }
    responder.writeChunk(ByteBuffer(bytes: start))
    let reader = Reader(responder: responder, position: position)
    streams[ObjectIdentifier(responder)] = reader
    if !keepAliveTimer.isActive {
      keepAliveTimer.start(after: keepAliveInterval, repeatEvery: keepAliveInterval) { [unowned self] in
        keepAlive()
      }
    }
    pump(reader)
  }

  /// Ends every stream (the daemon is stopping): each body is finished, so readers see a clean end.
  func close() {
    guard !closed else { return }
    closed = true
    for reader in streams.values { reader.responder.finish() }
    streams.removeAll()
    pumpTimer.close()
    keepAliveTimer.close()
  }

  // MARK: Writing

  /// Writes what `reader` has not seen while its connection keeps up; returns whether it is up to date.
  @discardableResult
  private func pump(_ reader: Reader) -> Bool {
    guard reader.responder.isConnectionOpen else { return true }
    while reader.position < feed.newestID {
      guard reader.responder.queuedBytes < highWater else {
        armPump()
        return false
      }
      var out: [UInt8] = []
      switch feed.read(after: reader.position, limit: readLimit) {
      case .lost:
        let reason =
          "this reader fell behind by more than [api] events_kept (\(feed.capacity)) events: re-read what you show"
        out = Self.frame(.reset(reason: reason), id: feed.newestID)
        reader.position = feed.newestID
      case .events(let entries):
        for entry in entries { out += Self.frame(entry.payload, id: entry.id) }
        reader.position = entries.last?.id ?? feed.newestID
      }
      reader.responder.writeChunk(ByteBuffer(bytes: out))
    }
    return true
  }

  private func armPump() {
    guard !pumpTimer.isActive else { return }
    pumpTimer.start(after: pumpInterval, repeatEvery: pumpInterval) { [unowned self] in
      prune()
      var behind = false
      for reader in streams.values where !pump(reader) { behind = true }
      if !behind { pumpTimer.stop() }
    }
  }

  private func keepAlive() {
    prune()
    guard !streams.isEmpty else {
      keepAliveTimer.stop()
      return
    }
    for reader in streams.values where reader.responder.queuedBytes < highWater {
      reader.responder.writeChunk(ByteBuffer(string: ": keep-alive\n\n"))
    }
  }

  /// Forgets the streams whose connection closed.
  private func prune() {
    streams = streams.filter { $0.value.responder.isConnectionOpen }
  }

  // MARK: Frames

  /// `event` as one SSE frame: `id:` (when given), `event:` and one `data:` line of JSON, then a blank line.
  static func frame(_ event: ChangeEvent, id: UInt64?) -> [UInt8] {
    var out: [UInt8] = []
    out.reserveCapacity(160)
    if let id {
      out += Array("id: ".utf8)
      JSONText.appendNumber(id, to: &out)
      out.append(10)
    }
    out += Array("event: \(event.type)\ndata: ".utf8)
    out += json(event)
    out += [10, 10]
    return out
  }

  /// The event's JSON object, on one line (`JSONText` escapes every line break).
  static func json(_ event: ChangeEvent) -> [UInt8] {
    var out: [UInt8] = []
    func key(_ name: String, first: Bool = false) {
      if !first { out.append(UInt8(ascii: ",")) }
      JSONText.appendString(name, to: &out)
      out.append(UInt8(ascii: ":"))
    }
    func string(_ name: String, _ value: String) {
      key(name)
      JSONText.appendString(value, to: &out)
    }
    func literal(_ name: String, _ value: String) {
      key(name)
      out += Array(value.utf8)
    }
    out.append(UInt8(ascii: "{"))
    key("type", first: true)
    JSONText.appendString(event.type, to: &out)
    switch event {
    case .page(let id, let downloaded, let source, let deleted):
      string("id", id.rawValue)
      key("lastDownloadedTimestamp")
      if let downloaded { JSONText.appendNumber(downloaded, to: &out) } else { out += Array("null".utf8) }
      string("source", source.rawValue)
      if deleted { literal("deleted", "true") }
    case .offline(let id, let available, let missing):
      string("id", id.rawValue)
      literal("available", available ? "true" : "false")
      if missing { literal("missing", "true") }
    case .sync(let state, let connected, let pending):
      string("state", state)
      literal("connected", connected ? "true" : "false")
      key("pendingMutations")
      JSONText.appendNumber(pending, to: &out)
    case .conflict(let mutationId, let page, let reason):
      key("mutationId")
      JSONText.appendNumber(mutationId, to: &out)
      string("page", page.rawValue)
      string("reason", reason)
    case .reset(let reason):
      string("reason", reason)
    }
    out.append(UInt8(ascii: "}"))
    return out
  }
}

extension String {
  /// Without leading and trailing spaces and tabs (a header value as RFC 9110 reads it).
  fileprivate var trimmingSpaces: String {
    var text = self[...]
    while let first = text.first, first == " " || first == "\t" { text.removeFirst() }
    while let last = text.last, last == " " || last == "\t" { text.removeLast() }
    return String(text)
  }
}
