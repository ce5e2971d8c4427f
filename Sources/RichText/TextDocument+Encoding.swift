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

  /// The whole state in the compact binary form (`TextCodec`, version 2): what a store keeps, and what a replica
  /// that has nothing needs. Deleted text is not written: only its ids and origins. Most origins are written as
  /// where they are relative to the run (the character before it in its replica's typing, the run before or
  /// after it in the document, the run before's right origin), the text is compressed, and deletions the
  /// tombstones already say are left out.
  public func encoded() -> [UInt8] {
    var writer = TextCodec.Writer()
    writer.byte(TextCodec.stateVersion)
    writer.byte(TextCodec.Kind.state.rawValue)
    writer.varint(clients.count)
    for client in clients { writer.string(client.name) }
    var runs: [Run] = []
    runs.reserveCapacity(runCount)
    var seqs: [UInt64] = []
    var text: [UInt8] = []
    text.reserveCapacity(count)
    for slot in order {
      let chunk = slots[Int(slot)]
      for (index, run) in chunk.runs.enumerated() {
        runs.append(run)
        if !seqs.isEmpty || chunk.seq(index) != 0 {
          if seqs.isEmpty { seqs = Array(repeating: 0, count: runs.count - 1) }
          seqs.append(chunk.seq(index))
        }
        if !run.deleted {
          clients[Int(run.client)].content.appendUTF8(Int(run.counter)..<Int(run.end), to: &text)
        }
      }
    }
    writer.varint(runs.count)
    var previousEnd = [UInt32](repeating: 0, count: clients.count)
    var client: UInt32 = 0
    for index in runs.indices {
      writer.stateRun(
        runs, index, seq: seqs.isEmpty ? 0 : seqs[index], client: &client, previousEnd: &previousEnd)
    }
    writer.varint(text.count)
    if let packed = TextCodec.Compression.compress(text), packed.count < text.count {
      writer.byte(1)
      writer.varint(packed.count)
      writer.bytes.append(contentsOf: packed)
    } else {
      writer.byte(0)
      writer.bytes.append(contentsOf: text)
    }
    // Deletions, but those of characters here with no sequence: the tombstones say them.
    var deletes: [(client: Int, entry: DeleteEntry)] = []
    for (number, client) in clients.enumerated() {
      for entry in client.deletes where entry.seq != 0 || !client.covers(entry.start, entry.end) {
        deletes.append((number, entry))
      }
    }
    writer.varint(deletes.count)
    var previous = [UInt32](repeating: 0, count: clients.count)
    for (number, entry) in deletes {
      writer.varint(number)
      writer.varint(Int(entry.start - previous[number]))
      writer.varint(Int(entry.end - entry.start))
      writer.varint64(entry.seq)
      previous[number] = entry.end
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
    // Version 1: every origin and deletion written out, the text as it is.
    let version = try reader.byte()
    guard version == TextCodec.version || version == TextCodec.stateVersion else {
      throw .malformed("unknown version")
    }
    guard try reader.byte() == TextCodec.Kind.state.rawValue else { throw .malformed("not a state") }
    let clientCount = try reader.count(limit: 1 << 20)
    for _ in 0..<clientCount {
      let name = try reader.string()
      guard numbers[name] == nil else { throw .malformed("replica \(name) named twice") }
      _ = number(for: name)
    }
    let runCount = try reader.count(limit: 1 << 26)
    // A run takes at least four bytes in version 1, three in version 2: room is reserved only for runs the
    // bytes can hold.
    let minimumRunBytes = version == TextCodec.version ? 4 : 3
    guard runCount <= reader.remaining / minimumRunBytes else { throw .malformed("truncated") }
    var runs: [Run] = []
    // No more than the bytes left could hold: a count is not trusted with memory.
    runs.reserveCapacity(min(runCount, reader.remaining / minimumRunBytes))
    var seqs: [UInt64] = []
    var previousEnd = [UInt32](repeating: 0, count: clients.count)
    var visibleLength = 0
    var nextCounters = [UInt32](repeating: 0, count: clients.count)
    var client: UInt32 = 0
    // Right origins given as a run further on (run, how far), and as the run before's.
    var rightAhead: [(index: Int, distance: Int)] = []
    var rightAsBefore: [Int] = []
    for index in 0..<runCount {
      let (run, seq): (Run, UInt64)
      if version == TextCodec.version {
        (run, seq) = try reader.run(clients: clients.count, previousEnd: &previousEnd)
      } else {
        let distance: Int
        (run, seq, distance) = try reader.stateRun(
          clients: clients.count, previous: runs.last, client: &client, previousEnd: &previousEnd)
        if distance > 0 { rightAhead.append((index, distance)) }
        if distance < 0 { rightAsBefore.append(index) }
      }
      runs.append(run)
      if !seqs.isEmpty || seq != 0 {
        if seqs.isEmpty { seqs = Array(repeating: 0, count: runs.count - 1) }
        seqs.append(seq)
      }
      visibleLength += run.visibleLength
      nextCounters[Int(run.client)] = max(nextCounters[Int(run.client)], run.end)
    }
    guard nextCounters.reduce(0, { $0 + Int($1) }) <= Self.maxIdentifiers else {
      throw .malformed("more than \(Self.maxIdentifiers) character ids")
    }
    for (index, distance) in rightAhead {
      guard distance < runs.count - index else { throw .malformed("a run's right origin is past the end") }
      runs[index].right = runs[index + distance].firstRef
    }
    for index in rightAsBefore { runs[index].right = runs[index - 1].right }
    let textBytes = try reader.count(limit: 1 << 30)
    // Every visible character takes at least one byte of text and at most four: checked before a run's text
    // is reserved (or decompressed).
    guard visibleLength <= textBytes else { throw .malformed("text shorter than its runs") }
    guard textBytes <= 4 * visibleLength else { throw .malformed("text longer than its runs") }
    let utf8: ArraySlice<UInt8>
    if version == TextCodec.version {
      utf8 = try reader.take(textBytes)
    } else {
      switch try reader.byte() {
      case 0: utf8 = try reader.take(textBytes)
      case 1:
        let packed = try reader.take(try reader.count(limit: 1 << 30))
        utf8 = ArraySlice(try TextCodec.Compression.decompress(packed, count: textBytes))
      default: throw .malformed("unknown text form")
      }
    }
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
    // Version 2: the deletions written, and those the tombstones say, joined per replica at once.
    var deleted: [[DeleteEntry]] = Array(
      repeating: [], count: version == TextCodec.version ? 0 : clients.count)
    for _ in 0..<deleteCount {
      let client = try reader.count(limit: clients.count - 1)
      let start = try reader.counter(adding: previous[client])
      let length = try reader.counter(adding: 0)
      let seq = try reader.varint64()
      let (end, overflow) = start.addingReportingOverflow(length)
      guard !overflow else { throw .malformed("a deleted range overflows") }
      previous[client] = end
      // Never written, and skipped as an update's is (kept, its sequence would join a neighbour's).
      guard length > 0 else { continue }
      if version == TextCodec.version {
        clients[client].addDelete(start, end, seq: seq)
      } else {
        deleted[client].append(DeleteEntry(start: start, end: end, seq: seq))
      }
    }
    if version == TextCodec.version {
      // A tombstone is deleted whatever the ranges say (version 1 wrote them all; one that left a tombstone out
      // would otherwise come back through version 2 with a neighbour's sequence).
      for run in runs where run.deleted { clients[Int(run.client)].addDelete(run.counter, run.end, seq: 0) }
    } else {
      for run in runs where run.deleted {
        deleted[Int(run.client)].append(DeleteEntry(start: run.counter, end: run.end, seq: 0))
      }
      for client in clients.indices where !deleted[client].isEmpty {
        clients[client].deletes = ClientState.joined(deleted[client])
      }
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
/// throughout. In an update (and a version 1 state), a run is its replica's number, its counter as a step from
/// that replica's previous run, its length, a flag byte (deleted, has a left origin, the left origin is the
/// previous counter, has a right origin, has a sequence), then the origins and the sequence; a state's visible
/// text follows all runs as one UTF-8 string. A version 2 state (`Writer.stateRun`) says most origins by where
/// they are, leaves out the deletions its tombstones say, and writes the text's UTF-8 length, then a byte: 0 and
/// the text as it is, or 1 and the length of its raw deflate stream (`Compression`, zlib) and the stream.
public enum TextCodec {
  /// Updates, and states as first written.
  static let version: UInt8 = 1
  /// States as `encoded()` writes them now.
  static let stateVersion: UInt8 = 2
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
    if bytes.count >= 2 && bytes[1] == Kind.state.rawValue {
      return try TextDocument(encoded: bytes).update()
    }
    var reader = Reader(bytes: bytes)
    guard try reader.byte() == version else { throw .malformed("unknown version") }
    let kind = try reader.byte()
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

    /// Run `index` of a state's `runs` (document order), version 2: a flag byte (bit 0 deleted, bit 1 another
    /// replica than the run before's, bits 2–3 how the left origin is given, bits 4–6 how the right origin is
    /// given, bit 7 has a sequence); the replica's number if it changed; the counter as a step from that
    /// replica's previous run (zigzag); the length; the origins that need more than their kind; the sequence.
    /// Left: 0 none, 1 the replica's previous counter, 2 the last character of the run before, 3 written out
    /// (replica, counter). Right: 0 none, 1 the first character of the run after, 2 the run before's right
    /// origin, 3 the first character of the run that many further on (at least 2; a right origin is always a run's
    /// first character), 4 written out.
    mutating func stateRun(
      _ runs: [Run], _ index: Int, seq: UInt64, client: inout UInt32, previousEnd: inout [UInt32]
    ) {
      let run = runs[index]
      var flags: UInt8 = run.deleted ? 1 : 0
      if run.client != client { flags |= 2 }
      let left: UInt8
      if run.left == 0 {
        left = 0
      } else if run.counter > 0 && run.left == makeRef(run.client, run.counter - 1) {
        left = 1
      } else if index > 0 && run.left == runs[index - 1].lastRef {
        left = 2
      } else {
        left = 3
      }
      var right: UInt8 = 4
      var distance = 0
      if run.right == 0 {
        right = 0
      } else if index + 1 < runs.count && run.right == runs[index + 1].firstRef {
        right = 1
      } else if index > 0 && run.right == runs[index - 1].right {
        right = 2
      } else if index + 2 < runs.count {
        // (Not past the last run: a state read from bytes may give the last run a right origin, or one before it.)
        for ahead in (index + 2)..<min(runs.count, index + 1024) where runs[ahead].firstRef == run.right {
          right = 3
          distance = ahead - index
          break
        }
      }
      flags |= left << 2 | right << 4
      if seq != 0 { flags |= 0x80 }
      byte(flags)
      if run.client != client {
        varint(Int(run.client))
        client = run.client
      }
      let step = Int64(run.counter) - Int64(previousEnd[Int(run.client)])
      varint64(UInt64(bitPattern: (step << 1) ^ (step >> 63)))
      previousEnd[Int(run.client)] = run.end
      varint(Int(run.length))
      if left == 3 {
        varint(Int(refClient(run.left)))
        varint(Int(refCounter(run.left)))
      }
      if right == 3 { varint(distance) }
      if right == 4 {
        varint(Int(refClient(run.right)))
        varint(Int(refCounter(run.right)))
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

    /// Bytes not read yet.
    var remaining: Int { bytes.count - at }

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

    /// A run as `Writer.stateRun` writes it, with its sequence and, for a right origin given as a run further on,
    /// how far (the caller sets it once that run is read; 0: none; -1: the run before's, which the caller sets
    /// once that one's is known).
    mutating func stateRun(
      clients: Int, previous: Run?, client: inout UInt32, previousEnd: inout [UInt32]
    ) throws(TextError) -> (Run, UInt64, Int) {
      let flags = try byte()
      if flags & 2 != 0 { client = UInt32(try count(limit: clients - 1)) }
      guard Int(client) < clients else { throw .malformed("a run's replica is not named") }
      let zigzag = try varint64()
      let step = Int64(bitPattern: (zigzag >> 1) ^ (0 &- (zigzag & 1)))
      let counter = Int64(previousEnd[Int(client)]) + step
      guard counter >= 0, counter <= Int64(UInt32.max) else { throw .malformed("a counter is out of range") }
      let length = try count(limit: Int(UInt32.max))
      guard length > 0, counter + Int64(length) <= Int64(UInt32.max) else {
        throw .malformed("a run's length is out of range")
      }
      previousEnd[Int(client)] = UInt32(counter) + UInt32(length)
      var left: Ref = 0
      switch (flags >> 2) & 3 {
      case 0: break
      case 1:
        guard counter > 0 else { throw .malformed("a run's left origin is inconsistent") }
        left = makeRef(client, UInt32(counter) - 1)
      case 2:
        guard let previous else { throw .malformed("the first run's left origin is the run before") }
        left = previous.lastRef
      default:
        left = makeRef(UInt32(try count(limit: clients - 1)), try self.counter(adding: 0))
      }
      var right: Ref = 0
      var distance = 0
      switch (flags >> 4) & 7 {
      case 0: break
      case 1: distance = 1
      case 2:
        // The run before's right origin may be a run further on, not read yet: the caller sets it.
        guard previous != nil else { throw .malformed("the first run's right origin is the run before's") }
        distance = -1
      case 3:
        distance = try count(limit: 1 << 26)
        guard distance >= 2 else { throw .malformed("a run's right origin is inconsistent") }
      case 4: right = makeRef(UInt32(try count(limit: clients - 1)), try self.counter(adding: 0))
      default: throw .malformed("unknown run flags")
      }
      let seq = flags & 0x80 != 0 ? try varint64() : 0
      let run = Run(
        client: client, counter: UInt32(counter), length: UInt32(length), deleted: flags & 1 != 0, left: left,
        right: right)
      return (run, seq, distance)
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
