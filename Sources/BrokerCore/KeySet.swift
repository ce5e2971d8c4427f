/// A set of 32-bit keys (subscriber ids or page keys), laid out for millions of mostly small sets.
///
/// Storage by size:
/// - empty: nothing on the heap;
/// - one key: the key inline (a page with one subscriber, the common case, costs no allocation);
/// - two or more: an open-addressing table with linear probing: a power-of-two number of slots holding the keys,
///   `KeySet.free` in empty slots, between 1/8 (above the minimum size) and 3/4 full, so a set that grows
///   doubles and a set that shrinks gives memory back. Removal shifts the rest of the run back instead of leaving
///   a tombstone, so churn never slows lookups down.
///
/// The value is 16 bytes (count, inline key, table reference). The caller passes the hash seed to every call, so
/// the index keeps one seed instead of every set keeping a copy.
struct KeySet: Sendable {
  /// Marks a free slot; never a member (`SubscriberID` reserves it; page keys never reach it).
  static let free: UInt32 = .max
  /// Slots of the smallest table (two or three keys).
  static let minimumSlots = 4

  private var storedCount: UInt32 = 0
  /// The only key while `storedCount == 1` and `slots` is empty.
  private var single: UInt32 = KeySet.free
  private var slots: ContiguousArray<UInt32> = []

  var count: Int { Int(storedCount) }
  var isEmpty: Bool { storedCount == 0 }

  /// Heap bytes held: the table's array header and capacity, 0 when inline.
  var heapBytes: Int { arrayBytes(slots) }

  func contains(_ key: UInt32, seed: UInt32) -> Bool {
    if slots.isEmpty { return storedCount == 1 && single == key }
    return find(key, seed: seed).found
  }

  /// Adds `key`; returns false if it was already there.
  mutating func insert(_ key: UInt32, seed: UInt32) -> Bool {
    if slots.isEmpty {
      if storedCount == 0 {
        single = key
        storedCount = 1
        return true
      }
      if single == key { return false }
      rehash(slotCount: KeySet.minimumSlots, seed: seed)
    }
    var (index, found) = find(key, seed: seed)
    if found { return false }
    if (count + 1) * 4 > slots.count * 3 {
      rehash(slotCount: slots.count * 2, seed: seed)
      index = find(key, seed: seed).index
    }
    slots[index] = key
    storedCount += 1
    return true
  }

  /// Removes `key`; returns false if it was not there.
  mutating func remove(_ key: UInt32, seed: UInt32) -> Bool {
    if slots.isEmpty {
      guard storedCount == 1, single == key else { return false }
      storedCount = 0
      single = KeySet.free
      return true
    }
    let (index, found) = find(key, seed: seed)
    guard found else { return false }
    deleteSlot(index, seed: seed)
    storedCount -= 1
    if storedCount == 1 {
      single = slots.first { $0 != KeySet.free }!
      slots = []
    } else if slots.count > KeySet.minimumSlots && count * 8 < slots.count {
      rehash(slotCount: slots.count / 2, seed: seed)
    }
    return true
  }

  /// Calls `body` with every key, in table order.
  func forEachKey(_ body: (UInt32) throws -> Void) rethrows {
    if slots.isEmpty {
      if storedCount == 1 { try body(single) }
      return
    }
    for key in slots where key != KeySet.free { try body(key) }
  }

  // MARK: Positions, for the index's Collection views
  //
  // Inline, position 0 is the key; in a table, positions are slot indices of occupied slots.

  var startPosition: Int { slots.isEmpty ? 0 : occupiedPosition(from: 0) }
  var endPosition: Int { slots.isEmpty ? count : slots.count }
  func position(after position: Int) -> Int {
    slots.isEmpty ? position + 1 : occupiedPosition(from: position + 1)
  }
  func key(at position: Int) -> UInt32 { slots.isEmpty ? single : slots[position] }

  private func occupiedPosition(from position: Int) -> Int {
    var position = position
    while position < slots.count && slots[position] == KeySet.free { position += 1 }
    return position
  }

  // MARK: Table

