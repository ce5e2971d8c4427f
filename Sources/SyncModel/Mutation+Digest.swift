extension Mutation {
  /// A 64-bit digest of what the mutation says: its page, time and action with every field, but not its id and
  /// not how its JSON was written (member order, spacing, escapes, number spellings). The broker keeps it for each
  /// client's recent mutation ids, so that a mutation sent again under an id it has is told apart from another
  /// mutation under the same id (`id_reused`: two copies of one device's store, docs/protocol.md).
  ///
  /// Stable across processes and versions: a store keeps these values, so the function must never change (a test
  /// pins its output). Strings are hashed as their UTF-8 bytes with their length; maps in byte order of their
  /// keys; numbers by their bits (-0 as 0); every optional and variant with a tag of its own; 8 bytes a step
  /// (it runs for every mutation the broker applies), then a 64-bit finalizer (SplitMix64's), so that near inputs
  /// spread.
  public var contentDigest: UInt64 {
    var digest = MutationDigest()
    digest.text(page.rawValue)
    digest.number(time.millis)
    digest.number(UInt64(time.counter))
    digest.text(action.typeName)
    switch action {
    case .createPage(let parent, let title), .createDatabase(let parent, let title):
      digest.optionalText(parent?.rawValue)
      digest.text(title)
    case .createRow(let database, let title, let properties):
      digest.text(database.rawValue)
      digest.text(title)
      digest.properties(properties)
    case .setTitle(let title):
      digest.text(title)
    case .setProperty(let name, let value):
      digest.text(name)
      digest.optionalValue(value)
    case .addBlock(let block, let type, let text, let after, let attributes):
      digest.text(block.rawValue)
      digest.text(type)
      digest.text(text)
      digest.optionalText(after?.rawValue)
      digest.attributes(attributes)
    case .editBlock(let block, let text, let attributes):
      digest.text(block.rawValue)
      digest.optionalText(text)
      if let attributes {
        digest.tag(1)
        digest.attributes(attributes)
      } else {
        digest.tag(0)
      }
    case .spliceText(let block, let ops), .markText(let block, let ops):
      digest.text(block.rawValue)
      digest.bytes(ops.bytes)
    case .moveBlock(let block, let after):
      digest.text(block.rawValue)
      digest.optionalText(after?.rawValue)
    case .deleteBlock(let block):
      digest.text(block.rawValue)
    case .movePage(let parent):
      digest.optionalText(parent?.rawValue)
    case .deletePage:
      break
    case .setView(let filter, let sort):
      if let filter {
        digest.tag(1)
        digest.text(filter.property)
        digest.value(filter.value)
      } else {
        digest.tag(0)
      }
      if let sort {
        digest.tag(1)
        digest.text(sort.property)
        digest.tag(sort.descending ? 1 : 0)
      } else {
        digest.tag(0)
      }
    }
    return digest.value
  }
}

/// A length-prefixed serialization of the mutation, hashed 8 bytes at a time (FNV-1a's step over 64-bit words,
/// then SplitMix64's mixer). Numbers and tags go in as words; byte strings as their length, then their bytes in
/// little-endian words, the last one padded with zeros.
private struct MutationDigest {
  private var state: UInt64 = 0xcbf2_9ce4_8422_2325

  private mutating func word(_ value: UInt64) {
    state = (state ^ value) &* 0x0000_0100_0000_01b3
    state ^= state >> 29
  }

  mutating func byte(_ byte: UInt8) { word(UInt64(byte)) }

  mutating func tag(_ value: UInt8) { byte(value) }

  mutating func number(_ value: UInt64) { word(value) }

  mutating func bytes(_ value: UnsafeBufferPointer<UInt8>) {
    word(UInt64(value.count))
    var index = 0
    while index + 8 <= value.count {
      var packed: UInt64 = 0
      for offset in 0..<8 { packed |= UInt64(value[index + offset]) << UInt64(offset * 8) }
      word(packed)
      index += 8
    }
    if index < value.count {
      var packed: UInt64 = 0
      for offset in 0..<(value.count - index) {
        packed |= UInt64(value[index + offset]) << UInt64(offset * 8)
      }
      word(packed)
    }
  }

  mutating func bytes(_ value: [UInt8]) { value.withUnsafeBufferPointer { bytes($0) } }

  mutating func text(_ value: String) {
    var value = value
    value.withUTF8 { bytes($0) }
  }

  mutating func optionalText(_ value: String?) {
    if let value {
      tag(1)
      text(value)
    } else {
      tag(0)
    }
  }

  mutating func value(_ value: PropertyValue) {
    switch value {
    case .string(let text):
      tag(1)
      self.text(text)
    case .number(let number):
      tag(2)
      self.number((number == 0 ? 0 : number).bitPattern)
    case .bool(let flag):
      tag(3)
      tag(flag ? 1 : 0)
    case .list(let items):
      tag(4)
      number(UInt64(items.count))
      for item in items { text(item) }
    }
  }

  mutating func optionalValue(_ value: PropertyValue?) {
    if let value {
      tag(1)
      self.value(value)
    } else {
      tag(0)
    }
  }

  mutating func properties(_ map: [String: PropertyValue]) {
    number(UInt64(map.count))
    for key in map.keys.sorted(by: { $0.utf8.lexicographicallyPrecedes($1.utf8) }) {
      text(key)
      value(map[key]!)
    }
  }

  mutating func attributes(_ map: [String: String]) {
    number(UInt64(map.count))
    for key in map.keys.sorted(by: { $0.utf8.lexicographicallyPrecedes($1.utf8) }) {
      text(key)
      text(map[key]!)
    }
  }

  var value: UInt64 {
    var z = state &+ 0x9e37_79b9_7f4a_7c15
    z = (z ^ (z >> 30)) &* 0xbf58_476d_1ce4_e5b9
    z = (z ^ (z >> 27)) &* 0x94d0_49bb_1331_11eb
    return z ^ (z >> 31)
  }
}
