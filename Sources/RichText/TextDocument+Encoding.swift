extension TextDocument {
  /// The document as an update: every run in document order (tombstones without text), every deletion and mark
  /// operation, and what waits for missing characters. With `since`, only what reached the broker after that
  /// sequence (its runs, deletions and marks): what a replica that had everything up to `since` lacks.
  public func update(since: UInt64? = nil) -> TextUpdate {
    var update = TextUpdate()
    let floor = since ?? 0
    let all = since == nil
    for slot in order {
      let chunk = slots[Int(slot)]
      for index in chunk.runs.indices where all || chunk.seq(index) > floor {
        update.runs.append(insertRun(chunk.runs[index], seq: chunk.seq(index)))
      }
    }
    for client in clients {
      for entry in client.deletes where all || entry.seq > floor {
        update.deletes.append(
          DeletedRange(
            client: client.name, counter: entry.start, length: entry.end - entry.start, seq: entry.seq))
      }
    }
    for stored in markStore where all || stored.operation.seq > floor {
      update.marks.append(stored.operation)
    }
    update.runs.append(contentsOf: pendingRuns.filter { all || $0.seq > floor })
    update.marks.append(contentsOf: pendingMarks.filter { all || $0.seq > floor })
    return update
  }

  func insertRun(_ run: Run, seq: UInt64) -> InsertRun {
    InsertRun(
      client: clients[Int(run.client)].name, counter: run.counter, length: run.length,
      left: characterID(run.left), right: characterID(run.right),
      text: run.deleted ? nil : clients[Int(run.client)].content.scalars(Int(run.counter)..<Int(run.end)),
      seq: seq)
  }

  /// The whole state in the compact binary form (`TextCodec`): what a store keeps, and what a replica that has
  /// nothing needs. Deleted text is not written: only its ids and origins.
  public func encoded() -> [UInt8] {
    var writer = TextCodec.Writer()
    writer.byte(TextCodec.version)
    writer.byte(TextCodec.Kind.state.rawValue)
    writer.varint(clients.count)
    for client in clients { writer.string(client.name) }
    writer.varint(runCount)
    var text: [UInt8] = []
    text.reserveCapacity(count)
    var previousEnd = [UInt32](repeating: 0, count: clients.count)
    for slot in order {
      let chunk = slots[Int(slot)]
      for (index, run) in chunk.runs.enumerated() {
        writer.run(
          client: run.client, counter: run.counter, length: run.length, deleted: run.deleted, left: run.left,
          right: run.right, seq: chunk.seq(index), previousEnd: &previousEnd)
        if !run.deleted {
          clients[Int(run.client)].content.appendUTF8(Int(run.counter)..<Int(run.end), to: &text)
        }
      }
    }
    writer.varint(text.count)
    writer.bytes.append(contentsOf: text)
    var deletes = 0
    for client in clients { deletes += client.deletes.count }
    writer.varint(deletes)
    for (number, client) in clients.enumerated() {
      var previous: UInt32 = 0
      for entry in client.deletes {
        writer.varint(number)
        writer.varint(Int(entry.start - previous))
        writer.varint(Int(entry.end - entry.start))
        writer.varint64(entry.seq)
        previous = entry.end
      }
    }
    writer.marks(markStore.map(\.operation) + pendingMarks)
    writer.runs(pendingRuns)
    return writer.bytes
  }

  /// A document from `encoded()`'s bytes, built directly (no integration): what the broker and the daemon do
  /// with a stored state, and what a replica that has nothing does with another's. Checks what a store or a peer
  /// could get wrong: ids given twice, origins or anchors that name absent characters, counts that disagree.
  public init(encoded bytes: [UInt8]) throws(TextError) {
    self.init()
    if bytes.isEmpty { return }
    var reader = TextCodec.Reader(bytes: bytes)
    guard try reader.byte() == TextCodec.version else { throw .malformed("unknown version") }
    guard try reader.byte() == TextCodec.Kind.state.rawValue else { throw .malformed("not a state") }
    let clientCount = try reader.count(limit: 1 << 20)
    for _ in 0..<clientCount {
      let name = try reader.string()
      guard numbers[name] == nil else { throw .malformed("replica \(name) named twice") }
      _ = number(for: name)
    }
    let runCount = try reader.count(limit: 1 << 26)
    var runs: [Run] = []
    runs.reserveCapacity(runCount)
    var seqs: [UInt64] = []
    var previousEnd = [UInt32](repeating: 0, count: clients.count)
    var visibleLength = 0
    for _ in 0..<runCount {
      let (run, seq) = try reader.run(clients: clients.count, previousEnd: &previousEnd)
      runs.append(run)
      if !seqs.isEmpty || seq != 0 {
        if seqs.isEmpty { seqs = Array(repeating: 0, count: runs.count - 1) }
        seqs.append(seq)
      }
      visibleLength += run.visibleLength
    }
    let textBytes = try reader.count(limit: 1 << 30)
    let utf8 = try reader.take(textBytes)
    var scalars = String(decoding: utf8, as: UTF8.self).unicodeScalars.makeIterator()
    // Chunks half full, so that the first edits do not split them at once.
    let perChunk = Self.maxRunsPerChunk / 2
    var chunk = Chunk()
    func flush(_ chunk: inout Chunk) {
      guard !chunk.runs.isEmpty else { return }
      slots.append(chunk)
      order.append(Int32(slots.count - 1))
      orderOf.append(Int32(order.count - 1))
      chunk = Chunk()
    }
    var ranges: [[(UInt32, UInt32)]] = Array(repeating: [], count: clients.count)
    for (number, run) in runs.enumerated() {
      let slot = Int32(slots.count)
      if !run.deleted {
        var text: [Unicode.Scalar] = []
        text.reserveCapacity(Int(run.length))
        for _ in 0..<run.length {
          guard let scalar = scalars.next() else { throw .malformed("text shorter than its runs") }
          text.append(scalar)
        }
        clients[Int(run.client)].content.write(text, at: run.counter)
      } else {
        clients[Int(run.client)].content.reserve(upTo: Int(run.end))
      }
      ranges[Int(run.client)].append((run.counter, run.end))
      chunk.append(run, seq: seqs.isEmpty ? 0 : seqs[number])
      chunk.visible += run.visibleLength
      chunk.total += Int(run.length)
      count += run.visibleLength
      totalCount += Int(run.length)
      clients[Int(run.client)].assign(run.counter, run.end, to: slot)
      if chunk.runs.count == perChunk { flush(&chunk) }
    }
    flush(&chunk)
    guard scalars.next() == nil else { throw .malformed("text longer than its runs") }
    for (client, list) in ranges.enumerated() {
      let sorted = list.sorted { $0.0 < $1.0 }
      for (a, b) in zip(sorted, sorted.dropFirst()) where b.0 < a.1 {
        throw .malformed("replica \(clients[client].name)'s characters \(b.0)..<\(a.1) given twice")
      }
    }
    for run in runs where !has(run.left) || !has(run.right) {
      throw .malformed("a run's origin is not in the document")
    }
    let deleteCount = try reader.count(limit: 1 << 26)
    var previous: [UInt32] = Array(repeating: 0, count: clients.count)
    for _ in 0..<deleteCount {
      let client = try reader.count(limit: clients.count - 1)
      let start = try reader.counter(adding: previous[client])
      let length = try reader.counter(adding: 0)
      let seq = try reader.varint64()
      let (end, overflow) = start.addingReportingOverflow(length)
      guard !overflow else { throw .malformed("a deleted range overflows") }
      clients[client].addDelete(start, end, seq: seq)
      previous[client] = end
    }
    // Runs and deletions must agree (a visible run inside a deleted range is not a state this code writes).
    for run in runs
    where !run.deleted && !clients[Int(run.client)].deletedRanges(run.counter, run.end).isEmpty {
      throw .malformed("a visible run is in a deleted range")
    }
    for mark in try reader.marks() { integrate(mark) }
    pendingRuns = try reader.runs()
    guard reader.atEnd else { throw .malformed("trailing bytes") }
    cursor = (0, 0)
  }

  /// Applies an update from `TextCodec.decodeUpdate` or a state from `encoded()`: a state into an empty document
  /// is adopted as it is; anything else is merged.
  public mutating func apply(encoded bytes: [UInt8], seq: UInt64? = nil) throws(TextError) {
    if clients.isEmpty && seq == nil, bytes.count >= 2, bytes[1] == TextCodec.Kind.state.rawValue {
      self = try TextDocument(encoded: bytes)
      return
    }
    if bytes.count >= 2, bytes[1] == TextCodec.Kind.state.rawValue {
      apply(try TextDocument(encoded: bytes).update(), seq: seq)
    } else {
      apply(try TextCodec.decodeUpdate(bytes), seq: seq)
    }
  }
}

