import CMallocInfo
import LoadCore
import RichText

#if canImport(Glibc)
  import Glibc
#endif

/// Sizes of a `pagesync-load text` run.
public struct TextTraceOptions: Sendable {
  /// Runs of each timed figure; the report gives their median, minimum and maximum.
  public var repeats = 5
  /// Replay only the first `edits` patches of a sequential trace (nil: all): for profiling under callgrind. The
  /// result is then checked against a plain array of scalars with the same patches applied.
  public var edits: Int?

  public init() {}
}

/// The targets, for the traces they were set on (docs/benchmarks.md, round 9).
struct TextTargets {
  var localApplyMs: Double?
  var mergeMs: Double?
  var bytesPerCharacter: Double?
  var encodedBytes: Int?
  var replayMs: Double?

  static func forTrace(named name: String) -> TextTargets {
    if name.hasPrefix("automerge-paper") {
      return TextTargets(localApplyMs: 20, mergeMs: 20, bytesPerCharacter: 8, encodedBytes: 130_000)
    }
    if name.hasPrefix("clownschool") || name.hasPrefix("friendsforever") { return TextTargets(replayMs: 100) }
    return TextTargets()
  }
}

/// The rich-text benchmark on one editing trace. Every timed run checks its text against the trace's
/// `endContent` (or, for a prefix, against the patches applied to an array); a run that does not match makes the
/// report `ok: false`.
///
/// Sequential trace: local apply (one `splice` per patch into an empty replica), `update()` and `encoded()`,
/// merging the whole history into an empty replica (the encoded state adopted with `apply(encoded:)`, and the
/// full update integrated run by run with `apply(_:)`), the heap the replica holds, the encoded size. Concurrent
/// trace: a replica per agent; each transaction is typed on its agent's replica after that replica has applied
/// the updates of every transaction before it that it had not seen yet, and at the end the last transaction's
/// replica applies everything else.
public enum TextTraceRun {
  public static func run(_ trace: EditingTrace, name: String, options: TextTraceOptions, progress: Bool)
    -> ReportValue
  {
    let line = ProgressLine(enabled: progress)
    let machine = MachineProbe()
    var notes: [String] = []
    var failures: [String] = []
    // The targets are the whole trace's: a prefix (`--edits`) has none.
    let prefix = options.edits.map { $0 < trace.patchCount } ?? false
    let targets = prefix ? TextTargets() : TextTargets.forTrace(named: name)
    var fields: [(String, ReportValue)] = [
      ("trace", .string(name)), ("kind", .string(trace.concurrent ? "concurrent" : "sequential")),
      ("transactions", .int(trace.transactions.count)), ("patches", .int(trace.patchCount)),
      ("final_characters", .int(trace.endContent.unicodeScalars.count)), ("repeat", .int(options.repeats)),
    ]
    if trace.concurrent {
      fields += concurrentFigures(
        trace, options: options, targets: targets, line: line, notes: &notes, failures: &failures)
    } else {
      fields += sequentialFigures(
        trace, options: options, targets: targets, line: line, notes: &notes, failures: &failures)
    }
    line.clear()
    fields.append(("machine", machine.report))
    if let load = HostProcess.loadAverage(), load > Double(HostProcess.cores) {
      notes.append("load average \(load) above \(HostProcess.cores) cores: other work competed for the CPUs")
    }
    return .object(fields + verdict(ok: failures.isEmpty, notes: failures + notes))
  }

  // MARK: Sequential

  static let localClient = "local"

