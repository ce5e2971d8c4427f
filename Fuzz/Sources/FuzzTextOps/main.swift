import FuzzSupport
import RichText

#if canImport(Glibc)
  import Glibc
#endif

// The block text CRDT (RichText) on three kinds of input, each input read all three ways:
// - the raw bytes as `TextCodec`'s binary form, an update (`TextCodec.decodeUpdate`) and a state
//   (`TextDocument(encoded:)`), as the broker reads a mutation's `ops` and a stored `crdt`: a `TextError` or
//   a value, never a trap or an allocation the input's size does not justify; a decoded state survives
//   `encoded()` and decoding again (the same text, marks and bytes), and an update `TextCodec.encode`;
// - the bytes as a program for two or three replicas (splices, whole-text edits and marks at positions taken
//   modulo the text's length, updates and whole states exchanged in the order the program says, duplicates
//   included, replicas restarted from their stored state; in hub mode replica 0 is the broker: it stamps what
//   it applies with a sequence, and the others sync from it with `update(since:)`). At the end everything is
//   delivered everywhere and every replica must hold the same text and marks, with nothing left waiting: a
//   divergence is a bug. A replica synced from the hub holds everything the hub holds;
// - a decoded update applied through `apply(_:seq:)` (the broker's path, with the broker's own checks on the
//   runs' counters first) to a document with text, replicas and marks: applying it again changes nothing, and
//   the result survives `encoded()` and decoding.
// Work per input is bounded: at most 48 steps, 6 scalars per splice, 600 characters per replica.

/// A document's readable content: what replicas must agree on (the text as scalars: `String`'s `==` would
/// take "é" and "e\u{0301}" for the same).
private struct Content: Equatable, CustomStringConvertible {
  var text: [Unicode.Scalar]
  var marks: [TextMark]

  init(_ document: TextDocument) {
    text = Array(document.text.unicodeScalars)
    marks = document.marks
  }

  var description: String { "\(String(String.UnicodeScalarView(text)).debugDescription) \(marks)" }
}

/// Marks as readers see them: inside the text, non-empty, sorted by start then type.
private func requireWellFormed(_ document: TextDocument, _ what: String) {
  let marks = document.marks
  let count = document.scalars.count
  require(count == document.count, "\(what): \(count) scalars but a count of \(document.count)")
  require(document.text.unicodeScalars.count == count, "\(what): text and scalars disagree")
  for mark in marks {
    require(
      0 <= mark.start && mark.start < mark.end && mark.end <= count, "\(what): mark \(mark) of \(count)")
  }
  require(
    zip(marks, marks.dropFirst()).allSatisfy { ($0.start, $0.type) <= ($1.start, $1.type) },
    "\(what): marks out of order: \(marks)")
}

/// A document from its own `encoded()`: must decode, to the same content.
private func reloaded(_ document: TextDocument, _ what: String) -> TextDocument {
  let bytes = document.encoded()
  let again: TextDocument
  do throws(TextError) {
    again = try TextDocument(encoded: bytes)
  } catch {
    preconditionFailure("property violated: \(what): its own encoded state does not decode: \(error)")
  }
  require(Content(again) == Content(document), "\(what): content changed through encoded()")
  require(again.version == document.version, "\(what): version changed through encoded()")
  require(again.hasPendingOperations == document.hasPendingOperations, "\(what): pending changed")
  require(again.encoded() == bytes, "\(what): encoded() of the decoded state differs")
  return again
}

// MARK: - (a) Decoding

private func decodeRaw(_ bytes: [UInt8]) -> TextUpdate? {
  var update: TextUpdate?
  do throws(TextError) {
    let decoded = try TextCodec.decodeUpdate(bytes)
    let again = try? TextCodec.decodeUpdate(TextCodec.encode(decoded))
    require(again == decoded, "an update changed through TextCodec.encode")
    update = decoded
  } catch {
    require(!error.description.isEmpty, "an error without a message")
  }
  do throws(TextError) {
    let document = try TextDocument(encoded: bytes)
    requireWellFormed(document, "a decoded state")
    _ = reloaded(document, "a decoded state")
    if bytes.count >= 2 && bytes[1] == 1 {
      require(update == document.update(), "decodeUpdate of a state is not the state's update()")
    }
  } catch {
    require(!error.description.isEmpty, "an error without a message")
  }
  return update
}

// MARK: - (b) Replicas

private let names = ["A", "B", "C"]
/// `FUZZ_TEXT_TRACE=1`: print each step of the replicas' program (to read a finding).
nonisolated(unsafe) private let tracing = getenv("FUZZ_TEXT_TRACE") != nil

