import RichText
import SeededRandom
import Testing

/// A single replica's random edits checked after every step against models kept the plainest way: the text as
/// an array of Unicode scalars, and the marks as every character ever typed (deleted ones flagged) with the
/// operations covering it.
@Suite struct ReferenceModelTests {
  /// Scalars the random edits type: ASCII, two-byte, three-byte and four-byte UTF-8, a lone combining mark.
  static let alphabet: [Unicode.Scalar] = ["a", "b", "c", " ", "é", "ß", "中", "😀", "\u{301}", "𝄞", "\n"]

  static func randomText(_ random: inout SplitMix64, length: Int) -> [Unicode.Scalar] {
    (0..<length).map { _ in alphabet[random.int(0...(alphabet.count - 1))] }
  }

  static func string(_ scalars: [Unicode.Scalar]) -> String {
    var view = String.UnicodeScalarView()
    view.append(contentsOf: scalars)
    return String(view)
  }

  /// Random splices (typing runs, backspacing, pasting, replacing, by three replicas' names) on one document,
  /// compared with the same splices on an array after every step; now and then the state's round trip too.
  @Test(arguments: 0..<10)
  func splicesMatchAnArray(seed: UInt64) throws {
    var random = SplitMix64(seed: seed)
    var document = TextDocument()
    var model: [Unicode.Scalar] = []
    var cursor = 0
    for step in 0..<1_000 {
      let client = ["ann", "bo", "cy"][random.int(0...2)]
      var position = random.chance(60) ? min(cursor, model.count) : random.int(0...model.count)
      var delete = 0
      var insert: [Unicode.Scalar] = []
      switch random.int(0...9) {
      case 0...5: insert = Self.randomText(&random, length: random.chance(80) ? 1 : random.int(2...12))
      case 6...7:
        if position > 0 && random.chance(50) { position -= 1 }  // backspace
        delete = min(model.count - position, random.chance(70) ? 1 : random.int(2...8))
      default:
        delete = min(model.count - position, random.int(0...5))
        insert = Self.randomText(&random, length: random.int(1...6))
      }
      _ = try document.splice(at: position, delete: delete, insert: Self.string(insert), client: client)
      model.replaceSubrange(position..<(position + delete), with: insert)
      cursor = position + insert.count
      guard document.scalars == model, document.count == model.count else {
        Issue.record("seed \(seed) step \(step): splice(\(position), \(delete), \(insert)) diverges")
        return
      }
      if step % 150 == 149 {
        #expect(Array(document.text.unicodeScalars) == model)
        expectRoundTrips(document)
      }
    }
    // More runs than one chunk holds (`TextDocument.maxRunsPerChunk`, 64): chunks were split.
    #expect(document.runCount > 2 * 64, "seed \(seed): too few runs to split chunks")
  }

  /// Random splices and marks of every type (set and removed, with values, conflicting clock readings and
  /// replica names) on one document, its marks compared with `MarkModel`'s after every step.
  @Test(arguments: 0..<100)
  func marksMatchAPerCharacterModel(seed: UInt64) throws {
    var random = SplitMix64(seed: seed)
    var document = TextDocument(text: "abcdef", client: "base")
    var model = MarkModel(text: Array("abcdef".unicodeScalars))
    var used: Set<String> = []
    for step in 0..<100 {
      let client = ["ann", "bo", "cy"][random.int(0...2)]
      if model.visible.isEmpty || random.chance(50) {
        let count = model.visible.count
        let position = random.int(0...count)
        let delete = random.chance(40) ? min(count - position, random.int(1...3)) : 0
        let insert =
          random.chance(80) || delete == 0 ? Self.randomText(&random, length: random.int(1...3)) : []
        _ = try document.splice(at: position, delete: delete, insert: Self.string(insert), client: client)
        model.splice(at: position, delete: delete, insert: insert)
      } else {
        let count = model.visible.count
        let from = random.int(0...(count - 1))
        let to = random.int((from + 1)...min(count, from + 5))
        let type = MarkType.allCases[random.int(0...(MarkType.allCases.count - 1))]
        let remove = random.chance(25)
        let value = type.needsValue && !remove ? ["x", "y"][random.int(0...1)] : nil
        let time = MarkTime(millis: UInt64(random.int(0...3)), counter: UInt32(random.int(0...1)))
        // A replica makes one operation of a type per clock reading.
        guard used.insert("\(client) \(time) \(type)").inserted else { continue }
        _ = try document.mark(
          from: from, to: to, type: type, value: value, remove: remove, client: client, time: time)
        model.mark(from: from, to: to, type: type, value: value, remove: remove, client: client, time: time)
      }
      guard document.scalars == model.scalars, document.marks == model.marks else {
        Issue.record(
          "seed \(seed) step \(step): \(document.marks) but the model has \(model.marks) over \(model.scalars)"
        )
        return
      }
    }
    expectRoundTrips(document)
  }
}

