extension TextDocument {
  /// Applies another replica's update: its deletions, its insert runs (each character not already here,
  /// placed by FugueMax's rule), its mark operations. Idempotent and commutative. What cannot be placed yet
  /// (an origin or anchor not received) waits in the document and is placed as soon as what it needs arrives.
  ///
  /// `seq`: the broker's sequence, stamped on what this update adds (what `encoded(since:)` filters on); nil keeps
  /// the update's own.
  public mutating func apply(_ update: TextUpdate, seq: UInt64? = nil) {
    for range in update.deletes where range.length > 0 {
      let client = number(for: range.client)
      let end = range.counter.addingReportingOverflow(range.length)
      guard !end.overflow else { continue }
      clients[Int(client)].addDelete(range.counter, end.partialValue, seq: seq ?? range.seq)
      deletePresent(client: client, range.counter, end.partialValue, seq: seq ?? range.seq)
    }
    var runs = update.runs
    if let seq { for index in runs.indices { runs[index].seq = seq } }
    if !pendingRuns.isEmpty {
      runs.append(contentsOf: pendingRuns)
      pendingRuns = []
    }
    integrate(runs)
    var marks = update.marks
    if let seq { for index in marks.indices { marks[index].seq = seq } }
    if !pendingMarks.isEmpty {
      marks.append(contentsOf: pendingMarks)
      pendingMarks = []
    }
    for mark in marks { integrate(mark) }
    if pendingMarks.count > 1 {
      // A waiting operation delivered again (the same update twice, or inside a whole state) waits once: else
      // every exchange of states while it waits would double it.
      var seen = Set<MarkKey>()
      pendingMarks.removeAll {
        !seen.insert(MarkKey(client: $0.client, time: $0.time, type: $0.type)).inserted
      }
    }
    normalize()
  }

  /// Merges another replica's whole state into this one.
  public mutating func merge(_ other: TextDocument) {
    if clients.isEmpty && !other.clients.isEmpty {
      self = other
      return
    }
    apply(other.update(since: nil))
  }

  /// Places runs, each as soon as its origins are here: a run waiting for a character is parked under that
  /// character's replica and counter, and woken when a run bringing it is placed. Runs arriving in any order
  /// cost O(n log n), never a pass per run.
  mutating func integrate(_ incoming: [InsertRun]) {
    var ready = Self.typingOrder(incoming).reversed() as [InsertRun]
    // Per replica: runs waiting for one of its characters, sorted by that counter.
    var waiting: [UInt32: [(counter: UInt32, run: InsertRun)]] = [:]
    while let next = ready.popLast() {
      switch place(next) {
      case .done(let client, let start, let end):
        // In place (`waiting[client]!`): a copy of the array taken out and stored back costs its length.
        guard waiting[client] != nil else { continue }
        Self.wake(&waiting[client]!, start, end, into: &ready)
      case .waiting(let missing, let rest):
        let counter = refCounter(missing)
        Self.park(&waiting[refClient(missing), default: []], rest, counter)
      }
    }
    // In a fixed order (the state's bytes do not depend on hashing), each run once whatever its sequence: a run
    // delivered again while it waits (the same update twice, or inside a whole state) waits once, else every
    // exchange of states while it waits would double it.
    var seen = Set<InsertRun>()
    for client in waiting.keys.sorted() {
      for (_, run) in waiting[client]! {
        var key = run
        key.seq = 0
        if seen.insert(key).inserted { pendingRuns.append(run) }
      }
    }
  }

  /// `runs`, each replica's in the order it typed them (by counter; replicas in the order they first come): a
  /// run's origins were typed before it, so they are here by the time it is placed unless they are another
  /// replica's, and few runs wait. (A whole document's update lists its runs in document order, where nearly
  /// every run would wait for its right origin, and the scan between origins would cross what was typed later.)
  static func typingOrder(_ runs: [InsertRun]) -> [InsertRun] {
    guard runs.count > 1 else { return runs }
    var groups: [String: Int] = [:]
    var last: (name: String, group: Int)?
    var keys: [(group: Int, counter: UInt32, index: Int)] = []
    keys.reserveCapacity(runs.count)
    var sorted = true
    for (index, run) in runs.enumerated() {
      let group: Int
      if let last, last.name == run.client {
        group = last.group
      } else if let known = groups[run.client] {
        group = known
      } else {
        group = groups.count
        groups[run.client] = group
      }
      last = (run.client, group)
      let key = (group: group, counter: run.counter, index: index)
      if let previous = keys.last, (previous.group, previous.counter) > (key.group, key.counter) {
        sorted = false
      }
      keys.append(key)
    }
    if sorted { return runs }
    keys.sort { ($0.group, $0.counter, $0.index) < ($1.group, $1.counter, $1.index) }
    return keys.map { runs[$0.index] }
  }