  private static func sequentialFigures(
    _ trace: EditingTrace, options: TextTraceOptions, targets: TextTargets, line: ProgressLine,
    notes: inout [String], failures: inout [String]
  ) -> [(String, ReportValue)] {
    var patches = trace.transactions.flatMap(\.patches)
    var expected = trace.endContent
    if let edits = options.edits, edits < patches.count {
      patches.removeSubrange(edits...)
      expected = plainReplay(start: trace.startContent, patches)
      notes.append("the first \(edits) patches only, checked against a plain replay")
    }
    let start =
      trace.startContent.isEmpty ? TextDocument() : TextDocument(text: trace.startContent, client: "start")
    func check(_ what: String, _ text: String) {
      if text != expected && !failures.contains(where: { $0.hasPrefix(what) }) {
        failures.append("\(what): the text is not the trace's end text")
      }
    }

    // Local apply.
    var local: [Double] = []
    var document = start
    for run in 0..<options.repeats {
      line.update("local apply \(run + 1)/\(options.repeats)")
      var replica = start
      let began = HostProcess.now()
      do {
        for patch in patches {
          _ = try replica.splice(
            at: patch.position, delete: patch.delete, insert: patch.insert, client: localClient)
        }
      } catch {
        failures.append("local apply: \(error)")
        return []
      }
      local.append(milliseconds(since: began))
      check("local apply", replica.text)
      document = replica
    }

    // The whole history as an update and as a state.
    var updateMs: [Double] = []
    var encodeMs: [Double] = []
    var update = TextUpdate()
    var encoded: [UInt8] = []
    for run in 0..<options.repeats {
      line.update("update and encoded \(run + 1)/\(options.repeats)")
      var began = HostProcess.now()
      update = document.update()
      updateMs.append(milliseconds(since: began))
      began = HostProcess.now()
      encoded = document.encoded()
      encodeMs.append(milliseconds(since: began))
    }

    // Merging into an empty replica.
    var mergeEncoded: [Double] = []
    var mergeUpdate: [Double] = []
    for run in 0..<options.repeats {
      line.update("merge \(run + 1)/\(options.repeats)")
      var adopted = TextDocument()
      var began = HostProcess.now()
      do {
        try adopted.apply(encoded: encoded)
      } catch {
        failures.append("merge (encoded): \(error)")
      }
      mergeEncoded.append(milliseconds(since: began))
      check("merge (encoded)", adopted.text)
      var integrated = TextDocument()
      began = HostProcess.now()
      integrated.apply(update)
      mergeUpdate.append(milliseconds(since: began))
      check("merge (update)", integrated.text)
      if integrated.hasPendingOperations { failures.append("merge (update): operations left waiting") }
    }

    // Memory: the heap a replica holds once the trace is applied (local edits), and once adopted from the state.
    line.update("memory")
    let characters = max(expected.unicodeScalars.count, 1)
    let updateSize = (runs: update.runs.count, deletes: update.deletes.count)
    document = TextDocument()
    update = TextUpdate()
    let heapBefore = HeapReading()
    var measured = start
    for patch in patches {
      _ = try? measured.splice(
        at: patch.position, delete: patch.delete, insert: patch.insert, client: localClient)
    }
    let heapLocal = HeapReading().bytes - heapBefore.bytes
    let rssLocal = HeapReading().resident - heapBefore.resident
    check("memory", measured.text)
    let heapBeforeAdopted = HeapReading()
    let adopted = try? TextDocument(encoded: encoded)
    let heapAdopted = HeapReading().bytes - heapBeforeAdopted.bytes
    check("memory (adopted)", adopted?.text ?? "")
    let perCharacter = Double(heapLocal) / Double(characters)

    let fields: [(String, ReportValue)] = [
      ("local_apply", timing(local, target: targets.localApplyMs)),
      ("merge_encoded", timing(mergeEncoded, target: targets.mergeMs)),
      ("merge_update", timing(mergeUpdate, target: targets.mergeMs)),
      ("update_ms", .number(median(updateMs))), ("encoded_ms", .number(median(encodeMs))),
      (
        "update",
        .object([
          ("runs", .int(updateSize.runs)), ("deleted_ranges", .int(updateSize.deletes)),
        ])
      ),
      (
        "memory",
        .object(
          [
            ("heap_bytes", .int(heapLocal)), ("heap_bytes_per_char", .number(perCharacter)),
            ("heap_bytes_adopted", .int(heapAdopted)),
            ("heap_bytes_per_char_adopted", .number(Double(heapAdopted) / Double(characters))),
            ("estimate_bytes", .int(measured.memoryBytes)),
            ("estimate_bytes_per_char", .number(Double(measured.memoryBytes) / Double(characters))),
            ("rss_growth_bytes", .int(rssLocal)), ("runs", .int(measured.runCount)),
            ("runs_adopted", .int(adopted?.runCount ?? 0)),
          ] + target(targets.bytesPerCharacter, met: targets.bytesPerCharacter.map { perCharacter <= $0 })
        )
      ),
      (
        "encoded",
        .object(
          [("bytes", .int(encoded.count))]
            + target(
              targets.encodedBytes.map(Double.init), met: targets.encodedBytes.map { encoded.count <= $0 }))
      ),
    ]
    for (name, figure, goal) in [
      ("local apply", median(local), targets.localApplyMs),
      ("merge (encoded)", median(mergeEncoded), targets.mergeMs),
      ("merge (update)", median(mergeUpdate), targets.mergeMs),
    ] {
      if let goal, figure > goal {
        notes.append("\(name) \(format(figure)) ms misses its target \(format(goal)) ms")
      }
    }
    if let goal = targets.bytesPerCharacter, perCharacter > goal {
      notes.append("memory \(format(perCharacter)) B/char misses its target \(format(goal))")
    }
    if let goal = targets.encodedBytes, encoded.count > goal {
      notes.append("encoded \(encoded.count) B misses its target \(goal) B")
    }
    withExtendedLifetime(measured) {}
    withExtendedLifetime(adopted) {}
    return fields
  }

