/// A block's text as a sequence CRDT with marks: one replica of it.
///
/// Insertion follows FugueMax (Weidner & Kleppmann, "The Art of the Fugue"): runs typed concurrently at one
/// place never interleave, forward or backward. It is implemented as Yjs-style items with left and right origins
/// integrated by the YjsMod rule, which the Fugue authors' reference implementations show is FugueMax. Characters
/// are kept in runs (consecutive characters of one replica typed in order are one run; a deleted stretch is one
/// tombstone run), runs in chunks, and each replica's ids are indexed to their chunk, so a local edit near the
/// last one costs a few dozen operations and a remote insert a lookup and a short scan.
///
/// Deletion keeps a character's id and origins (others may still insert next to it, or anchor a mark to it,
/// from an edit made before they learnt of the deletion) but never its text. Marks follow Peritext: each
/// operation is anchored to characters, its end on the side its type grows; of the operations of one type over a
/// character the one with the greatest (time, replica) wins. A value type: copies are cheap until written.
public struct TextDocument: Sendable {
  static let maxRunsPerChunk = 64
  /// The most character ids a state read from bytes may make room for: the sum over its replicas of each one's
  /// next counter. A replica's typed characters are kept by counter (a gap in its counters takes room too), so
  /// without this bound a state of a few bytes naming counter 2^32 - 1 would take gigabytes. A store that keeps
  /// states must refuse edits that would take a document past it (the broker answers `too_large`).
  public static let maxIdentifiers = 1 << 24

  var clients: [ClientState] = []
  var numbers: [String: UInt32] = [:]
  /// The replica `number(for:)` gave last: one replica typing looks itself up on every keystroke, and comparing
  /// a name costs less than hashing it.
  var lastNumber: (name: String, number: UInt32)?
  /// Chunks by slot (a slot never changes while its chunk lives: the id index points at slots).
  var slots: [Chunk] = []
  /// Document order: the slot of each chunk.
  var order: [Int32] = []
  /// Each slot's place in `order`.
  var orderOf: [Int32] = []
  public internal(set) var count = 0
  /// Characters kept, deleted ones included.
  public internal(set) var totalCount = 0
  /// A chunk's place in order and the number of visible characters before it: where the last lookup ended.
  var cursor = (order: 0, start: 0)
  /// Where the last local insert ended, as long as nothing else has changed the document since (every change
  /// of a run or of the chunks forgets it): the next insert there by the same replica extends that run with no
  /// lookup.
  var typing: Typing?
  /// A visible position whose character's place the last local deletion learnt, under the same rule as
  /// `typing`: the next backspace (or delete) there needs no lookup.
  var known: (position: Int, place: Place)?
  var markStore: [StoredMark] = []
  var markKeys: Set<MarkKey> = []
  /// Operations whose origins or anchors this replica does not have yet (delivered out of order), kept until it
  /// does; they are part of the state (encoded with it).
  var pendingRuns: [InsertRun] = []
  var pendingMarks: [MarkOperation] = []
  /// Slots that may hold more than `maxRunsPerChunk` runs until the operation under way ends (`normalize`).
  var overfull: [Int32] = []

  public init() {}

  /// A document whose text is `text`, as typed by replica `client` at once (every replica that makes the same
  /// call with the same arguments gets the same ids: this is how a block's first text is shared).
  public init(text: String, client: String, seq: UInt64 = 0) {
    self.init()
    let scalars = Array(text.unicodeScalars)
    if !scalars.isEmpty { insert(scalars, at: 0, client: client, seq: seq) }
  }

  // MARK: - Reading

  /// The visible text.
  public var text: String {
    var utf8: [UInt8] = []
    utf8.reserveCapacity(count)
    for slot in order {
      for run in slots[Int(slot)].runs where !run.deleted {
        clients[Int(run.client)].content.appendUTF8(Int(run.counter)..<Int(run.end), to: &utf8)
      }
    }
    return String(decoding: utf8, as: UTF8.self)
  }