  /// Moves the runs parked for counters `start ..< end` to `ready`.
  static func wake(
    _ parked: inout [(counter: UInt32, run: InsertRun)], _ start: UInt32, _ end: UInt32,
    into ready: inout [InsertRun]
  ) {
    var low = 0
    var high = parked.count
    while low < high {
      let mid = (low + high) / 2
      if parked[mid].counter < start { low = mid + 1 } else { high = mid }
    }
    var stop = low
    while stop < parked.count && parked[stop].counter < end {
      ready.append(parked[stop].run)
      stop += 1
    }
    if stop > low { parked.removeSubrange(low..<stop) }
  }

  /// Parks `run` for `counter`, after the runs already parked for it.
  static func park(_ parked: inout [(counter: UInt32, run: InsertRun)], _ run: InsertRun, _ counter: UInt32) {
    var low = 0
    var high = parked.count
    while low < high {
      let mid = (low + high) / 2
      if parked[mid].counter <= counter { low = mid + 1 } else { high = mid }
    }
    parked.insert((counter, run), at: low)
  }

  enum Placement {
    /// Characters `start ..< end` of the replica are placed (or were already here).
    case done(client: UInt32, start: UInt32, end: UInt32)
    /// `rest` (what is left of the run) waits for character `missing`.
    case waiting(missing: Ref, rest: InsertRun)
  }

  /// Places the characters of `run` this document lacks, in order, as long as their origins are here.
  mutating func place(_ run: InsertRun) -> Placement {
    let client = number(for: run.client)
    let (end, overflow) = run.counter.addingReportingOverflow(run.length)
    guard !overflow, run.length > 0, run.text.map({ $0.count == Int(run.length) }) ?? true else {
      return .done(client: client, start: run.counter, end: run.counter)  // malformed: nothing to place
    }
    let right = ref(run.right).map { $0 } ?? makeRef(number(for: run.right!.client), run.right!.counter)
    var at = run.counter
    while at < end {
      // Skip what is here already.
      let entry = clients[Int(client)].firstEntry(endingAfter: at)
      var pieceEnd = end
      if entry < clients[Int(client)].index.count {
        let found = clients[Int(client)].index[entry]
        if found.start <= at {
          at = min(found.end, end)
          continue
        }
        pieceEnd = min(found.start, end)
      }
      let left: Ref
      if at == run.counter {
        left = ref(run.left).map { $0 } ?? makeRef(number(for: run.left!.client), run.left!.counter)
      } else {
        left = makeRef(client, at - 1)
      }
      for dependency in [left, right] where !has(dependency) {
        var rest = run
        rest.counter = at
        rest.length = end - at
        rest.left = characterID(left)
        rest.text = run.text.map { Array($0[Int(at - run.counter)...]) }
        return .waiting(missing: dependency, rest: rest)
      }
      let text = run.text.map { $0[Int(at - run.counter)..<Int(pieceEnd - run.counter)] }
      placeOne(
        client: client, counter: at, length: pieceEnd - at, left: left, right: right, text: text, seq: run.seq
      )
      at = pieceEnd
    }
    return .done(client: client, start: run.counter, end: end)
  }