  /// The patches applied to an array of scalars: what a prefix of a trace must end as.
  static func plainReplay(start: String, _ patches: [EditingTrace.Patch]) -> String {
    var scalars = Array(start.unicodeScalars)
    for patch in patches {
      scalars.replaceSubrange(
        patch.position..<(patch.position + patch.delete), with: Array(patch.insert.unicodeScalars))
    }
    var text = ""
    text.unicodeScalars.append(contentsOf: scalars)
    return text
  }

  // MARK: Concurrent

  private static func concurrentFigures(
    _ trace: EditingTrace, options: TextTraceOptions, targets: TextTargets, line: ProgressLine,
    notes: inout [String], failures: inout [String]
  ) -> [(String, ReportValue)] {
    var replay: [Double] = []
    var applied = 0
    var converged = true
    for run in 0..<options.repeats {
      line.update("replay \(run + 1)/\(options.repeats)")
      let began = HostProcess.now()
      let result: ConcurrentReplay
      do {
        result = try ConcurrentReplay(trace)
      } catch {
        failures.append("replay: \(error)")
        return []
      }
      replay.append(milliseconds(since: began))
      applied = result.remoteUpdates
      if result.final.text != trace.endContent, !failures.contains(where: { $0.hasPrefix("replay") }) {
        failures.append("replay: the text is not the trace's end text")
      }
      // Once, untimed: every other replica, brought up to date, agrees.
      if run == 0 {
        var copy = result
        converged = copy.everyReplicaConverges(to: trace.endContent)
        if !converged { failures.append("replay: not every replica ends on the trace's end text") }
      }
    }
    if let goal = targets.replayMs, median(replay) > goal {
      notes.append("replay \(format(median(replay))) ms misses its target \(format(goal)) ms")
    }
    return [
      ("replay", timing(replay, target: targets.replayMs)), ("agents", .int(trace.agents)),
      ("remote_updates_applied", .int(applied)),
      ("merges", .int(trace.transactions.count { $0.parents.count > 1 })),
    ]
  }

  // MARK: Figures

