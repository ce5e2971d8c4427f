// The pieces a `TextDocument` is made of: packed character references, runs, chunks of runs, and what the
// document keeps per replica (its typed characters, where its ids live, what of it is deleted).

/// A character reference packed in 64 bits: (the document's number for the replica + 1) << 32 | counter. 0 means
/// none (the document's start for a left origin, its end for a right one).
typealias Ref = UInt64

@inline(__always) func makeRef(_ client: UInt32, _ counter: UInt32) -> Ref {
  (UInt64(client) &+ 1) << 32 | UInt64(counter)
}
@inline(__always) func refClient(_ ref: Ref) -> UInt32 { UInt32(truncatingIfNeeded: (ref >> 32) &- 1) }
@inline(__always) func refCounter(_ ref: Ref) -> UInt32 { UInt32(truncatingIfNeeded: ref) }

/// Consecutive characters of one replica, each inserted right after the one before it, all with the same right
/// origin and the same deleted state. The unit everything works on: there are no per-character objects. 32
/// bytes: the broker's sequence of a run is kept beside it in its chunk (`Chunk.seqs`), as it is 0 on devices.
struct Run {
  var client: UInt32
  var counter: UInt32
  var length: UInt32
  var deleted: Bool
  /// The left origin of the first character (0: the document's start).
  var left: Ref
  /// The right origin of every character (0: the document's end).
  var right: Ref

  @inline(__always) var firstRef: Ref { makeRef(client, counter) }
  @inline(__always) var lastRef: Ref { makeRef(client, counter &+ length &- 1) }
  @inline(__always) var end: UInt32 { counter &+ length }
  @inline(__always) var visibleLength: Int { deleted ? 0 : Int(length) }

  /// Whether `next` continues this run (same replica, next counters, typed right after it, same right origin and
  /// state): the two are one run.
  @inline(__always) func continues(with next: Run) -> Bool {
    next.client == client && next.counter == end && next.left == lastRef && next.right == right
      && next.deleted == deleted
  }
}

/// Up to `TextDocument.maxRunsPerChunk` runs (more for a moment inside one operation), with their counts: the
/// document is a list of chunks so that an insert moves a few dozen runs, never the whole document.
struct Chunk {
  var runs: [Run] = []
  /// Each run's broker sequence: when its characters (or, for a tombstone, their deletion) reached the broker;
  /// 0 elsewhere. Empty while every one is 0 (a device's replica, until something comes from the broker), else
  /// as long as `runs`.
  var seqs: [UInt64] = []
  var visible = 0
  var total = 0

  @inline(__always) func seq(_ index: Int) -> UInt64 { seqs.isEmpty ? 0 : seqs[index] }

  mutating func setSeq(_ seq: UInt64, _ index: Int) {
    if seqs.isEmpty {
      guard seq != 0 else { return }
      seqs = Array(repeating: 0, count: runs.count)
    }
    seqs[index] = seq
  }

  mutating func insert(_ run: Run, seq: UInt64, at index: Int) {
    runs.reserveGently()
    runs.insert(run, at: index)
    if !seqs.isEmpty || seq != 0 {
      if seqs.isEmpty { seqs = Array(repeating: 0, count: runs.count - 1) }
      seqs.insert(seq, at: index)
    }
  }

  mutating func append(_ run: Run, seq: UInt64) {
    insert(run, seq: seq, at: runs.count)
  }

  mutating func remove(at index: Int) -> (run: Run, seq: UInt64) {
    let run = runs.remove(at: index)
    return (run, seqs.isEmpty ? 0 : seqs.remove(at: index))
  }
}

/// Where a character is: the chunk's place in document order, the run's index in the chunk, the offset in the
/// run. Ordered as the document is, as long as the document does not change.
struct Place: Comparable {
  var order: Int
  var run: Int
  var offset: UInt32

  static func < (a: Place, b: Place) -> Bool {
    if a.order != b.order { return a.order < b.order }
    if a.run != b.run { return a.run < b.run }
    return a.offset < b.offset
  }
  /// Before every character.
  static let start = Place(order: -1, run: 0, offset: 0)
}

/// Which chunk holds a replica's characters `start ..< end`.
struct IndexEntry {
  var start: UInt32
  var end: UInt32
  var slot: Int32
}

/// Deleted characters `start ..< end` of one replica (`seq`: the newest broker sequence that deleted any).
struct DeleteEntry {
  var start: UInt32
  var end: UInt32
  var seq: UInt64
}

/// The characters a replica typed, by counter: one byte each while all are ASCII, four once one is not. Counters
/// never seen (a gap) and deleted characters received without their text hold 0, never read.
struct ContentBuffer {
  private(set) var bytes: [UInt8] = []
  private(set) var scalars: [UInt32]? = nil

  var count: Int { scalars?.count ?? bytes.count }