  /// The visible text as Unicode scalars.
  public var scalars: [Unicode.Scalar] {
    var out: [Unicode.Scalar] = []
    out.reserveCapacity(count)
    for slot in order {
      for run in slots[Int(slot)].runs where !run.deleted {
        out.append(contentsOf: clients[Int(run.client)].content.scalars(Int(run.counter)..<Int(run.end)))
      }
    }
    return out
  }

  /// Whether operations are waiting for characters this replica has not received.
  public var hasPendingOperations: Bool { !pendingRuns.isEmpty || !pendingMarks.isEmpty }

  /// The replicas that typed characters here, and the counter after each one's highest.
  public var version: [String: UInt32] {
    Dictionary(uniqueKeysWithValues: clients.map { ($0.name, $0.nextCounter) })
  }

  /// The counter the next character typed here by `client` gets.
  public func nextCounter(for client: String) -> UInt32 {
    numbers[client].map { clients[Int($0)].nextCounter } ?? 0
  }

  /// Characters whose room the document holds: every replica's counters up to its highest (gaps included: the
  /// text is kept by counter), the characters of runs waiting for their origins, and one for each mark
  /// operation waiting for its anchors. What a store bounds, so that no update (a counter far ahead, runs or
  /// marks that never find what they need) can make it hold more.
  public var heldCharacters: Int {
    clients.reduce(0) { $0 + Int($1.nextCounter) } + pendingRuns.reduce(0) { $0 + Int($1.length) }
      + pendingMarks.count
  }

  /// Number of runs (tombstones included): the size of the structure, for tests and benchmarks.
  public var runCount: Int { slots.reduce(0) { $0 + $1.runs.count } }

  /// Approximate heap bytes held (runs, indexes, text buffers), for benchmarks.
  public var memoryBytes: Int {
    var total = slots.reduce(0) {
      $0 + $1.runs.capacity * MemoryLayout<Run>.stride + $1.seqs.capacity * 8 + 32
    }
    total += order.capacity * 4 + orderOf.capacity * 4
    for client in clients {
      total += client.content.memoryBytes + client.index.capacity * MemoryLayout<IndexEntry>.stride
      total += client.deletes.capacity * MemoryLayout<DeleteEntry>.stride + client.name.utf8.count + 64
    }
    return total + markStore.count * 160
  }

  // MARK: - Local edits

  /// Deletes `delete` scalars at `position` and inserts `insert` there, as replica `client`; returns the update
  /// to send to the others. Positions count Unicode scalars from 0.
  /// `seq`: the broker's sequence, when the broker itself edits (a whole-text edit from an older client).
  public mutating func splice(
    at position: Int, delete: Int, insert: String, client: String, seq: UInt64 = 0
  ) throws(TextError) -> TextUpdate {
    guard position >= 0, position <= count else { throw .positionOutOfRange(position, count: count) }
    // `position + delete` may overflow: an app (the daemon's local API) chooses both.
    let end = position.addingReportingOverflow(delete)
    guard delete >= 0, !end.overflow, end.partialValue <= count else {
      throw .rangeOutOfRange(position, end.overflow ? .max : end.partialValue, count: count)
    }
    var update = TextUpdate()
    if delete > 0 { update.deletes = self.delete(at: position, count: delete, seq: seq) }
    let scalars = Self.scalars(of: insert)
    if !scalars.isEmpty {
      let inserted = self.insert(scalars, at: position, client: client, seq: seq)
      update.runs = [
        InsertRun(
          client: client, counter: inserted.counter, length: UInt32(scalars.count),
          left: characterID(inserted.left), right: characterID(inserted.right), text: scalars, seq: seq)
      ]
    }
    return update
  }

