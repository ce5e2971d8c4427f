// Page ids to dense keys and back.
//
// The bytes of every live id sit back to back in `names`; `nameRefs[key]` says where, and keeps the id's hash.
// `keySlots` is an open-addressing table of keys homed by that hash, so a lookup hashes the id once and compares
// bytes only on a hash match. An id costs its length plus about 20 bytes (its `NameRef`, its `KeySet` and its
// slot), instead of a String object and a dictionary entry (over 100 bytes).
//
// Ids come from clients, so the hash is the standard library's seeded SipHash (`Hasher`): a client cannot choose
// ids that collide.

extension ChannelIndex {
  /// Whether `pageID` is a page id: 1 to 64 characters from `A-Z a-z 0-9 _ -`.
  public static func isValidPageID(_ pageID: String) -> Bool {
    var pageID = pageID
    return pageID.withUTF8 { isValidPageID($0) }
  }

  /// The key of a page id, interning it if it has none.
  ///
  /// A key interned here lives until its channel has had subscribers and lost them all, or until
  /// `releaseIfUnused(_:)`: prefer `subscribe(_:toPageIDs:)`, which interns and subscribes at once. `pageID` must be
  /// valid (`isValidPageID(_:)`); the broker rejects other ids before they get here.
  public mutating func key(for pageID: String) -> PageKey {
    var pageID = pageID
    return pageID.withUTF8 { internKey($0) }
  }

  /// The key of a page id, if it has one (a page somebody subscribes to). Nil for invalid ids.
  public func existingKey(for pageID: String) -> PageKey? {
    var pageID = pageID
    return pageID.withUTF8 { existingKey(utf8: $0) }
  }

  /// The key of a page id given as its UTF-8 bytes (straight from a request body, with no String made), if it
  /// has one. Nil for invalid ids.
  public func existingKey(utf8 pageID: UnsafeBufferPointer<UInt8>) -> PageKey? {
    guard Self.isValidPageID(pageID), !keySlots.isEmpty else { return nil }
    return findKey(pageID, hash: Self.hash(pageID)).key.map(PageKey.init)
  }

  /// The page id of a live key.
  public func pageID(for key: PageKey) -> String {
    withPageID(for: key) { String(decoding: $0, as: UTF8.self) }
  }

  /// Calls `body` with the UTF-8 bytes of a live key's page id, without making a String (for encoders).
  public func withPageID<Result>(
    for key: PageKey, _ body: (UnsafeBufferPointer<UInt8>) throws -> Result
  ) rethrows -> Result {
    precondition(isLive(key), "page key \(key.rawValue) is not live")
    let ref = nameRefs[Int(key.rawValue)]
    return try names.withUnsafeBufferPointer { names in
      try body(UnsafeBufferPointer(rebasing: names[Int(ref.offset)..<Int(ref.offset) + Int(ref.length)]))
    }
  }

  /// Releases a key that has no subscribers (interned by `key(for:)` and never subscribed to); returns whether it
  /// did. A key with subscribers, or not live, is left alone.
  @discardableResult
  public mutating func releaseIfUnused(_ key: PageKey) -> Bool {
    guard isLive(key), channelSubscribers[Int(key.rawValue)].isEmpty else { return false }
    release(key.rawValue)
    return true
  }

  // MARK: Internals

  static func isValidPageID(_ id: UnsafeBufferPointer<UInt8>) -> Bool {
    guard id.count >= 1 && id.count <= 64 else { return false }
    for index in 0..<id.count {
      let byte = id[index]
      let letter = byte | 0x20  // ASCII upper case to lower case; no other allowed byte lands in a...z
      guard
        (letter >= 0x61 && letter <= 0x7A) || (byte >= 0x30 && byte <= 0x39) || byte == 0x5F || byte == 0x2D
      else { return false }
    }
    return true
  }

  static func hash(_ id: UnsafeBufferPointer<UInt8>) -> UInt32 {
    var hasher = Hasher()
    hasher.combine(bytes: UnsafeRawBufferPointer(id))
    return UInt32(truncatingIfNeeded: hasher.finalize())
  }

  mutating func internKey(_ id: UnsafeBufferPointer<UInt8>) -> PageKey {
    precondition(Self.isValidPageID(id), "page ids are [A-Za-z0-9_-]{1,64}")
    let hash = Self.hash(id)
    var slot = 0
    if !keySlots.isEmpty {
      let found = findKey(id, hash: hash)
      if let key = found.key { return PageKey(key) }
      slot = found.slot
    }
    if (channelCount + 1) * 4 > keySlots.count * 3 {
      resizeKeySlots(to: Swift.max(8, keySlots.count * 2))
      slot = findKey(id, hash: hash).slot
    }
    precondition(names.count + id.count <= Int(UInt32.max), "page id arena full")
    let key = allocateKey()
    nameRefs[Int(key)] = NameRef(offset: UInt32(names.count), hash: hash, length: UInt8(id.count))
    names.append(contentsOf: id)
    keySlots[slot] = key
    channelCount += 1
    return PageKey(key)
  }

  /// The slot holding the key of `id`, or else the free slot ending its probe run. `keySlots` must not be empty.
  func findKey(_ id: UnsafeBufferPointer<UInt8>, hash: UInt32) -> (slot: Int, key: UInt32?) {
    let mask = keySlots.count - 1
    var slot = Int(hash) & mask
    while true {
      let key = keySlots[slot]
      if key == KeySet.free { return (slot, nil) }
      let ref = nameRefs[Int(key)]
      if ref.hash == hash && Int(ref.length) == id.count && nameBytes(ref, equal: id) { return (slot, key) }
      slot = (slot + 1) & mask
    }
  }