  mutating func write(_ text: some Collection<Unicode.Scalar>, at counter: UInt32) {
    // Typing: ASCII at the end, byte by byte (no generic append, no pass to check it first).
    if scalars == nil && Int(counter) == bytes.count {
      var written = 0
      for scalar in text {
        guard scalar.isASCII else { break }
        bytes.reserveGently()
        bytes.append(UInt8(truncatingIfNeeded: scalar.value))
        written += 1
      }
      if written == text.count { return }
      bytes.removeLast(written)
    }
    let start = Int(counter)
    let end = start + text.count
    if scalars == nil, text.contains(where: { !$0.isASCII }) {
      scalars = bytes.map(UInt32.init)
      bytes = []
    }
    if var wide = scalars {
      scalars = nil
      if wide.count < end { wide.append(contentsOf: repeatElement(0, count: end - wide.count)) }
      var index = start
      for scalar in text {
        wide[index] = scalar.value
        index += 1
      }
      scalars = wide
    } else if start == bytes.count {
      bytes.reserveGently(text.count)
      bytes.append(contentsOf: text.lazy.map { UInt8(truncatingIfNeeded: $0.value) })
    } else {
      if bytes.count < end {
        bytes.reserveGently(end - bytes.count)
        bytes.append(contentsOf: repeatElement(0, count: end - bytes.count))
      }
      var index = start
      for scalar in text {
        bytes[index] = UInt8(truncatingIfNeeded: scalar.value)
        index += 1
      }
    }
  }

  /// Makes the buffer at least `count` long (a tombstone's counters, whose text is not known).
  mutating func reserve(upTo count: Int) {
    if let wide = scalars {
      if wide.count < count { scalars!.append(contentsOf: repeatElement(0, count: count - wide.count)) }
    } else if bytes.count < count {
      bytes.reserveGently(count - bytes.count)
      bytes.append(contentsOf: repeatElement(0, count: count - bytes.count))
    }
  }

  func scalars(_ range: Range<Int>) -> [Unicode.Scalar] {
    if let wide = scalars { return wide[range].map { Unicode.Scalar($0) ?? "\u{FFFD}" } }
    return bytes[range].map { Unicode.Scalar($0) }
  }

  /// Appends the UTF-8 of characters `range` to `out`.
  func appendUTF8(_ range: Range<Int>, to out: inout [UInt8]) {
    if let wide = scalars {
      for value in wide[range] {
        let scalar = Unicode.Scalar(value) ?? "\u{FFFD}"
        UTF8.encode(scalar) { out.append($0) }
      }
    } else {
      out.append(contentsOf: bytes[range])
    }
  }

  var memoryBytes: Int { scalars.map { $0.capacity * 4 } ?? bytes.capacity }
}

/// What a document keeps about one replica.
struct ClientState {
  let name: String
  var content = ContentBuffer()
  /// Sorted, disjoint: which chunk holds each of the replica's characters the document has.
  var index: [IndexEntry] = []
  /// Sorted, disjoint: the replica's characters deleted (whether the document has them yet or not).
  var deletes: [DeleteEntry] = []
  /// The entry of `deletes` that `addDelete` touched last: where it looks first.
  var deleteHint = 0

  init(name: String) { self.name = name }

  /// The counter after the replica's highest one seen.
  var nextCounter: UInt32 { UInt32(content.count) }

  /// The index entry holding `counter`.
  func entry(_ counter: UInt32) -> Int? {
    var low = 0
    var high = index.count
    while low < high {
      let mid = (low + high) / 2
      if index[mid].end <= counter { low = mid + 1 } else { high = mid }
    }
    return low < index.count && index[low].start <= counter ? low : nil
  }

  func contains(_ counter: UInt32) -> Bool { entry(counter) != nil }

  /// The first entry ending after `counter`.
  func firstEntry(endingAfter counter: UInt32) -> Int {
    var low = 0
    var high = index.count
    while low < high {
      let mid = (low + high) / 2
      if index[mid].end <= counter { low = mid + 1 } else { high = mid }
    }
    return low
  }