  /// `Array(text.unicodeScalars)`, read from the UTF-8 at once when it is all ASCII (nearly every keystroke).
  static func scalars(of text: String) -> [Unicode.Scalar] {
    var text = text
    let ascii = text.withUTF8 { utf8 -> [Unicode.Scalar]? in
      guard !utf8.contains(where: { $0 >= 0x80 }) else { return nil }
      return utf8.map { Unicode.Scalar($0) }
    }
    return ascii ?? Array(text.unicodeScalars)
  }

  /// Inserts `scalars` at visible `position` as replica `client`, at the place among the deleted characters
  /// there that `insertionPoint(at:)` picks (at the very start for position 0, where no mark can cover it);
  /// `seq`, the broker's sequence, goes on the run. Returns their first counter and their origins (what the
  /// update says; `splice` makes it, so that the run is built once, in the update).
  @discardableResult
  mutating func insert(
    _ scalars: [Unicode.Scalar], at position: Int, client name: String, seq: UInt64 = 0
  ) -> (counter: UInt32, left: Ref, right: Ref) {
    let me = number(for: name)
    let counter = clients[Int(me)].nextCounter
    let length = UInt32(scalars.count)
    if let typing, typing.client == me, typing.position == position,
      let right = continueTyping(typing, counter, seq: seq)
    {
      // Typing on: the run the last insert ended in takes these characters too, as the general path below
      // would (nothing has changed since: that run still ends at the visible character before `position`, and
      // `continueTyping` checked that `insertionPoint` would stop right after it).
      let slot = Int(order[typing.order])
      clients[Int(me)].content.write(scalars, at: counter)
      slots[slot].runs[typing.run].length += length
      adjust(typing.order, visible: Int(length), total: Int(length))
      clients[Int(me)].assign(counter, counter + length, to: Int32(slot))
      applyKnownDeletes(client: me, counter, counter + length)
      normalize()
      noteTyping(me, counter + length, at: position + Int(length), typing.order, typing.run)
      return (counter, makeRef(me, counter - 1), right)
    }
    var left: Ref = 0
    var right: Ref = 0
    var destination: (order: Int, run: Int)
    if order.isEmpty {
      addFirstChunk()
      destination = (0, 0)
    } else if position == 0 {
      destination = (0, 0)
      right = run(0, 0).firstRef
    } else {
      let point = insertionPoint(at: position)
      left = run(point.order, point.run).lastRef
      destination = (point.order, point.run + 1)
      if let next = nextRun(point.order, point.run) { right = run(next.order, next.run).firstRef }
    }
    clients[Int(me)].content.write(scalars, at: counter)
    let before = previousRun(destination.order, destination.run)
    if let before, slots[Int(order[before.order])].runs[before.run].client == me {
      let slot = Int(order[before.order])
      let previous = slots[slot].runs[before.run]
      if !previous.deleted && previous.end == counter && previous.right == right
        && slots[slot].seq(before.run) == seq
      {
        slots[slot].runs[before.run].length += length
        adjust(before.order, visible: Int(length), total: Int(length))
        clients[Int(me)].assign(counter, counter + length, to: Int32(slot))
        applyKnownDeletes(client: me, counter, counter + length)
        normalize()
        noteTyping(me, counter + length, at: position + Int(length), before.order, before.run)
        return (counter, left, right)
      }
    }
    let new = Run(client: me, counter: counter, length: length, deleted: false, left: left, right: right)
    insertRun(new, seq: seq, at: destination.order, destination.run)
    applyKnownDeletes(client: me, counter, counter + length)
    normalize()
    // The new run, or the run before it if they were joined.
    noteTyping(me, counter + length, at: position + Int(length), destination.order, destination.run)
    if typing == nil && destination.run > 0 {
      noteTyping(me, counter + length, at: position + Int(length), destination.order, destination.run - 1)
    }
    return (counter, left, right)
  }

