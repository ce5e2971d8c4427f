/// The pending notifications of one subscriber, coalesced per page: only the newest `lastUpdatedTime` is kept.
///
/// FIFO by first enqueue among distinct pages: a page updated again keeps its place and takes the newer time; a
/// time older than (or equal to) the pending one changes nothing. The queue never holds two entries for one page,
/// so a slow subscriber holds at most one entry per page it subscribes to, and is never cut off for being slow.
///
/// Owned by the broker's loop thread, one per subscriber. Layout:
/// - `entries`: (time, page) in FIFO order from `head`; an entry whose page was removed becomes a hole
///   (`KeySet.free`) that draining skips. Drained space and holes are reclaimed by compacting, instead of growing
///   once they are half the array, and into a smaller array once the live entries fill under 1/8 of it.
/// - `slots`: while more than `linearScanLimit` entries are to be scanned, an open-addressing table from page to
///   its entry's position (4 bytes a slot; built at most half full, rebuilt past 3/4 and under 1/8); below that a
///   scan of one or two cache lines is faster than hashing.
/// An empty queue holds no heap memory. Every compaction and rebuild costs the entries appended, drained or
/// removed since the last one, so each operation is amortized O(1).
public struct CoalescingQueue: Sendable {
  struct Entry: Sendable {
    var lastUpdatedTime: UInt64
    var page: UInt32
  }

  /// Pending entries, at most this many, are found by a linear scan, without the table.
  static let linearScanLimit = 8

  private var entries: ContiguousArray<Entry> = []
  private var head = 0
  private var slots: ContiguousArray<UInt32> = []
  private let seed = HashSeed.process

  /// Pending entries (distinct pages).
  public private(set) var count = 0
  /// Enqueues that found their page already pending and were folded into its entry (newer or not): a metric.
  public private(set) var coalescedCount = 0

  public init() {}

  public var isEmpty: Bool { count == 0 }

  /// Heap bytes held, estimated from capacities.
  public var estimatedMemoryBytes: Int { arrayBytes(entries) + arrayBytes(slots) }

  /// Queues a change of `page`; returns true if this made a new entry, false if the page was already pending
  /// (its entry then takes `lastUpdatedTime` if that is newer).
  @discardableResult
  public mutating func enqueue(_ page: PageKey, lastUpdatedTime: UInt64) -> Bool {
    precondition(page.rawValue != KeySet.free, "page key UInt32.max is reserved")
    if let position = position(of: page.rawValue) {
      coalescedCount += 1
      if lastUpdatedTime > entries[position].lastUpdatedTime {
        entries[position].lastUpdatedTime = lastUpdatedTime
      }
      return false
    }
    append(Entry(lastUpdatedTime: lastUpdatedTime, page: page.rawValue))
    return true
  }

  /// Removes up to `max` entries, oldest first.
  public mutating func drain(max: Int) -> [(page: PageKey, lastUpdatedTime: UInt64)] {
    var drained: [(page: PageKey, lastUpdatedTime: UInt64)] = []
    drained.reserveCapacity(Swift.max(0, Swift.min(max, count)))
    drain(max: max, into: &drained)
    return drained
  }

  /// Removes up to `max` entries, oldest first, appending them to `output` (reuse it to drain without
  /// allocating); returns how many.
  @discardableResult
  public mutating func drain(max: Int, into output: inout [(page: PageKey, lastUpdatedTime: UInt64)]) -> Int {
    var drained = 0
    while drained < max && count > 0 {
      let entry = entries[head]
      head += 1
      if entry.page == KeySet.free { continue }
      if !slots.isEmpty { deleteSlot(of: entry.page) }
      output.append((PageKey(entry.page), entry.lastUpdatedTime))
      count -= 1
      drained += 1
    }
    if count == 0 { removeAll() } else { shrinkIfSparse() }
    return drained
  }

  /// Drops the pending entry of `page` (its subscriber unsubscribed from it); returns whether there was one.
  @discardableResult
  public mutating func remove(_ page: PageKey) -> Bool {
    guard let position = position(of: page.rawValue) else { return false }
    if !slots.isEmpty { deleteSlot(of: page.rawValue) }
    entries[position].page = KeySet.free
    count -= 1
    if count == 0 { removeAll() } else { shrinkIfSparse() }
    return true
  }

  /// Drops the pending entries of the pages `shouldRemove` picks (its subscriber may no longer see them); returns
  /// how many. O(pending entries).
  @discardableResult
  public mutating func removeAll(where shouldRemove: (PageKey) -> Bool) -> Int {
    var doomed: [PageKey] = []
    for position in head..<entries.count where entries[position].page != KeySet.free {
      let page = PageKey(entries[position].page)
      if shouldRemove(page) { doomed.append(page) }
    }
    // By page, not position: a removal may compact the entries.
    for page in doomed { remove(page) }
    return doomed.count
  }