/// What a single replica's marks must be, without anchors or runs: every character ever typed, in document
/// order, deleted ones flagged, each with the operations that cover it. An operation covers the characters from
/// the first one marked to the last one marked (to the one before the next visible character, deleted ones
/// included, for a type that grows at its end). Text typed between characters `a` and `b` is covered by an
/// operation that covers `a` and either covers `b` or grows at its end. Where text goes among deleted
/// characters: right after the visible character before it (at the very start at position 0), or after the
/// last of those deleted characters that a non-growing operation ends at (covers, and not the next one).
/// A visible character's value for a type is that of its covering operation with the greatest (time, replica);
/// none if that operation is a removal.
struct MarkModel {
  struct Character {
    var scalar: Unicode.Scalar
    var deleted = false
    var covering: [Int] = []
  }

  struct Operation {
    var type: MarkType
    var value: String?
    var remove: Bool
    var client: String
    var time: MarkTime

    func wins(over other: Operation) -> Bool {
      (time.millis, time.counter, client) > (other.time.millis, other.time.counter, other.client)
    }
  }

  var characters: [Character]
  var operations: [Operation] = []

  init(text: [Unicode.Scalar]) { characters = text.map { Character(scalar: $0) } }

  /// Indices of the visible characters.
  var visible: [Int] { characters.indices.filter { !characters[$0].deleted } }

  var scalars: [Unicode.Scalar] { visible.map { characters[$0].scalar } }

  func covers(_ index: Int, _ operation: Int) -> Bool {
    index < characters.count && characters[index].covering.contains(operation)
  }

  mutating func splice(at position: Int, delete: Int, insert: [Unicode.Scalar]) {
    let visible = self.visible
    for index in visible[position..<(position + delete)] { characters[index].deleted = true }
    guard !insert.isEmpty else { return }
    var slot = 0
    if position > 0 {
      slot = visible[position - 1] + 1
      var at = slot
      while at < characters.count && characters[at].deleted {
        let endsHere = characters[at].covering.contains { operation in
          !operations[operation].type.growsAtEnd && !covers(at + 1, operation)
        }
        if endsHere { slot = at + 1 }
        at += 1
      }
    }
    var covering: [Int] = []
    if slot > 0 {
      covering = characters[slot - 1].covering.filter { operation in
        operations[operation].type.growsAtEnd || covers(slot, operation)
      }
    }
    characters.insert(contentsOf: insert.map { Character(scalar: $0, covering: covering) }, at: slot)
  }

  mutating func mark(
    from: Int, to: Int, type: MarkType, value: String?, remove: Bool, client: String, time: MarkTime
  ) {
    let visible = self.visible
    let last: Int
    if type.growsAtEnd {
      last = to < visible.count ? visible[to] - 1 : characters.count - 1
    } else {
      last = visible[to - 1]
    }
    operations.append(Operation(type: type, value: value, remove: remove, client: client, time: time))
    for index in visible[from]...last { characters[index].covering.append(operations.count - 1) }
  }

  var marks: [TextMark] {
    var result: [TextMark] = []
    let visible = self.visible
    for type in MarkType.allCases {
      var current: TextMark?
      for (position, index) in visible.enumerated() {
        var winner: Operation?
        for number in characters[index].covering where operations[number].type == type {
          if winner.map({ operations[number].wins(over: $0) }) ?? true { winner = operations[number] }
        }
        guard let winner, !winner.remove else { continue }
        if let open = current, open.end == position, open.value == winner.value {
          current!.end = position + 1
        } else {
          if let open = current { result.append(open) }
          current = TextMark(type: type.rawValue, start: position, end: position + 1, value: winner.value)
        }
      }
      if let open = current { result.append(open) }
    }
    return result.sorted { ($0.start, $0.type) < ($1.start, $1.type) }
  }
}