  /// Records that characters `start ..< end` are in chunk `slot`.
  mutating func assign(_ start: UInt32, _ end: UInt32, to slot: Int32) {
    if let last = index.last, last.end <= start {
      if last.end == start && last.slot == slot {
        index[index.count - 1].end = end
      } else {
        index.reserveGently()
        index.append(IndexEntry(start: start, end: end, slot: slot))
      }
      return
    }
    let first = firstEntry(endingAfter: start)
    var last = first
    while last < index.count && index[last].start < end { last += 1 }
    // Already there (a chunk's split leaves most runs where they were indexed).
    if last == first + 1 && index[first].slot == slot && index[first].start <= start
      && index[first].end >= end
    {
      return
    }
    // Entries first ..< last give way to what of them lies before and after start ..< end, and the new entry
    // between: written in place, no array for the replacement.
    let before = first < last && index[first].start < start ? index[first].start : nil
    let after = last > first && index[last - 1].end > end ? index[last - 1].end : nil
    let outside = (
      before: first < last ? index[first].slot : slot, after: last > first ? index[last - 1].slot : slot
    )
    let replacementCount = (before == nil ? 0 : 1) + 1 + (after == nil ? 0 : 1)
    let new = IndexEntry(start: start, end: end, slot: slot)
    if last - first < replacementCount {
      index.reserveGently(replacementCount - (last - first))
      index.insert(contentsOf: repeatElement(new, count: replacementCount - (last - first)), at: first)
    } else if last - first > replacementCount {
      index.removeSubrange((first + replacementCount)..<last)
    }
    var written = first
    if let before {
      index[written] = IndexEntry(start: before, end: start, slot: outside.before)
      written += 1
    }
    index[written] = new
    if let after { index[written + 1] = IndexEntry(start: end, end: after, slot: outside.after) }
    // Join neighbours in the same chunk.
    var at = max(first - 1, 0)
    let stop = min(first + replacementCount + 1, index.count)
    var limit = stop
    while at + 1 < limit {
      if index[at].end == index[at + 1].start && index[at].slot == index[at + 1].slot {
        index[at].end = index[at + 1].end
        index.remove(at: at + 1)
        limit -= 1
      } else {
        at += 1
      }
    }
  }

  /// Whether the document has every character `start ..< end` of the replica.
  func covers(_ start: UInt32, _ end: UInt32) -> Bool {
    var at = start
    var entry = firstEntry(endingAfter: start)
    while at < end {
      guard entry < index.count, index[entry].start <= at else { return false }
      at = index[entry].end
      entry += 1
    }
    return true
  }

  /// `ranges` as `addDelete` would leave them, added one by one: sorted, overlapping and touching ones joined
  /// (with the newest sequence).
  static func joined(_ ranges: [DeleteEntry]) -> [DeleteEntry] {
    var result: [DeleteEntry] = []
    result.reserveCapacity(ranges.count)
    for range in ranges.sorted(by: { $0.start < $1.start }) {
      if let last = result.last, last.end >= range.start {
        result[result.count - 1].end = max(last.end, range.end)
        result[result.count - 1].seq = max(last.seq, range.seq)
      } else {
        result.append(range)
      }
    }
    return result
  }

  /// Records characters `start ..< end` as deleted; whether any of them was not already.
  @discardableResult
  mutating func addDelete(_ start: UInt32, _ end: UInt32, seq: UInt64) -> Bool {
    if let last = deletes.last, last.end <= start {
      if last.end == start {
        deletes[deletes.count - 1].end = end
        deletes[deletes.count - 1].seq = max(last.seq, seq)
      } else {
        deletes.reserveGently()
        deletes.append(DeleteEntry(start: start, end: end, seq: seq))
      }
      return true
    }
    // The first entry that touches or follows start: the one the last call touched, for a backspace after a
    // backspace; otherwise searched for.
    var low = deleteHint
    if !(low < deletes.count && deletes[low].end >= start && (low == 0 || deletes[low - 1].end < start)) {
      low = 0
      var high = deletes.count
      while low < high {
        let mid = (low + high) / 2
        if deletes[mid].end < start { low = mid + 1 } else { high = mid }
      }
    }
    deleteHint = low
    var last = low
    var merged = DeleteEntry(start: start, end: end, seq: seq)
    var covered: UInt64 = 0
    while last < deletes.count && deletes[last].start <= end {
      let entry = deletes[last]
      covered += UInt64(
        min(entry.end, end) > max(entry.start, start) ? min(entry.end, end) - max(entry.start, start) : 0)
      merged.start = min(merged.start, entry.start)
      merged.end = max(merged.end, entry.end)
      merged.seq = max(merged.seq, entry.seq)
      last += 1
    }
    // In place: no array for the one entry that replaces those it touches.
    if last == low {
      deletes.reserveGently()
      deletes.insert(merged, at: low)
    } else {
      deletes[low] = merged
      if last > low + 1 { deletes.removeSubrange((low + 1)..<last) }
    }
    return covered < UInt64(end - start)
  }

  /// The deleted ranges overlapping `start ..< end`, clipped to it.
  func deletedRanges(_ start: UInt32, _ end: UInt32) -> [(UInt32, UInt32)] {
    guard let last = deletes.last, last.end > start else { return [] }
    var low = 0
    var high = deletes.count
    while low < high {
      let mid = (low + high) / 2
      if deletes[mid].end <= start { low = mid + 1 } else { high = mid }
    }
    var result: [(UInt32, UInt32)] = []
    while low < deletes.count && deletes[low].start < end {
      result.append((max(deletes[low].start, start), min(deletes[low].end, end)))
      low += 1
    }
    return result
  }
}

extension Array {
  /// Room for `extra` more elements, growing by an eighth rather than doubling: a document's arrays live as long
  /// as it does, and doubling leaves up to half of each unused (automerge-paper: 11.2 bytes a character).
  @inline(__always) mutating func reserveGently(_ extra: Int = 1) {
    if count + extra > capacity { reserveCapacity(count + extra + count / 8 + 4) }
  }
}