/// The binary forms: a state (`TextDocument.encoded()`) and an update (`encode(_:)`), LEB128 varints
/// throughout. A run is its replica's number, its counter as a step from that replica's previous run, its
/// length, a flag byte (deleted, has a left origin, the left origin is the previous counter, has a right
/// origin, has a sequence), then the origins and the sequence; a state's visible text follows all runs as one
/// UTF-8 string.
public enum TextCodec {
  static let version: UInt8 = 1
  enum Kind: UInt8 {
    case state = 1
    case update = 2
  }

  /// An update in the binary form.
  public static func encode(_ update: TextUpdate) -> [UInt8] {
    var writer = Writer()
    writer.byte(version)
    writer.byte(Kind.update.rawValue)
    writer.runs(update.runs)
    writer.varint(update.deletes.count)
    for range in update.deletes {
      writer.string(range.client)
      writer.varint(Int(range.counter))
      writer.varint(Int(range.length))
      writer.varint64(range.seq)
    }
    writer.marks(update.marks)
    return writer.bytes
  }

  /// An update from `encode(_:)`, or a state from `TextDocument.encoded()` as an update.
  public static func decodeUpdate(_ bytes: [UInt8]) throws(TextError) -> TextUpdate {
    var reader = Reader(bytes: bytes)
    guard try reader.byte() == version else { throw .malformed("unknown version") }
    let kind = try reader.byte()
    if kind == Kind.state.rawValue { return try TextDocument(encoded: bytes).update() }
    guard kind == Kind.update.rawValue else { throw .malformed("unknown kind") }
    var update = TextUpdate()
    update.runs = try reader.runs()
    let deletes = try reader.count(limit: 1 << 24)
    for _ in 0..<deletes {
      update.deletes.append(
        DeletedRange(
          client: try reader.string(), counter: try reader.counter(adding: 0),
          length: try reader.counter(adding: 0),
          seq: try reader.varint64()))
    }
    update.marks = try reader.marks()
    guard reader.atEnd else { throw .malformed("trailing bytes") }
    return update
  }