private func trace(_ message: @autoclosure () -> String) {
  if tracing {
    print(message())
    fflush(nil)
  }
}
private let alphabet: [Unicode.Scalar] = ["a", "b", "c", " ", "é", "\u{1F642}", "\u{0301}", "\n"]
private let maxSteps = 48
private let maxCharacters = 600

private struct Replicas {
  var documents: [TextDocument]
  /// Logical clock per replica for mark times: a replica never reuses a (time, type).
  var clocks: [UInt32]
  /// Every update a replica made, in order (delivered again at the end).
  var log: [TextUpdate] = []
  /// Hub mode: replica 0 is the broker; its sequence, and the sequence each replica synced to last.
  let hub: Bool
  var sequence: UInt64 = 0
  var synced: [UInt64]

  init(count: Int, base: String, hub: Bool) {
    // Every replica starts from the block's first text (the hub's stamped with its sequence, as add_block's).
    documents = Array(repeating: TextDocument(text: base, client: "", seq: hub ? 1 : 0), count: count)
    clocks = Array(repeating: 0, count: count)
    self.hub = hub
    sequence = hub ? 1 : 0
    synced = Array(repeating: sequence, count: count)
  }

  func isHub(_ replica: Int) -> Bool { hub && replica == 0 }

  /// Applies `update` to `replica` (the hub stamps it with its next sequence).
  mutating func deliver(_ update: TextUpdate, to replica: Int) {
    if isHub(replica) {
      sequence += 1
      documents[replica].apply(update, seq: sequence)
    } else {
      documents[replica].apply(update)
    }
  }

  mutating func splice(_ replica: Int, _ input: inout FuzzBytes) {
    let count = documents[replica].count
    let position = input.below(count + 1)
    var delete = min(input.below(7), count - position)
    var insert = String.UnicodeScalarView()
    for _ in 0..<input.below(7) { insert.append(input.pick(alphabet)) }
    if documents[replica].totalCount + insert.count > maxCharacters { insert = String.UnicodeScalarView() }
    if insert.isEmpty && delete == 0 { delete = min(1, count - position) }
    if insert.isEmpty && delete == 0 { return }
    let seq: UInt64 = isHub(replica) ? sequence + 1 : 0
    if isHub(replica) { sequence += 1 }
    do throws(TextError) {
      trace("splice \(replica) at \(position) delete \(delete) insert \(String(insert).debugDescription)")
      let update = try documents[replica].splice(
        at: position, delete: delete, insert: String(insert), client: names[replica], seq: seq)
      require(documents[replica].count == count - delete + insert.count, "a splice's count is off")
      log.append(update)
    } catch {
      preconditionFailure("property violated: a splice in range refused: \(error)")
    }
  }

  /// A whole-text edit (`edit_block` from a client that predates the CRDT, `block edit --text`): a few
  /// changes to the text, made by `replaceText` as the fewest splices.
  mutating func replace(_ replica: Int, _ input: inout FuzzBytes) {
    var scalars = documents[replica].scalars
    for _ in 0..<1 + input.below(3) {
      let at = input.below(scalars.count + 1)
      let cut = min(input.below(5), scalars.count - at)
      scalars.replaceSubrange(at..<at + cut, with: (0..<input.below(5)).map { _ in input.pick(alphabet) })
    }
    guard documents[replica].totalCount + 12 <= maxCharacters else { return }
    let seq: UInt64 = isHub(replica) ? sequence + 1 : 0
    if isHub(replica) { sequence += 1 }
    let target = String(String.UnicodeScalarView(scalars))
    trace("replace \(replica) with \(target.debugDescription)")
    let update = documents[replica].replaceText(with: target, client: names[replica], seq: seq)
    require(documents[replica].scalars == scalars, "replaceText did not make the text it was given")
    log.append(update)
  }

  mutating func mark(_ replica: Int, _ input: inout FuzzBytes) {
    let count = documents[replica].count
    guard count > 0 else { return }
    let from = input.below(count)
    let to = from + 1 + input.below(count - from)
    let type = input.pick(MarkType.allCases)
    let remove = input.byte() & 3 == 0
    let value: String? = type.needsValue && !remove ? input.pick(["u1", "u2"]) : nil
    clocks[replica] += 1
    let time = MarkTime(millis: UInt64(input.below(4)), counter: clocks[replica])
    let seq: UInt64 = isHub(replica) ? sequence + 1 : 0
    if isHub(replica) { sequence += 1 }
    do throws(TextError) {
      trace("mark \(replica) \(from)..<\(to) \(type) \(value ?? "-") remove \(remove) \(time)")
      let update = try documents[replica].mark(
        from: from, to: to, type: type, value: value, remove: remove, client: names[replica], time: time,
        seq: seq)
      log.append(update)
    } catch {
      preconditionFailure("property violated: a mark in range refused: \(error)")
    }
  }