  /// The right origin the next character typed at `typing` gets, if the run there can take it (its replica's
  /// newest characters, visible, with the same broker sequence: what `insert` extends) and `insertionPoint`
  /// would put them right after it; nil otherwise. The run after it is the one starting at its right origin
  /// (nothing has changed since): when marks exist and that run is deleted, a mark's `.after` anchor among the
  /// deleted characters may move the text past them, and the general path decides.
  @inline(__always) func continueTyping(_ typing: Typing, _ counter: UInt32, seq: UInt64) -> Ref? {
    guard typing.order < order.count else { return nil }
    let slot = Int(order[typing.order])
    guard typing.run < slots[slot].runs.count else { return nil }
    let previous = slots[slot].runs[typing.run]
    guard previous.client == typing.client, !previous.deleted, previous.end == counter,
      slots[slot].seq(typing.run) == seq,
      previous.right != 0 || typing.position == count
    else { return nil }
    if previous.right != 0 && !markStore.isEmpty {
      guard let next = nextRun(typing.order, typing.run), !run(next.order, next.run).deleted else {
        return nil
      }
    }
    return previous.right
  }

  /// Forgets `typing` and `known`: what every change of a run or of the chunks does.
  @inline(__always) mutating func forgetEdits() {
    typing = nil
    known = nil
  }

  /// Remembers that replica `client`'s characters up to `end` were just typed and end run (`order`, `run`) at
  /// visible position `position`, if that run is theirs and ends there (otherwise forgets any typing).
  mutating func noteTyping(_ client: UInt32, _ end: UInt32, at position: Int, _ order: Int, _ run: Int) {
    typing = nil
    guard order < self.order.count else { return }
    let slot = Int(self.order[order])
    guard run < slots[slot].runs.count else { return }
    let candidate = slots[slot].runs[run]
    guard candidate.client == client, candidate.end == end, !candidate.deleted else { return }
    typing = Typing(client: client, position: position, order: order, run: run)
  }

  /// The run after which text typed at visible `position` (> 0) goes, split so that it ends there. Deleted
  /// characters between the visible ones before and at `position` keep the anchors of marks that ended or began
  /// at them, so where the text goes among them decides which marks it takes (Peritext): right after the
  /// visible character, so that a growing mark ending at a deleted one (`.before`) takes it and a mark starting
  /// at one does not; but after the last deleted one a mark's end clings to (`.after`), so that a link or code
  /// span that ended there does not take it. When both cannot hold, the second wins.
  mutating func insertionPoint(at position: Int) -> (order: Int, run: Int) {
    let place = locateVisible(position - 1)
    if place.offset + 1 < run(place.order, place.run).length {
      splitRun(place.order, place.run, at: place.offset + 1)
    }
    let point = (order: place.order, run: place.run)
    guard !markStore.isEmpty, var at = nextRun(point.order, point.run), run(at.order, at.run).deleted else {
      return point
    }
    var anchored: [Ref] = []
    for stored in markStore {
      if case .after(let ref) = stored.start { anchored.append(ref) }
      if case .after(let ref) = stored.end { anchored.append(ref) }
    }
    var target: (order: Int, run: Int, offset: UInt32)?
    while true {
      let tombstone = run(at.order, at.run)
      for ref in anchored where refClient(ref) == tombstone.client {
        let counter = refCounter(ref)
        guard counter >= tombstone.counter, counter < tombstone.end else { continue }
        if let found = target, found.order == at.order, found.run == at.run,
          found.offset >= counter - tombstone.counter
        {
          continue
        }
        target = (at.order, at.run, counter - tombstone.counter)
      }
      guard let next = nextRun(at.order, at.run), run(next.order, next.run).deleted else { break }
      at = next
    }
    guard let target else { return point }
    if target.offset + 1 < run(target.order, target.run).length {
      splitRun(target.order, target.run, at: target.offset + 1)
    }
    return (target.order, target.run)
  }