  static func milliseconds(since began: UInt64) -> Double { Double(HostProcess.now() - began) / 1e6 }

  static func median(_ values: [Double]) -> Double {
    guard !values.isEmpty else { return 0 }
    let sorted = values.sorted()
    return sorted.count % 2 == 1
      ? sorted[sorted.count / 2] : (sorted[sorted.count / 2 - 1] + sorted[sorted.count / 2]) / 2
  }

  static func timing(_ values: [Double], target: Double?) -> ReportValue {
    .object(
      [
        ("median_ms", .number(median(values))), ("min_ms", .number(values.min() ?? 0)),
        ("max_ms", .number(values.max() ?? 0)),
      ] + TextTraceRun.target(target, met: target.map { median(values) <= $0 }))
  }

  static func target(_ goal: Double?, met: Bool?) -> [(String, ReportValue)] {
    guard let goal, let met else { return [] }
    return [("target", .number(goal)), ("met", .bool(met))]
  }

  static func format(_ value: Double) -> String { ReportValue.number(value).json }
}

/// A concurrent trace replayed with one replica per agent (see `TextTraceRun`).
struct ConcurrentReplay {
  private let trace: EditingTrace
  private var replicas: [TextDocument]
  /// Per agent and transaction (agent × count + transaction): whether the agent's replica has it.
  private var seen: [Bool]
  /// Each transaction's updates, one per patch.
  private var updates: [[TextUpdate]]
  private(set) var remoteUpdates = 0
  private let last: Int

  var final: TextDocument { replicas[last] }

  init(_ trace: EditingTrace) throws(TextError) {
    self.trace = trace
    let count = trace.transactions.count
    let names = (0..<trace.agents).map { "agent-\($0)" }
    replicas = Array(repeating: TextDocument(), count: trace.agents)
    seen = Array(repeating: false, count: trace.agents * count)
    updates = Array(repeating: [], count: count)
    last = trace.transactions.last?.agent ?? 0
    var stack: [Int] = []
    var missing: [Int] = []
    for (index, transaction) in trace.transactions.enumerated() {
      let agent = transaction.agent
      let base = agent * count
      // Every transaction the parents have seen that this replica has not.
      missing.removeAll(keepingCapacity: true)
      stack.append(contentsOf: transaction.parents)
      while let next = stack.popLast() {
        guard !seen[base + next] else { continue }
        seen[base + next] = true
        missing.append(next)
        stack.append(contentsOf: trace.transactions[next].parents)
      }
      missing.sort()
      for earlier in missing {
        for update in updates[earlier] { replicas[agent].apply(update) }
        remoteUpdates += updates[earlier].count
      }
      for patch in transaction.patches {
        updates[index].append(
          try replicas[agent].splice(
            at: patch.position, delete: patch.delete, insert: patch.insert, client: names[agent]))
      }
      seen[base + index] = true
    }
    bringUpToDate(last)
  }

  private mutating func bringUpToDate(_ agent: Int) {
    let count = trace.transactions.count
    for index in 0..<count where !seen[agent * count + index] {
      for update in updates[index] { replicas[agent].apply(update) }
      remoteUpdates += updates[index].count
      seen[agent * count + index] = true
    }
  }

  /// Brings every replica up to date; whether all end on `text`.
  mutating func everyReplicaConverges(to text: String) -> Bool {
    for agent in replicas.indices { bringUpToDate(agent) }
    return replicas.allSatisfy { $0.text == text }
  }
}

/// The heap in use (glibc's `mallinfo2`: allocated bytes in the arenas plus mmapped blocks, malloc's own
/// headers included) and the resident set, at one moment.
struct HeapReading {
  let bytes: Int
  let resident: Int

  init() {
    let info = mallinfo2()
    bytes = Int(info.uordblks) + Int(info.hblkhd)
    resident = HostProcess.sample(pid: getpid())?.residentBytes ?? 0
  }
}