  /// Compares the stored id of `ref` with `id` (same length), eight bytes at a time.
  private func nameBytes(_ ref: NameRef, equal id: UnsafeBufferPointer<UInt8>) -> Bool {
    names.withUnsafeBytes { names in
      let stored = UnsafeRawBufferPointer(rebasing: names[Int(ref.offset)..<Int(ref.offset) + id.count])
      let given = UnsafeRawBufferPointer(id)
      var offset = 0
      while offset + 8 <= id.count {
        let a = stored.loadUnaligned(fromByteOffset: offset, as: UInt64.self)
        if a != given.loadUnaligned(fromByteOffset: offset, as: UInt64.self) { return false }
        offset += 8
      }
      while offset < id.count {
        if stored[offset] != given[offset] { return false }
        offset += 1
      }
      return true
    }
  }

  private mutating func allocateKey() -> UInt32 {
    if let key = freeKeys.popLast() { return key }
    precondition(nameRefs.count < Int(KeySet.free), "page keys exhausted")
    nameRefs.append(NameRef(offset: 0, hash: 0, length: 0))
    channelSubscribers.append(KeySet())
    return UInt32(nameRefs.count - 1)
  }

  /// Forgets a channel with no subscribers: its id, its slot, its key (onto the free list, or trimmed off the end),
  /// then gives memory back where a structure has become mostly empty.
  mutating func release(_ key: UInt32) {
    keyReleases &+= 1
    let ref = nameRefs[Int(key)]
    deleteKeySlot(of: key, hash: ref.hash)
    channelCount -= 1
    garbageNameBytes += Int(ref.length)

    if Int(key) == nameRefs.count - 1 {
      nameRefs.removeLast()
      channelSubscribers.removeLast()
      while let last = nameRefs.last, last.length == 0 {
        unlinkFreeKey(at: Int(last.offset))
        nameRefs.removeLast()
        channelSubscribers.removeLast()
      }
    } else {
      nameRefs[Int(key)] = NameRef(offset: UInt32(freeKeys.count), hash: 0, length: 0)
      freeKeys.append(key)
    }

    if channelCount == 0 {
      // No live key is left: every key, slot and name can go, whatever order the keys were released in (a last
      // release in the middle of nameRefs would otherwise leave the dead entries before it allocated).
      keySlots = []
      names = []
      nameRefs = []
      channelSubscribers = []
      freeKeys = []
      garbageNameBytes = 0
    } else {
      if keySlots.count > 8 && channelCount * 8 < keySlots.count { resizeKeySlots(to: keySlots.count / 2) }
      // Compacting costs the live bytes, which are no more than the garbage it frees: O(1) per released byte.
      if garbageNameBytes * 2 >= names.count { compactNames() }
    }
    shrinkIfSparse(&nameRefs)
    shrinkIfSparse(&channelSubscribers)
    shrinkIfSparse(&freeKeys)
  }

  /// Removes the free key at `position` of `freeKeys` (the last one moves into its place).
  private mutating func unlinkFreeKey(at position: Int) {
    let moved = freeKeys.removeLast()
    if position < freeKeys.count {
      freeKeys[position] = moved
      nameRefs[Int(moved)].offset = UInt32(position)
    }
  }

  private mutating func deleteKeySlot(of key: UInt32, hash: UInt32) {
    let mask = keySlots.count - 1
    var hole = Int(hash) & mask
    while keySlots[hole] != key { hole = (hole + 1) & mask }
    var slot = hole
    while true {
      slot = (slot + 1) & mask
      let next = keySlots[slot]
      if next == KeySet.free { break }
      let home = Int(nameRefs[Int(next)].hash) & mask
      if (slot - home) & mask >= (slot - hole) & mask {
        keySlots[hole] = next
        hole = slot
      }
    }
    keySlots[hole] = KeySet.free
  }

  private mutating func resizeKeySlots(to slotCount: Int) {
    var table = ContiguousArray<UInt32>(repeating: KeySet.free, count: slotCount)
    let mask = slotCount - 1
    for key in keySlots where key != KeySet.free {
      var slot = Int(nameRefs[Int(key)].hash) & mask
      while table[slot] != KeySet.free { slot = (slot + 1) & mask }
      table[slot] = key
    }
    keySlots = table
  }

  /// Rewrites the arena with live ids only. Walks the key table, so it costs the live channels, not the keys.
  private mutating func compactNames() {
    var compacted = ContiguousArray<UInt8>()
    compacted.reserveCapacity(names.count - garbageNameBytes)
    for key in keySlots where key != KeySet.free {
      let ref = nameRefs[Int(key)]
      nameRefs[Int(key)].offset = UInt32(compacted.count)
      compacted.append(contentsOf: names[Int(ref.offset)..<Int(ref.offset) + Int(ref.length)])
    }
    names = compacted
    garbageNameBytes = 0
  }
}

/// Reallocates an array that is under a quarter full with room for twice its count, so memory follows the live
/// entries down as well as up.
func shrinkIfSparse<Element>(_ array: inout ContiguousArray<Element>) {
  guard array.capacity > 16 && array.count * 4 < array.capacity else { return }
  var smaller = ContiguousArray<Element>()
  smaller.reserveCapacity(array.count * 2)
  smaller.append(contentsOf: array)
  array = smaller
}