  /// Deletes `count` visible scalars at `position`; returns the ranges deleted.
  mutating func delete(at position: Int, count length: Int, seq: UInt64 = 0) -> [DeletedRange] {
    var remaining = length
    var ranges: [DeletedRange] = []
    while remaining > 0 {
      var place = locateVisible(position)
      let deleted: (client: UInt32, counter: UInt32, take: Int)
      if let joined = deleteIntoTombstone(place, remaining, at: position, seq: seq) {
        deleted = joined
      } else {
        if place.offset > 0 {
          splitRun(place.order, place.run, at: place.offset)
          place.run += 1
        }
        let slot = Int(order[place.order])
        let current = slots[slot].runs[place.run]
        let take = min(remaining, Int(current.length))
        if take < Int(current.length) { splitRun(place.order, place.run, at: UInt32(take)) }
        slots[slot].runs[place.run].deleted = true
        slots[slot].setSeq(max(slots[slot].seq(place.run), seq), place.run)
        adjust(place.order, visible: -take, total: 0)
        mergeAround(place.order, place.run)
        deleted = (current.client, current.counter, take)
      }
      let (client, counter, take) = deleted
      clients[Int(client)].addDelete(counter, counter + UInt32(take), seq: seq)
      let clientName = clients[Int(client)].name
      if let last = ranges.last, last.client == clientName, last.counter + last.length == counter {
        ranges[ranges.count - 1].length += UInt32(take)
      } else {
        ranges.append(DeletedRange(client: clientName, counter: counter, length: UInt32(take), seq: seq))
      }
      remaining -= take
    }
    normalize()
    return ranges
  }

  /// Backspace and delete, nearly every time: the characters at `place` (up to `remaining` of them, to the end
  /// of their run or from its start) join the tombstone just after or just before them in the chunk, which
  /// they continue. The runs end as splitting them off, marking them and joining them with it (`delete`'s
  /// general way) would leave them, without moving the chunk's runs twice. Nil if that is not the case.
  mutating func deleteIntoTombstone(_ place: Place, _ remaining: Int, at position: Int, seq: UInt64) -> (
    client: UInt32, counter: UInt32, take: Int
  )? {
    let slot = Int(order[place.order])
    let run = slots[slot].runs[place.run]
    let rest = Int(run.length - place.offset)
    if place.offset > 0 && remaining >= rest && place.run + 1 < slots[slot].runs.count {
      // The run's tail, into the tombstone after it.
      let next = slots[slot].runs[place.run + 1]
      guard next.deleted, next.client == run.client, next.counter == run.end, next.left == run.lastRef,
        next.right == run.right
      else { return nil }
      let start = run.counter + place.offset
      slots[slot].runs[place.run].length = place.offset
      slots[slot].runs[place.run + 1].counter = start
      slots[slot].runs[place.run + 1].length += UInt32(rest)
      slots[slot].runs[place.run + 1].left = makeRef(run.client, start - 1)
      slots[slot].setSeq(
        max(slots[slot].seq(place.run + 1), slots[slot].seq(place.run), seq), place.run + 1)
      adjust(place.order, visible: -rest, total: 0)
      // The character before them, where a backspace goes next.
      known = (position - 1, Place(order: place.order, run: place.run, offset: place.offset - 1))
      return (run.client, start, rest)
    }
    if place.offset == 0 && remaining < Int(run.length) && place.run > 0 {
      // The run's head, into the tombstone before it.
      let previous = slots[slot].runs[place.run - 1]
      guard previous.deleted, previous.client == run.client, previous.end == run.counter,
        run.left == previous.lastRef, run.right == previous.right
      else { return nil }
      let take = UInt32(remaining)
      slots[slot].runs[place.run - 1].length += take
      slots[slot].setSeq(
        max(slots[slot].seq(place.run - 1), slots[slot].seq(place.run), seq), place.run - 1)
      slots[slot].runs[place.run].counter += take
      slots[slot].runs[place.run].length -= take
      slots[slot].runs[place.run].left = makeRef(run.client, run.counter + take - 1)
      adjust(place.order, visible: -remaining, total: 0)
      // The character after them, where a delete goes next.
      known = (position, Place(order: place.order, run: place.run, offset: 0))
      return (run.client, run.counter, remaining)
    }
    return nil
  }