  /// The pending time of `page`, if it is pending.
  public func pendingTime(of page: PageKey) -> UInt64? {
    position(of: page.rawValue).map { entries[$0].lastUpdatedTime }
  }

  /// Empties the queue and frees its memory. `coalescedCount` is kept.
  public mutating func removeAll() {
    entries = []
    slots = []
    head = 0
    count = 0
  }

  // MARK: Internals

  /// The entries in drain order, for tests.
  var pending: [(page: PageKey, lastUpdatedTime: UInt64)] {
    entries[head...].filter { $0.page != KeySet.free }.map { (PageKey($0.page), $0.lastUpdatedTime) }
  }

  private func position(of page: UInt32) -> Int? {
    if slots.isEmpty {
      for position in head..<entries.count where entries[position].page == page { return position }
      return nil
    }
    let mask = slots.count - 1
    var slot = homeSlot(of: page, seed: seed, mask: mask)
    while true {
      let position = slots[slot]
      if position == KeySet.free { return nil }
      if entries[Int(position)].page == page { return Int(position) }
      slot = (slot + 1) & mask
    }
  }

  private mutating func append(_ entry: Entry) {
    if entries.count == entries.capacity && entries.count - count >= count {
      compact(reservingCapacity: entries.capacity)
    }
    entries.append(entry)
    count += 1
    if slots.isEmpty {
      if entries.count - head > CoalescingQueue.linearScanLimit { rebuildSlots() }
    } else if count * 4 > slots.count * 3 {
      rebuildSlots()
    } else {
      insertSlot(UInt32(entries.count - 1))
    }
  }

  private mutating func shrinkIfSparse() {
    if entries.capacity > 64 && count * 8 < entries.capacity {
      compact(reservingCapacity: count * 2)
    } else if slots.count > 16 && count * 8 < slots.count {
      if entries.count - head > CoalescingQueue.linearScanLimit { rebuildSlots() } else { slots = [] }
    }
  }

  /// Moves the live entries, in order, to the front of a new array, and rebuilds or drops the table.
  private mutating func compact(reservingCapacity capacity: Int) {
    var live = ContiguousArray<Entry>()
    live.reserveCapacity(capacity)
    for entry in entries[head...] where entry.page != KeySet.free { live.append(entry) }
    entries = live
    head = 0
    if count > CoalescingQueue.linearScanLimit { rebuildSlots() } else { slots = [] }
  }

  /// Builds the table for the pending entries, at most half full so it takes as many again before growing.
  private mutating func rebuildSlots() {
    var slotCount = 16
    while slotCount < count * 2 { slotCount *= 2 }
    slots = ContiguousArray(repeating: KeySet.free, count: slotCount)
    for position in head..<entries.count where entries[position].page != KeySet.free {
      insertSlot(UInt32(position))
    }
  }

  private mutating func insertSlot(_ position: UInt32) {
    let mask = slots.count - 1
    var slot = homeSlot(of: entries[Int(position)].page, seed: seed, mask: mask)
    while slots[slot] != KeySet.free { slot = (slot + 1) & mask }
    slots[slot] = position
  }

  /// Deletes the slot of `page` (its entry must still hold it), shifting the rest of the run back.
  private mutating func deleteSlot(of page: UInt32) {
    let mask = slots.count - 1
    var hole = homeSlot(of: page, seed: seed, mask: mask)
    while entries[Int(slots[hole])].page != page { hole = (hole + 1) & mask }
    var slot = hole
    while true {
      slot = (slot + 1) & mask
      let position = slots[slot]
      if position == KeySet.free { break }
      let home = homeSlot(of: entries[Int(position)].page, seed: seed, mask: mask)
      if (slot - home) & mask >= (slot - hole) & mask {
        slots[hole] = position
        hole = slot
      }
    }
    slots[hole] = KeySet.free
  }

  /// Checks the layout rules above; for tests.
  func violations() -> [String] {
    var problems: [String] = []
    let live = pending
    if live.count != count { problems.append("count \(count), \(live.count) pending") }
    if Set(live.map(\.page)).count != live.count { problems.append("a page pending twice") }
    if head > entries.count { problems.append("head past the end") }
    if entries.capacity > 64 && count * 8 < entries.capacity { problems.append("entries under 1/8 full") }
    if slots.count > 16 && count * 8 < slots.count { problems.append("table under 1/8 full") }
    if count == 0 && (entries.capacity > 0 || slots.capacity > 0) {
      problems.append("empty but holds memory")
    }
    if !slots.isEmpty {
      let used = slots.filter { $0 != KeySet.free }
      if used.count != count { problems.append("\(used.count) slots for \(count) entries") }
      if count * 4 > slots.count * 3 { problems.append("table over 3/4 full") }
      for entry in live where position(of: entry.page.rawValue) == nil {
        problems.append("page \(entry.page.rawValue) unreachable")
      }
    } else if entries.count - head > CoalescingQueue.linearScanLimit {
      problems.append("\(entries.count - head) entries to scan without a table")
    }
    return problems
  }
}
