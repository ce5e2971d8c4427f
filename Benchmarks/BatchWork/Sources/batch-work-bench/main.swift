import BrokerStore
import RichText
import SQLiteStore
import SyncModel

#if canImport(Glibc)
  import Glibc
#endif

// batch-work-bench SCENARIO SIZE
//
// Builds a store file in /tmp for SCENARIO, then times the heaviest batches of that kind one by one, each in
// its own transaction as the broker's writer runs it, and prints one line per batch kind: the milliseconds the
// batch held the store, how many of its mutations the store took (a batch cut by `[limits] batch_work` answers
// only the first ones), and what they were. Scenarios:
//   chain SIZE   a chain of SIZE pages, one under the other (as deep as the limit lets it); creates at its end,
//                moves among its deepest pages, and the root moved under its leaf (a cycle);
//   legacy-chain SIZE  the same chain written into the store file as an older broker let it grow;
//   blocks SIZE  a page of SIZE blocks; add_block after random blocks, and after one block again and again;
//   text SIZE    a block of SIZE bytes of text; splice_text edits of it;
//   rows SIZE    a database of SIZE rows sorted by a property; set_property on its rows.
// The store's limits are the broker's defaults unless TREE_DEPTH or BATCH_WORK are set in the environment.

let arguments = CommandLine.arguments
guard arguments.count == 3, let size = Int(arguments[2]), size > 0,
  ["chain", "legacy-chain", "blocks", "text", "rows"].contains(arguments[1])
else {
  print("usage: batch-work-bench chain|legacy-chain|blocks|text|rows SIZE")
  exit(64)
}

func id(_ text: String) -> EntityID { try! EntityID(validating: text) }

func millis(since start: timespec) -> Double {
  var now = timespec()
  clock_gettime(CLOCK_MONOTONIC, &now)
  return Double(now.tv_sec - start.tv_sec) * 1000 + Double(now.tv_nsec - start.tv_nsec) / 1e6
}

/// A store on a fresh file, and a client that numbers its mutations.
final class Bench {
  let path = "/tmp/batch-work-bench-\(getpid()).sqlite"
  let store: PageStore
  var next: UInt64 = 1
  var clock = HybridLogicalClock()
  var wall: UInt64 = 1_700_000_000_000
  let workspace = id("ws")

  init() throws {
    for suffix in ["", "-wal", "-shm"] { unlink(path + suffix) }
    let connection = try SQLiteConnection(path: path)
    try connection.configure(synchronous: .normal)
    store = try PageStore(connection: connection)
    configureLimits(store)
  }

  deinit {
    store.connection.close()
    for suffix in ["", "-wal", "-shm"] { unlink(path + suffix) }
  }

  /// Applies one batch in its own transaction; returns its milliseconds and outcome.
  @discardableResult
  func push(_ actions: [(page: EntityID, action: MutationAction)]) throws -> (
    ms: Double, outcome: BatchOutcome
  ) {
    var mutations: [Mutation] = []
    for (offset, (page, action)) in actions.enumerated() {
      wall += 1
      mutations.append(
        Mutation(
          id: next + UInt64(offset), page: page, time: clock.now(physicalMillis: wall), action: action))
    }
    let batch = MutationBatch(client: id("bench"), workspace: workspace, mutations: mutations)
    var start = timespec()
    clock_gettime(CLOCK_MONOTONIC, &start)
    let outcome = try store.connection.transaction(.immediate) {
      try store.apply(batch, user: id("u"), workspaces: [workspace], nowMillis: wall)
    }
    let ms = millis(since: start)
    next = outcome.lastMutationId + 1
    return (ms, outcome)
  }

  /// Pushes `actions` in batches of 1,000 until every one is answered (batches cut by the budget included).
  func pushAll(_ actions: [(page: EntityID, action: MutationAction)]) throws -> Double {
    var worst = 0.0
    var rest = actions[...]
    while !rest.isEmpty {
      let (ms, outcome) = try push(Array(rest.prefix(1000)))
      worst = max(worst, ms)
      rest = rest.dropFirst(outcome.results.count)
    }
    return worst
  }

  func report(_ name: String, _ result: (ms: Double, outcome: BatchOutcome), sent: Int) {
    let statuses = Dictionary(grouping: result.outcome.results, by: { $0.reason?.name ?? $0.status.rawValue })
      .mapValues(\.count).sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", ")
    print(
      "\(name): \(String(format2(result.ms))) ms, \(result.outcome.results.count) of \(sent) answered (\(statuses))"
    )
  }
}

func format2(_ value: Double) -> String {
  let hundredths = Int((value * 100).rounded())
  let fraction = hundredths % 100
  return "\(hundredths / 100).\(fraction < 10 ? "0" : "")\(fraction)"
}

/// The limits from the environment (TREE_DEPTH, BATCH_WORK), else the broker's defaults.
func configureLimits(_ store: PageStore) {
  if let text = getenv("TREE_DEPTH"), let depth = Int(String(cString: text)) { store.maxTreeDepth = depth }
  if let text = getenv("BATCH_WORK"), let work = Int(String(cString: text)) { store.maxBatchWork = work }
}