  // MARK: - Structure

  mutating func number(for name: String) -> UInt32 {
    if let last = lastNumber, last.name == name { return last.number }
    if let number = numbers[name] {
      lastNumber = (name, number)
      return number
    }
    let number = UInt32(clients.count)
    clients.append(ClientState(name: name))
    numbers[name] = number
    lastNumber = (name, number)
    return number
  }

  func characterID(_ ref: Ref) -> CharacterID? {
    ref == 0 ? nil : CharacterID(client: clients[Int(refClient(ref))].name, counter: refCounter(ref))
  }

  /// The packed reference of `id`, if the document knows its replica.
  func ref(_ id: CharacterID?) -> Ref? {
    guard let id else { return 0 }
    guard let number = numbers[id.client] else { return nil }
    return makeRef(number, id.counter)
  }

  /// Whether the document has character `ref` (0, the document's edge, always).
  func has(_ ref: Ref) -> Bool {
    ref == 0
      || (Int(refClient(ref)) < clients.count && clients[Int(refClient(ref))].contains(refCounter(ref)))
  }

  @inline(__always) func run(_ order: Int, _ index: Int) -> Run { slots[Int(self.order[order])].runs[index] }

  mutating func addFirstChunk() {
    forgetEdits()
    slots.append(Chunk())
    order.append(Int32(slots.count - 1))
    orderOf.append(Int32(order.count - 1))
    cursor = (0, 0)
  }

  /// Where character `ref` is.
  func find(_ ref: Ref) -> Place? {
    let client = Int(refClient(ref))
    let counter = refCounter(ref)
    guard client < clients.count, let entry = clients[client].entry(counter) else { return nil }
    let slot = Int(clients[client].index[entry].slot)
    let runs = slots[slot].runs
    for index in runs.indices {
      let run = runs[index]
      if run.client == UInt32(client) && counter >= run.counter && counter < run.end {
        return Place(order: Int(orderOf[slot]), run: index, offset: counter - run.counter)
      }
    }
    return nil
  }

  /// The visible character at `position` (< count).
  mutating func locateVisible(_ position: Int) -> Place {
    // Backspace and delete after an edit there: the place is known.
    if let known, known.position == position { return known.place }
    if let typing, typing.position == position + 1 {
      let length = slots[Int(order[typing.order])].runs[typing.run].length
      return Place(order: typing.order, run: typing.run, offset: length - 1)
    }
    var (at, start) = cursor
    if at >= order.count { (at, start) = (0, 0) }
    if position < start {
      while position < start {
        at -= 1
        start -= slots[Int(order[at])].visible
      }
    } else {
      while position >= start + slots[Int(order[at])].visible {
        start += slots[Int(order[at])].visible
        at += 1
      }
    }
    cursor = (at, start)
    var seen = start
    let runs = slots[Int(order[at])].runs
    for index in runs.indices where !runs[index].deleted {
      let length = Int(runs[index].length)
      if position < seen + length { return Place(order: at, run: index, offset: UInt32(position - seen)) }
      seen += length
    }
    preconditionFailure("chunk counts disagree with their runs")
  }

  /// Visible characters before the chunk at `target` in order.
  mutating func visibleStart(_ target: Int) -> Int {
    var (at, start) = cursor
    if at >= order.count { (at, start) = (0, 0) }
    while at > target {
      at -= 1
      start -= slots[Int(order[at])].visible
    }
    while at < target {
      start += slots[Int(order[at])].visible
      at += 1
    }
    return start
  }

  /// The run just before (`order`, `index`) in document order.
  func previousRun(_ order: Int, _ index: Int) -> (order: Int, run: Int)? {
    if index > 0 { return (order, index - 1) }
    var at = order - 1
    while at >= 0 {
      let runs = slots[Int(self.order[at])].runs
      if !runs.isEmpty { return (at, runs.count - 1) }
      at -= 1
    }
    return nil
  }

