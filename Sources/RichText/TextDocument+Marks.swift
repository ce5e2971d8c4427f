extension TextDocument {
  /// Sets (or with `remove` clears) mark `type` over the scalars `from ..< to`, as replica `client` at `time`;
  /// returns the update to send. The start clings to the first character; the end clings to the character after
  /// the range (or the document's end) for a type that grows at its end, to the last character otherwise.
  public mutating func mark(
    from: Int, to: Int, type: MarkType, value: String?, remove: Bool = false, client: String, time: MarkTime,
    seq: UInt64 = 0
  ) throws(TextError) -> TextUpdate {
    guard from >= 0, to <= count, from < to else { throw .rangeOutOfRange(from, to, count: count) }
    if !remove && type.needsValue && (value ?? "").isEmpty {
      throw .invalidMark("\(type.rawValue) needs a value")
    }
    if !type.needsValue && value != nil { throw .invalidMark("\(type.rawValue) takes no value") }
    let first = characterID(visibleRef(from))!
    let end: MarkAnchor
    if type.growsAtEnd {
      end = to == count ? .end : .before(characterID(visibleRef(to))!)
    } else {
      end = .after(characterID(visibleRef(to - 1))!)
    }
    let operation = MarkOperation(
      type: type, value: remove ? nil : value, remove: remove, start: .before(first), end: end,
      client: client, time: time, seq: seq)
    integrate(operation)
    return TextUpdate(marks: [operation])
  }

  /// The visible character at `position`.
  mutating func visibleRef(_ position: Int) -> Ref {
    let place = locateVisible(position)
    let run = run(place.order, place.run)
    return makeRef(run.client, run.counter + place.offset)
  }

  /// The marks in force, as readers see them: per type, the winning operation's value over each stretch of
  /// text (a removal wins by leaving the stretch bare), adjacent stretches of one value joined; sorted by start,
  /// then type.
  public var marks: [TextMark] {
    guard !markStore.isEmpty else { return [] }
    var starts: [Int] = []
    starts.reserveCapacity(order.count)
    var sum = 0
    for slot in order {
      starts.append(sum)
      sum += slots[Int(slot)].visible
    }
    func visibleBefore(_ ref: Ref) -> (before: Int, visible: Bool) {
      let place = find(ref)!
      var before = starts[place.order]
      let runs = slots[Int(order[place.order])].runs
      for index in 0..<place.run { before += runs[index].visibleLength }
      let visible = !runs[place.run].deleted
      return (before + (visible ? Int(place.offset) : 0), visible)
    }
    func position(_ anchor: StoredAnchor) -> Int {
      switch anchor {
      case .end: return count
      case .before(let ref): return visibleBefore(ref).before
      case .after(let ref):
        let found = visibleBefore(ref)
        return found.before + (found.visible ? 1 : 0)
      }
    }
    var result: [TextMark] = []
    var byType: [MarkType: [(start: Int, end: Int, operation: MarkOperation)]] = [:]
    for stored in markStore {
      let start = position(stored.start)
      let end = position(stored.end)
      if start < end { byType[stored.operation.type, default: []].append((start, end, stored.operation)) }
    }
    for type in MarkType.allCases.sorted() {
      guard var operations = byType[type] else { continue }
      operations.sort { $0.operation.stamp < $1.operation.stamp }
      var bounds = Set<Int>()
      for operation in operations {
        bounds.insert(operation.start)
        bounds.insert(operation.end)
      }
      let points = bounds.sorted()
      // The winner of each stretch between two bounds: the last (greatest stamp) operation covering it.
      var winner = [Int](repeating: -1, count: max(points.count - 1, 0))
      var indexOf: [Int: Int] = [:]
      for (index, point) in points.enumerated() { indexOf[point] = index }
      for (number, operation) in operations.enumerated() {
        for stretch in indexOf[operation.start]!..<indexOf[operation.end]! { winner[stretch] = number }
      }
      for stretch in winner.indices where winner[stretch] >= 0 {
        let operation = operations[winner[stretch]].operation
        if operation.remove { continue }
        let start = points[stretch]
        let end = points[stretch + 1]
        if let last = result.last, last.type == type.rawValue, last.end == start,
          last.value == operation.value
        {
          result[result.count - 1].end = end
        } else {
          result.append(TextMark(type: type.rawValue, start: start, end: end, value: operation.value))
        }
      }
    }
    return result.sorted { ($0.start, $0.type) < ($1.start, $1.type) }
  }

  /// The mark operations this replica holds (placed ones; not those waiting for characters).
  public var markOperations: [MarkOperation] { markStore.map(\.operation) }
}