  /// Places characters `counter ..< counter + length` of `client`, all absent, whose origins are here: the
  /// YjsMod scan (FugueMax) between the left origin and the right one, with runs as units (a run's later
  /// characters have their predecessor as left origin: the scan skips them, as it would one by one).
  mutating func placeOne(
    client: UInt32, counter: UInt32, length: UInt32, left: Ref, right: Ref, text: ArraySlice<Unicode.Scalar>?,
    seq: UInt64
  ) {
    if let text {
      clients[Int(client)].content.write(text, at: counter)
    } else {
      clients[Int(client)].content.reserve(upTo: Int(counter + length))
    }
    let new = Run(
      client: client, counter: counter, length: length, deleted: text == nil, left: left, right: right)
    if text == nil { clients[Int(client)].addDelete(counter, counter + length, seq: seq) }
    if order.isEmpty {
      addFirstChunk()
      insertRun(new, seq: seq, at: 0, 0)
      applyKnownDeletes(client: client, counter, counter + length)
      normalize()
      return
    }
    // The scan starts right after the left origin and stops at the right origin: both become run boundaries.
    var start = (order: 0, run: 0)
    if left != 0 {
      let found = find(left)!
      if found.offset + 1 < run(found.order, found.run).length {
        splitRun(found.order, found.run, at: found.offset + 1)
      }
      start = (found.order, found.run + 1)
    }
    let end = Place(order: order.count, run: 0, offset: 0)
    var rightPlace = end
    if right != 0 {
      var found = find(right)!
      if found.offset > 0 {
        splitRun(found.order, found.run, at: found.offset)
        found.run += 1
        found.offset = 0
      }
      rightPlace = found
    }
    let leftPlace = left == 0 ? Place.start : find(left)!
    let name = clients[Int(client)].name
    func skipEmpty(_ at: inout (order: Int, run: Int)) {
      while at.order < order.count && at.run >= slots[Int(order[at.order])].runs.count {
        at = (at.order + 1, 0)
      }
    }
    var at = start
    skipEmpty(&at)
    var destination = at
    var scanning = false
    while true {
      if !scanning { destination = at }
      if at.order >= order.count { break }
      if at.order == rightPlace.order && at.run == rightPlace.run { break }
      let other = run(at.order, at.run)
      let leftOrder: Int
      if other.left == left {
        leftOrder = 0
      } else {
        let otherLeft = other.left == 0 ? Place.start : find(other.left)!
        leftOrder = otherLeft < leftPlace ? -1 : (otherLeft == leftPlace ? 0 : 1)
      }
      if leftOrder < 0 { break }
      if leftOrder == 0 {
        let rightOrder: Int
        if other.right == right {
          rightOrder = 0
        } else {
          let otherRight = other.right == 0 ? end : find(other.right)!
          rightOrder = otherRight < rightPlace ? -1 : (otherRight == rightPlace ? 0 : 1)
        }
        if rightOrder < 0 {
          scanning = true
        } else if rightOrder == 0 {
          let otherName = clients[Int(other.client)].name
          if (name, counter) < (otherName, other.counter) { break }
          scanning = false
        } else {
          scanning = false
        }
      }
      at.run += 1
      skipEmpty(&at)
    }
    if destination.order >= order.count {
      let last = order.count - 1
      destination = (last, slots[Int(order[last])].runs.count)
    }
    insertRun(new, seq: seq, at: destination.order, destination.run)
    applyKnownDeletes(client: client, counter, counter + length)
    normalize()
  }

  mutating func integrate(_ mark: MarkOperation) {
    let key = MarkKey(client: mark.client, time: mark.time, type: mark.type)
    guard !markKeys.contains(key) else { return }
    guard let start = storedAnchor(mark.start), let end = storedAnchor(mark.end) else {
      pendingMarks.append(mark)
      return
    }
    markKeys.insert(key)
    markStore.append(StoredMark(operation: mark, start: start, end: end))
  }

  func storedAnchor(_ anchor: MarkAnchor) -> StoredAnchor? {
    switch anchor {
    case .end: return .end
    case .before(let id):
      guard let ref = ref(id), has(ref) else { return nil }
      return .before(ref)
    case .after(let id):
      guard let ref = ref(id), has(ref) else { return nil }
      return .after(ref)
    }
  }
}

/// Identifies a mark operation (a replica makes at most one per type and clock reading).
struct MarkKey: Hashable {
  var client: String
  var time: MarkTime
  var type: MarkType
}

enum StoredAnchor {
  case before(Ref)
  case after(Ref)
  case end
}

struct StoredMark {
  var operation: MarkOperation
  var start: StoredAnchor
  var end: StoredAnchor
}