  /// The run just after (`order`, `index`) in document order.
  func nextRun(_ order: Int, _ index: Int) -> (order: Int, run: Int)? {
    if index + 1 < slots[Int(self.order[order])].runs.count { return (order, index + 1) }
    var at = order + 1
    while at < self.order.count {
      if !slots[Int(self.order[at])].runs.isEmpty { return (at, 0) }
      at += 1
    }
    return nil
  }

  /// Splits a run in two at `offset` (0 < offset < length); the ids stay in the chunk.
  mutating func splitRun(_ order: Int, _ index: Int, at offset: UInt32) {
    forgetEdits()
    let slot = Int(self.order[order])
    var first = slots[slot].runs[index]
    var second = first
    first.length = offset
    second.counter = first.counter + offset
    second.length -= offset
    second.left = first.lastRef
    slots[slot].runs[index] = first
    slots[slot].insert(second, seq: slots[slot].seq(index), at: index + 1)
    if slots[slot].runs.count > Self.maxRunsPerChunk { overfull.append(Int32(slot)) }
  }

  /// Splits every chunk an operation left too long: at the end of each operation, never inside one (places
  /// found during an operation stay valid until then).
  @inline(__always) mutating func normalize() {
    if !overfull.isEmpty { splitOverfull() }
  }

  /// `normalize`'s work, out of line: most operations leave no chunk too long.
  mutating func splitOverfull() {
    while let slot = overfull.popLast() {
      while slots[Int(slot)].runs.count > Self.maxRunsPerChunk { splitChunkIfNeeded(Int(orderOf[Int(slot)])) }
    }
  }

  /// Changes the counts of the chunk at `order` (and the cursor's start if the chunk is before it).
  @inline(__always) mutating func adjust(_ order: Int, visible: Int, total: Int) {
    forgetEdits()
    let slot = Int(self.order[order])
    slots[slot].visible += visible
    slots[slot].total += total
    count += visible
    totalCount += total
    if cursor.order > order { cursor.start += visible }
  }

  /// Puts `run` at (`order`, `index`), indexes its ids and counts it.
  mutating func insertRun(_ run: Run, seq: UInt64, at order: Int, _ index: Int) {
    let slot = Int(self.order[order])
    slots[slot].insert(run, seq: seq, at: index)
    if slots[slot].runs.count > Self.maxRunsPerChunk { overfull.append(Int32(slot)) }
    adjust(order, visible: run.visibleLength, total: Int(run.length))
    clients[Int(run.client)].assign(run.counter, run.end, to: Int32(slot))
    mergeAround(order, index)
  }

  /// Joins the run at (`order`, `index`) with its neighbours in the chunk where they are one run.
  mutating func mergeAround(_ order: Int, _ index: Int) {
    forgetEdits()
    let slot = Int(self.order[order])
    var at = index
    if at + 1 < slots[slot].runs.count, slots[slot].runs[at].continues(with: slots[slot].runs[at + 1]) {
      let next = slots[slot].remove(at: at + 1)
      slots[slot].runs[at].length += next.run.length
      slots[slot].setSeq(max(slots[slot].seq(at), next.seq), at)
    }
    if at > 0, slots[slot].runs[at - 1].continues(with: slots[slot].runs[at]) {
      let current = slots[slot].remove(at: at)
      at -= 1
      slots[slot].runs[at].length += current.run.length
      slots[slot].setSeq(max(slots[slot].seq(at), current.seq), at)
    }
  }