  /// A device syncs from the hub: what the hub received after the device's last sync.
  mutating func syncFromHub(_ replica: Int) {
    guard hub, replica != 0 else { return }
    documents[replica].apply(documents[0].update(since: synced[replica]))
    synced[replica] = sequence
    // It now holds everything the hub holds: the hub's whole state adds nothing.
    var check = documents[replica]
    check.apply(documents[0].update())
    require(
      Content(check) == Content(documents[replica]),
      "replica \(replica)'s update(since:) missed something the hub holds: it has \(Content(documents[replica])), "
        + "with the hub's whole state \(Content(check))")
  }

  mutating func step(_ input: inout FuzzBytes) {
    let count = documents.count
    let replica = input.below(count)
    let other = input.below(count)
    let action = input.below(12)
    defer {
      trace(
        "step \(action) replica \(replica) other \(other): "
          + documents.map { "\($0.text.debugDescription) \($0.marks.count) marks \($0.runCount) runs" }
          .joined(separator: " | "))
    }
    switch action {
    case 0, 1: splice(replica, &input)
    case 2: if input.byte() & 3 == 0 { replace(replica, &input) } else { splice(replica, &input) }
    case 3: mark(replica, &input)
    case 4, 5:
      guard !log.isEmpty else { return }
      let index = input.below(log.count)
      trace("deliver \(index): \(log[index])")
      deliver(log[index], to: replica)
    case 6:
      // Through the codec, as it travels.
      guard !log.isEmpty else { return }
      let update = log[input.below(log.count)]
      do throws(TextError) {
        deliver(try TextCodec.decodeUpdate(TextCodec.encode(update)), to: replica)
      } catch {
        preconditionFailure("property violated: an update does not decode: \(error)")
      }
    case 7: deliver(documents[other].update(), to: replica)
    case 8:
      // A whole state in the binary form (adopted as it is by an empty replica).
      let bytes = documents[other].encoded()
      do throws(TextError) {
        if isHub(replica) {
          sequence += 1
          try documents[replica].apply(encoded: bytes, seq: sequence)
        } else {
          try documents[replica].apply(encoded: bytes)
        }
      } catch {
        preconditionFailure("property violated: a state does not apply: \(error)")
      }
    case 9: documents[replica] = reloaded(documents[replica], "replica \(replica) reloaded")
    case 10: syncFromHub(replica)
    default:
      // A state merged whole, or an update since a point (the hub's deltas are a superset: harmless).
      if isHub(replica) {
        deliver(documents[other].update(), to: replica)
      } else {
        documents[replica].merge(documents[other])
      }
    }
  }

  /// Everything everywhere, then the same content on every replica and nothing waiting.
  mutating func finish() {
    for replica in documents.indices {
      for update in log { deliver(update, to: replica) }
    }
    for _ in 0..<2 {
      for from in documents.indices {
        for to in documents.indices where to != from { deliver(documents[from].update(), to: to) }
      }
    }
    let expected = Content(documents[0])
    for (replica, document) in documents.enumerated() {
      requireWellFormed(document, "replica \(replica)")
      require(!document.hasPendingOperations, "replica \(replica) still waits with everything delivered")
      require(
        Content(document) == expected,
        "replicas diverged: replica 0 has \(expected), replica \(replica) has \(Content(document))")
    }
    if hub {
      for replica in documents.indices.dropFirst() { syncFromHub(replica) }
    }
  }
}

private func runReplicas(_ input: inout FuzzBytes) {
  let header = input.byte()
  let count = 2 + Int(header & 1)
  let hub = header & 2 != 0
  let base = ["", "ab", "hello world", "é\u{1F642}x"][Int(header >> 2) & 3]
  var replicas = Replicas(count: count, base: base, hub: hub)
  var steps = 0
  while !input.isAtEnd && steps < maxSteps {
    replicas.step(&input)
    steps += 1
  }
  replicas.finish()
}

// MARK: - (c) The broker's path

/// A document such as the broker holds: first text, two replicas' splices (one deleting), a mark.
private let brokerDocument: TextDocument = {
  var document = TextDocument(text: "hello world", client: "", seq: 1)
  _ = try! document.splice(at: 5, delete: 1, insert: ", dear", client: "A", seq: 2)
  _ = try! document.splice(at: 0, delete: 2, insert: "Oh h", client: "B", seq: 3)
  _ = try! document.mark(
    from: 1, to: 6, type: .bold, value: nil, client: "A", time: MarkTime(millis: 5, counter: 0), seq: 4)
  return document
}()