var random = SystemRandomNumberGenerator()
let bench = try Bench()
switch arguments[1] {
case "chain", "legacy-chain":
  if arguments[1] == "chain" {
    // The chain, 1,000 creates a batch, each under the one before (as deep as the limit lets it).
    var actions: [(page: EntityID, action: MutationAction)] = []
    for i in 0..<size {
      actions.append((id("p\(i)"), .createPage(parent: i == 0 ? nil : id("p\(i - 1)"), title: "P\(i)")))
    }
    let build = try bench.pushAll(actions)
    print("chain of \(size): the slowest batch of up to 1,000 creates took \(format2(build)) ms")
  } else {
    // The chain written into the file as a broker before the limit let a client build it; the store opened
    // again gives the pages their heights.
    try bench.store.connection.transaction {
      for i in 0..<size {
        try bench.store.connection.execute(
          """
          INSERT INTO page (id, workspace_id, kind, parent_id, parent_stamp, title, title_stamp, deleted_stamp,
                            created_seq, last_updated, updated_at_ms, height)
          VALUES (?, 'ws', 'page', ?, '', 'P', '', '', 1, 1, 1, -1)
          """, [.text("p\(i)"), i == 0 ? .null : .text("p\(i - 1)")])
      }
    }
    var start = timespec()
    clock_gettime(CLOCK_MONOTONIC, &start)
    _ = try PageStore(connection: bench.store.connection)
    print("legacy chain of \(size): heights given at open in \(format2(millis(since: start))) ms")
  }
  let more = (0..<1000).map {
    (id("q\($0)"), MutationAction.createPage(parent: id("p\(size - 1)"), title: "Q"))
  }
  bench.report("1,000 create_page under the leaf", try bench.push(more), sent: 1000)
  // The leaf moved back and forth between the two pages above it: each move walks the chain up.
  let leaf = id("p\(size - 1)")
  let moves = (0..<1000).map { (leaf, MutationAction.movePage(parent: id("p\(size - 3 + $0 % 2)"))) }
  bench.report("1,000 move_page at the bottom", try bench.push(moves), sent: 1000)
  bench.report(
    "the root moved under the leaf", try bench.push([(id("p0"), .movePage(parent: leaf))]), sent: 1)
case "blocks":
  let page = id("page")
  try bench.push([(page, .createPage(parent: nil, title: "Page"))])
  var actions: [(page: EntityID, action: MutationAction)] = []
  for i in 0..<size {
    actions.append(
      (
        page,
        .addBlock(
          block: id("b\(i)"), type: "text", text: "", after: i == 0 ? nil : id("b\(i - 1)"),
          attributes: [:])
      ))
  }
  let build = try bench.pushAll(actions)
  print("page of \(size) blocks: the slowest batch of 1,000 appends took \(format2(build)) ms")
  let randomAdds = (0..<1000).map { i in
    (
      page,
      MutationAction.addBlock(
        block: id("r\(i)"), type: "text", text: "", after: id("b\(Int.random(in: 0..<size, using: &random))"),
        attributes: [:])
    )
  }
  bench.report("1,000 add_block after random blocks", try bench.push(randomAdds), sent: 1000)
  let hotAdds = (0..<1000).map { i in
    (
      page,
      MutationAction.addBlock(
        block: id("h\(i)"), type: "text", text: "", after: id("b\(size / 2)"), attributes: [:])
    )
  }
  bench.report("1,000 add_block after one block", try bench.push(hotAdds), sent: 1000)
  let moves = (0..<1000).map { i in
    (page, MutationAction.moveBlock(block: id("b\(i % size)"), after: id("b\(size / 3)")))
  }
  bench.report("1,000 move_block after one block", try bench.push(moves), sent: 1000)
  // As many blocks of 64 KiB of text as fit in a request body of 8 MiB.
  let text = String(repeating: "The quick brown fox jumps over the lazy dog. ", count: 65_536 / 45)
  let big = (0..<126).map { i in
    (
      page,
      MutationAction.addBlock(block: id("big\(i)"), type: "text", text: text, after: nil, attributes: [:])
    )
  }
  bench.report("126 add_block of 64 KiB (an 8 MiB body)", try bench.push(big), sent: 126)
case "text":
  let page = id("page")
  let block = id("block")
  let initial = String(repeating: "abcdefghij", count: size / 10)
  try bench.push([
    (page, .createPage(parent: nil, title: "Page")),
    (page, .addBlock(block: block, type: "text", text: initial, after: nil, attributes: [:])),
  ])
  var document = TextDocument(text: initial, client: "")
  var text = Array(initial.unicodeScalars)
  var splices: [(page: EntityID, action: MutationAction)] = []
  for i in 0..<1000 {
    let at = Int.random(in: 0..<(text.count - 10), using: &random)
    text.replaceSubrange(at..<(at + 5), with: Array("x\(i % 10)yz!".unicodeScalars))
    var view = String.UnicodeScalarView()
    view.append(contentsOf: text)
    let update = document.replaceText(with: String(view), client: "bench")
    splices.append((page, .spliceText(block: block, ops: TextOps(update))))
  }
  bench.report("1,000 splice_text on a block of \(size) bytes", try bench.push(splices), sent: 1000)
  let edits = (0..<1000).map { i in
    (page, MutationAction.editBlock(block: block, text: initial + "\(i)", attributes: nil))
  }
  bench.report("1,000 edit_block (whole text) of \(size) bytes", try bench.push(edits), sent: 1000)
case "rows":
  let database = id("db")
  try bench.push([
    (database, .createDatabase(parent: nil, title: "DB")),
    (database, .setView(filter: nil, sort: ViewSort(property: "n", descending: false))),
  ])
  let rows = (0..<size).map { i in
    (
      id("row\(i)"),
      MutationAction.createRow(database: database, title: "R", properties: ["n": .number(Double(i))])
    )
  }
  let build = try bench.pushAll(rows)
  print("database of \(size) rows: the slowest batch of 1,000 create_row took \(format2(build)) ms")
  let edits = (0..<1000).map { i in
    (id("row\(i % size)"), MutationAction.setProperty(name: "n", value: .number(Double(size - i))))
  }
  bench.report("1,000 set_property on its rows", try bench.push(edits), sent: 1000)
default:
  break
}