  /// Splits the chunk at `order` in two when it holds too many runs.
  mutating func splitChunkIfNeeded(_ order: Int) {
    let slot = Int(self.order[order])
    guard slots[slot].runs.count > Self.maxRunsPerChunk else { return }
    forgetEdits()
    let half = slots[slot].runs.count / 2
    var moved = Chunk()
    moved.runs = Array(slots[slot].runs[half...])
    // A copy of the first half, not `removeSubrange`: that would keep the whole capacity, half of it unused.
    slots[slot].runs = Array(slots[slot].runs[..<half])
    if !slots[slot].seqs.isEmpty {
      moved.seqs = Array(slots[slot].seqs[half...])
      slots[slot].seqs = Array(slots[slot].seqs[..<half])
    }
    for run in moved.runs {
      moved.visible += run.visibleLength
      moved.total += Int(run.length)
    }
    slots[slot].visible -= moved.visible
    slots[slot].total -= moved.total
    let newSlot = Int32(slots.count)
    if moved.runs.count > Self.maxRunsPerChunk { overfull.append(newSlot) }
    slots.append(moved)
    self.order.insert(newSlot, at: order + 1)
    orderOf.append(0)
    for at in (order + 1)..<self.order.count { orderOf[Int(self.order[at])] = Int32(at) }
    for run in slots[Int(newSlot)].runs { clients[Int(run.client)].assign(run.counter, run.end, to: newSlot) }
    if cursor.order > order {
      cursor.order += 1
    } else if cursor.order == order {
      cursor = (order, cursor.start)
    }
  }

  /// Marks deleted the characters of `client`'s `start ..< end` that its delete set names (a deletion that
  /// arrived before the insertion it deletes).
  mutating func applyKnownDeletes(client: UInt32, _ start: UInt32, _ end: UInt32) {
    // Nearly always: nothing of the replica deleted at or after `start` (new characters).
    guard let last = clients[Int(client)].deletes.last, last.end > start else { return }
    for (from, to) in clients[Int(client)].deletedRanges(start, end) {
      deletePresent(client: client, from, to, seq: 0)
    }
  }

  /// Marks deleted the characters of `client`'s `start ..< end` that the document has.
  mutating func deletePresent(client: UInt32, _ start: UInt32, _ end: UInt32, seq: UInt64) {
    var at = start
    while at < end {
      let entry = clients[Int(client)].firstEntry(endingAfter: at)
      guard entry < clients[Int(client)].index.count else { return }
      let found = clients[Int(client)].index[entry]
      if found.start >= end { return }
      at = max(at, found.start)
      guard var place = find(makeRef(client, at)) else { return }
      let slot = Int(order[place.order])
      var current = slots[slot].runs[place.run]
      if current.deleted {
        at = current.end
        continue
      }
      if place.offset > 0 {
        splitRun(place.order, place.run, at: place.offset)
        place.run += 1
        current = slots[slot].runs[place.run]
      }
      let take = min(end - at, current.length)
      if take < current.length { splitRun(place.order, place.run, at: take) }
      slots[slot].runs[place.run].deleted = true
      slots[slot].setSeq(max(slots[slot].seq(place.run), seq), place.run)
      adjust(place.order, visible: -Int(take), total: 0)
      mergeAround(place.order, place.run)
      at += take
    }
  }
}

/// Where a replica's last local insert ended: its run (`order`, `run`) and the visible position after it.
struct Typing {
  var client: UInt32
  var position: Int
  var order: Int
  var run: Int
}

/// Why an edit could not be made.
public enum TextError: Error, Equatable, Sendable, CustomStringConvertible {
  case positionOutOfRange(Int, count: Int)
  case rangeOutOfRange(Int, Int, count: Int)
  case invalidMark(String)
  case malformed(String)

  public var description: String {
    switch self {
    case .positionOutOfRange(let position, let count):
      "position \(position) is outside the text (0...\(count))"
    case .rangeOutOfRange(let from, let to, let count):
      "range \(from)..<\(to) is outside the text (0...\(count))"
    case .invalidMark(let why): "invalid mark: \(why)"
    case .malformed(let why): "malformed text state: \(why)"
    }
  }
}