  struct Writer {
    var bytes: [UInt8] = []

    mutating func byte(_ value: UInt8) { bytes.append(value) }

    mutating func varint(_ value: Int) { varint64(UInt64(value)) }

    mutating func varint64(_ value: UInt64) {
      var value = value
      while value >= 0x80 {
        bytes.append(UInt8(truncatingIfNeeded: value) | 0x80)
        value >>= 7
      }
      bytes.append(UInt8(value))
    }

    mutating func string(_ text: String) {
      var text = text
      text.withUTF8 { utf8 in
        varint(utf8.count)
        bytes.append(contentsOf: utf8)
      }
    }

    mutating func run(
      client: UInt32, counter: UInt32, length: UInt32, deleted: Bool, left: Ref, right: Ref, seq: UInt64,
      previousEnd: inout [UInt32]
    ) {
      varint(Int(client))
      // Counters as a signed step from the replica's previous run (zigzag): small in document order.
      let step = Int64(counter) - Int64(previousEnd[Int(client)])
      varint64(UInt64(bitPattern: (step << 1) ^ (step >> 63)))
      previousEnd[Int(client)] = counter &+ length
      varint(Int(length))
      let leftIsPrevious = left != 0 && counter > 0 && left == makeRef(client, counter - 1)
      var flags: UInt8 = deleted ? 1 : 0
      if left != 0 { flags |= 2 }
      if leftIsPrevious { flags |= 4 }
      if right != 0 { flags |= 8 }
      if seq != 0 { flags |= 16 }
      byte(flags)
      if left != 0 && !leftIsPrevious {
        varint(Int(refClient(left)))
        varint(Int(refCounter(left)))
      }
      if right != 0 {
        varint(Int(refClient(right)))
        varint(Int(refCounter(right)))
      }
      if seq != 0 { varint64(seq) }
    }