  /// The slot holding `key`, or else the free slot that ends its probe run.
  private func find(_ key: UInt32, seed: UInt32) -> (index: Int, found: Bool) {
    let mask = slots.count - 1
    var index = homeSlot(of: key, seed: seed, mask: mask)
    while true {
      let occupant = slots[index]
      if occupant == key { return (index, true) }
      if occupant == KeySet.free { return (index, false) }
      index = (index + 1) & mask
    }
  }

  /// Empties `hole` and moves later keys of its run back, each only if that keeps it reachable from its home.
  private mutating func deleteSlot(_ hole: Int, seed: UInt32) {
    let mask = slots.count - 1
    var hole = hole
    var index = hole
    while true {
      index = (index + 1) & mask
      let key = slots[index]
      if key == KeySet.free { break }
      let home = homeSlot(of: key, seed: seed, mask: mask)
      // The key may fill the hole if its home is not after the hole in the run (cyclic distances).
      if (index - home) & mask >= (index - hole) & mask {
        slots[hole] = key
        hole = index
      }
    }
    slots[hole] = KeySet.free
  }

  private mutating func rehash(slotCount: Int, seed: UInt32) {
    var table = ContiguousArray<UInt32>(repeating: KeySet.free, count: slotCount)
    let mask = slotCount - 1
    table.withUnsafeMutableBufferPointer { table in
      func place(_ key: UInt32) {
        var index = homeSlot(of: key, seed: seed, mask: mask)
        while table[index] != KeySet.free { index = (index + 1) & mask }
        table[index] = key
      }
      forEachKey(place)
    }
    slots = table
    single = KeySet.free
  }

  /// Checks the layout rules above; for tests.
  func violations(seed: UInt32) -> [String] {
    var problems: [String] = []
    if slots.isEmpty {
      if storedCount > 1 { problems.append("\(storedCount) keys but no table") }
      return problems
    }
    let occupied = slots.filter { $0 != KeySet.free }
    if occupied.count != count { problems.append("count \(count), table holds \(occupied.count)") }
    if count < 2 { problems.append("table kept for \(count) keys") }
    if slots.count & (slots.count - 1) != 0 { problems.append("\(slots.count) slots") }
    if count * 4 > slots.count * 3 { problems.append("over 3/4 full") }
    if slots.count > KeySet.minimumSlots && count * 8 < slots.count { problems.append("under 1/8 full") }
    if Set(occupied).count != occupied.count { problems.append("duplicate keys") }
    for key in occupied where !find(key, seed: seed).found { problems.append("\(key) unreachable") }
    return problems
  }
}

/// The slot a key hashes to in a table of `mask + 1` slots.
///
/// Which keys share a set is up to clients (the pages a device subscribes to), so the mix is seeded per process:
/// without a secret a client could pick keys that fill one probe run and make every lookup in its set linear.
/// The mixer is `lowbias32` (Chris Wellons), a bijection with good avalanche, cheap enough for every probe.
@inline(__always)
func homeSlot(of key: UInt32, seed: UInt32, mask: Int) -> Int {
  var hash = key ^ seed
  hash ^= hash >> 16
  hash &*= 0x7FEB_352D
  hash ^= hash >> 15
  hash &*= 0x846C_A68B
  hash ^= hash >> 16
  return Int(truncatingIfNeeded: hash) & mask
}

enum HashSeed {
  /// The standard library's per-process random hashing seed, folded to 32 bits (so it is fixed under
  /// `SWIFT_DETERMINISTIC_HASHING`, like every `Hasher`).
  static let process: UInt32 = {
    var hasher = Hasher()
    hasher.combine(0x5041_4745 as UInt32)
    return UInt32(truncatingIfNeeded: hasher.finalize())
  }()
}

/// An estimate of the heap bytes of an array: Swift's 32-byte header plus its capacity; 0 when unallocated.
func arrayBytes<Element>(_ array: ContiguousArray<Element>) -> Int {
  array.capacity == 0 ? 0 : 32 + array.capacity * MemoryLayout<Element>.stride
}