/// The broker's checks before it applies an update (PageStore+Text, `applyText`): no run far past its
/// replica's next counter (a smaller allowance than the broker's 64 KiB, to keep inputs fast).
private func brokerAccepts(_ update: TextUpdate, _ document: TextDocument) -> Bool {
  update.runs.allSatisfy { run in
    UInt64(run.counter) + UInt64(run.length) <= UInt64(document.nextCounter(for: run.client)) + 4096
  }
}

private func applyAsBroker(_ update: TextUpdate) {
  guard brokerAccepts(update, brokerDocument) else { return }
  var document = brokerDocument
  document.apply(update, seq: 9)
  requireWellFormed(document, "the broker's document")
  let once = document.encoded()
  let content = Content(document)
  document.apply(update, seq: 9)
  require(Content(document) == content, "applying an update twice changed the content")
  require(document.encoded() == once, "applying an update twice changed the state")
  _ = reloaded(document, "the broker's document")
}

// MARK: - The seed corpus

/// Writes the seed corpus (Fuzz/Corpus/FuzzTextOps) into `directory`: real states and updates, as the broker
/// stores and receives them, and programs for the replicas. Run with `FUZZ_TEXT_WRITE_CORPUS=DIR`.
private func writeCorpus(to directory: String) {
  func write(_ name: String, _ bytes: [UInt8]) {
    guard let file = fopen("\(directory)/\(name)", "wb") else { preconditionFailure("cannot write \(name)") }
    _ = bytes.withUnsafeBufferPointer { fwrite($0.baseAddress, 1, $0.count, file) }
    fclose(file)
  }
  let base = TextDocument(text: "The quick fox jumps.", client: "", seq: 1)
  var a = base
  var b = base
  let brown = try! a.splice(at: 10, delete: 0, insert: "brown ", client: "A", seq: 2)
  let high = try! b.splice(at: 19, delete: 1, insert: " high!", client: "B", seq: 3)
  let bold = try! a.mark(
    from: 4, to: 15, type: .bold, value: nil, client: "A",
    time: MarkTime(millis: 1_732_244_000_123, counter: 0))
  let link = try! b.mark(
    from: 0, to: 3, type: .link, value: "https://example.com", client: "B",
    time: MarkTime(millis: 1_732_244_000_124, counter: 1))
  a.apply(high)
  a.apply(link)
  write("state-empty.bin", TextDocument().encoded())
  write("state-first-text.bin", base.encoded())
  write("state-merged-marks.bin", a.encoded())
  var wide = TextDocument(text: "héllo 🙂 wörld", client: "")
  _ = try! wide.splice(at: 2, delete: 5, insert: "\u{0301}ü", client: "C")
  write("state-wide-tombstones.bin", wide.encoded())
  // A text long enough to be deflated in the state (text form 1), with a deletion in it.
  var long = TextDocument(text: String(repeating: "the quick fox jumps; ", count: 12), client: "")
  _ = try! long.splice(at: 40, delete: 30, insert: "brown ", client: "A")
  write("state-deflated.bin", long.encoded())
  // A replica that received B's splice before the text it refers to: the splice waits in the state.
  var waiting = TextDocument()
  waiting.apply(high)
  waiting.apply(link)
  write("state-pending.bin", waiting.encoded())
  write("update-insert.bin", TextCodec.encode(brown))
  write("update-splice.bin", TextCodec.encode(high))
  write("update-marks.bin", TextCodec.encode(TextUpdate(marks: bold.marks + link.marks)))
  write("update-since.bin", TextCodec.encode(a.update(since: 2)))
  write("update-whole.bin", TextCodec.encode(a.update()))
  var replace = base
  write("update-replace.bin", TextCodec.encode(replace.replaceText(with: "A quick brown fox.", client: "A")))
  // Programs for the replicas: hub mode with three replicas, and two replicas trading updates.
  var random: UInt64 = 0x5EED_7E47
  func bytes(_ count: Int, header: UInt8) -> [UInt8] {
    [header]
      + (0..<count).map { _ in
        random = random &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
        return UInt8(truncatingIfNeeded: random >> 33)
      }
  }
  write("program-hub.bin", bytes(200, header: 0b0000_0111))
  write("program-two.bin", bytes(200, header: 0b0000_1000))
  write("program-three-wide.bin", bytes(300, header: 0b0000_1101))
}

if let directory = getenv("FUZZ_TEXT_WRITE_CORPUS") {
  writeCorpus(to: String(cString: directory))
  exit(0)
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> Int32 {
  let raw = UnsafeRawBufferPointer(start: data, count: size)
  if let update = decodeRaw(Array(raw)) { applyAsBroker(update) }
  var input = FuzzBytes(raw)
  runReplicas(&input)
  return 0
}

runLibFuzzer { data, size in fuzz(data ?? UnsafePointer(bitPattern: 1)!, size) }