    /// Runs with names (an update's, or a state's waiting ones), each with its text.
    mutating func runs(_ runs: [InsertRun]) {
      varint(runs.count)
      for run in runs {
        string(run.client)
        varint(Int(run.counter))
        varint(Int(run.length))
        var flags: UInt8 = run.text == nil ? 1 : 0
        if run.left != nil { flags |= 2 }
        if run.right != nil { flags |= 8 }
        if run.seq != 0 { flags |= 16 }
        byte(flags)
        if let left = run.left { id(left) }
        if let right = run.right { id(right) }
        if run.seq != 0 { varint64(run.seq) }
        if let text = run.text {
          var utf8: [UInt8] = []
          for scalar in text { UTF8.encode(scalar) { utf8.append($0) } }
          varint(utf8.count)
          bytes.append(contentsOf: utf8)
        }
      }
    }

    mutating func id(_ id: CharacterID) {
      string(id.client)
      varint(Int(id.counter))
    }

    mutating func marks(_ marks: [MarkOperation]) {
      varint(marks.count)
      for mark in marks {
        string(mark.client)
        varint64(mark.time.millis)
        varint(Int(mark.time.counter))
        byte(UInt8(MarkType.allCases.firstIndex(of: mark.type)!))
        var flags: UInt8 = mark.remove ? 1 : 0
        if mark.value != nil { flags |= 2 }
        byte(flags)
        if let value = mark.value { string(value) }
        anchor(mark.start)
        anchor(mark.end)
        varint64(mark.seq)
      }
    }

    mutating func anchor(_ anchor: MarkAnchor) {
      switch anchor {
      case .end: byte(0)
      case .before(let id):
        byte(1)
        self.id(id)
      case .after(let id):
        byte(2)
        self.id(id)
      }
    }
  }

  struct Reader {
    let bytes: [UInt8]
    var at = 0

    var atEnd: Bool { at == bytes.count }

    mutating func byte() throws(TextError) -> UInt8 {
      guard at < bytes.count else { throw .malformed("truncated") }
      at += 1
      return bytes[at - 1]
    }

    mutating func varint64() throws(TextError) -> UInt64 {
      var value: UInt64 = 0
      var shift: UInt64 = 0
      while true {
        let next = try byte()
        guard shift < 64 else { throw .malformed("varint too long") }
        value |= UInt64(next & 0x7F) << shift
        if next & 0x80 == 0 { return value }
        shift += 7
      }
    }

    /// A varint that is at most `limit`.
    mutating func count(limit: Int) throws(TextError) -> Int {
      let value = try varint64()
      guard limit >= 0, value <= UInt64(limit) else { throw .malformed("a count or number is too large") }
      return Int(value)
    }

    /// A counter: a varint added to `base`, within 32 bits.
    mutating func counter(adding base: UInt32) throws(TextError) -> UInt32 {
      let value = try varint64()
      guard value <= UInt64(UInt32.max - base) else { throw .malformed("a counter is too large") }
      return base + UInt32(value)
    }

    mutating func take(_ count: Int) throws(TextError) -> ArraySlice<UInt8> {
      guard count <= bytes.count - at else { throw .malformed("truncated") }
      at += count
      return bytes[(at - count)..<at]
    }

    mutating func string() throws(TextError) -> String {
      let length = try count(limit: 1 << 20)
      return String(decoding: try take(length), as: UTF8.self)
    }

    mutating func run(clients: Int, previousEnd: inout [UInt32]) throws(TextError) -> (Run, UInt64) {
      let client = try count(limit: clients - 1)
      let zigzag = try varint64()
      let step = Int64(bitPattern: (zigzag >> 1) ^ (0 &- (zigzag & 1)))
      let counter = Int64(previousEnd[client]) + step
      guard counter >= 0, counter <= Int64(UInt32.max) else { throw .malformed("a counter is out of range") }
      let length = try count(limit: Int(UInt32.max))
      guard length > 0, counter + Int64(length) <= Int64(UInt32.max) else {
        throw .malformed("a run's length is out of range")
      }
      previousEnd[client] = UInt32(counter) + UInt32(length)
      let flags = try byte()
      guard flags < 32 else { throw .malformed("unknown run flags") }
      var left: Ref = 0
      if flags & 4 != 0 {
        guard flags & 2 != 0, counter > 0 else { throw .malformed("a run's left origin is inconsistent") }
        left = makeRef(UInt32(client), UInt32(counter) - 1)
      } else if flags & 2 != 0 {
        left = makeRef(UInt32(try count(limit: clients - 1)), try self.counter(adding: 0))
      }
      var right: Ref = 0
      if flags & 8 != 0 {
        right = makeRef(UInt32(try count(limit: clients - 1)), try self.counter(adding: 0))
      }
      let seq = flags & 16 != 0 ? try varint64() : 0
      return (
        Run(
          client: UInt32(client), counter: UInt32(counter), length: UInt32(length), deleted: flags & 1 != 0,
          left: left, right: right), seq
      )
    }

    mutating func id() throws(TextError) -> CharacterID {
      CharacterID(client: try string(), counter: try counter(adding: 0))
    }

    mutating func runs() throws(TextError) -> [InsertRun] {
      let total = try count(limit: 1 << 24)
      var runs: [InsertRun] = []
      for _ in 0..<total {
        let client = try string()
        let counter = try self.counter(adding: 0)
        let length = try count(limit: 1 << 24)
        guard length > 0, UInt64(counter) + UInt64(length) <= UInt64(UInt32.max) else {
          throw .malformed("a run's length is out of range")
        }
        let flags = try byte()
        guard flags & ~(1 | 2 | 8 | 16) == 0 else { throw .malformed("unknown run flags") }
        let left = flags & 2 != 0 ? try id() : nil
        let right = flags & 8 != 0 ? try id() : nil
        let seq = flags & 16 != 0 ? try varint64() : 0
        var text: [Unicode.Scalar]?
        if flags & 1 == 0 {
          let utf8 = try take(try count(limit: 1 << 26))
          text = Array(String(decoding: utf8, as: UTF8.self).unicodeScalars)
          guard text!.count == length else { throw .malformed("a run's text does not match its length") }
        }
        runs.append(
          InsertRun(
            client: client, counter: counter, length: UInt32(length), left: left, right: right, text: text,
            seq: seq))
      }
      return runs
    }

    mutating func marks() throws(TextError) -> [MarkOperation] {
      let total = try count(limit: 1 << 20)
      var marks: [MarkOperation] = []
      for _ in 0..<total {
        let client = try string()
        let millis = try varint64()
        let counter = try count(limit: Int(UInt32.max))
        let typeIndex = try count(limit: MarkType.allCases.count - 1)
        let flags = try byte()
        guard flags < 4 else { throw .malformed("unknown mark flags") }
        let value = flags & 2 != 0 ? try string() : nil
        let start = try anchor()
        let end = try anchor()
        let seq = try varint64()
        marks.append(
          MarkOperation(
            type: MarkType.allCases[typeIndex], value: value, remove: flags & 1 != 0, start: start, end: end,
            client: client, time: MarkTime(millis: millis, counter: UInt32(counter)), seq: seq))
      }
      return marks
    }

    mutating func anchor() throws(TextError) -> MarkAnchor {
      switch try byte() {
      case 0: return .end
      case 1: return .before(try id())
      case 2: return .after(try id())
      default: throw .malformed("unknown anchor")
      }
    }
  }
}
