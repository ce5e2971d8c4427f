import BrokerStore
import FoundationEssentials
import FuzzSupport
import SQLiteStore
import StrictJSON
import StrictJSONTestKit
import SyncModel
import Web

// A batch, decoded from the input's JSON as the broker decodes `POST /v1/batch` (its strict reader) or, when the
// input is not a batch, built from its bytes (so most inputs reach the store), applied to a page store by
// alice, who may write workspace ws1, on top of a fixed starting state. Then the same batch is sent again, as a
// client whose answer was lost does. Properties:
// - the strict reader and JSONDecoder agree on the input (StrictJSONTestKit's DecodingAgreement: the same
//   batch or both refuse; not strict JSON is refused with a syntax error; the one allowed difference is an
//   integer field's inexact number, docs/protocol.md);
// - applying never traps and fails only with a `BatchError` (the whole batch refused, for a reason with a
//   name): a store error on a client's input is a finding;
// - exactly once: the re-send changes nothing (no sequence), keeps the client's last id, refuses the same way a
//   refused batch, and answers each mutation `duplicate` if it was applied and with the same rejection if it
//   was rejected; every rejection reason is one of the catalogue's;
// - every page the answer names reads back (snapshot and delta) at the time the answer gives it;
// - `PRAGMA integrity_check` stays ok (every 32 inputs: it walks the whole file).
// Each input runs in a transaction that is rolled back, so every input starts from the same state.

private func id(_ text: String) -> EntityID { try! EntityID(validating: text) }

private let ws1 = id("ws1")
private let ws2 = id("ws2")
private let alice = id("alice")

/// The starting state: in ws1 a page `home` with blocks b1, b2 and an inline database `tasks` (rows r1, r2, a
/// filter and a sort), a deleted page `gone`; in ws2 a page `secret`. alice's client `laptop` has applied ids
/// 1 to 3 (3 rejected); bob's client `phone` exists.
private func startingStore() -> PageStore {
  let connection = try! SQLiteConnection(path: ":memory:")
  let store = try! PageStore(connection: connection)
  var time: UInt64 = 1_000
  func batch(_ client: String, _ workspace: EntityID, _ actions: [(String, MutationAction)]) -> MutationBatch
  {
    let mutations = actions.enumerated().map { index, item in
      time += 1
      return Mutation(
        id: UInt64(index + 1), page: id(item.0), time: HLCTimestamp(millis: time), action: item.1)
    }
    return MutationBatch(client: id(client), workspace: workspace, mutations: mutations)
  }
  let setup = batch(
    "setup", ws1,
    [
      ("home", .createPage(parent: nil, title: "Home")),
      ("home", .addBlock(block: id("b1"), type: "text", text: "one", after: nil, attributes: [:])),
      (
        "home", .addBlock(block: id("b2"), type: "todo", text: "two", after: id("b1"), attributes: ["x": "y"])
      ),
      ("tasks", .createDatabase(parent: id("home"), title: "Tasks")),
      ("r1", .createRow(database: id("tasks"), title: "First", properties: ["Status": .string("Done")])),
      ("r2", .createRow(database: id("tasks"), title: "Second", properties: ["Due": .number(3)])),
      (
        "tasks",
        .setView(
          filter: ViewFilter(property: "Status", value: .string("Done")),
          sort: ViewSort(property: "Due", descending: true))
      ),
      ("gone", .createPage(parent: id("home"), title: "Gone")),
      ("gone", .deletePage),
    ])
  let secret = batch("setup2", ws2, [("secret", .createPage(parent: nil, title: "Secret"))])
  let laptop = batch(
    "laptop", ws1,
    [
      ("home", .setTitle("Home!")), ("r1", .setProperty(name: "Due", value: .number(1))),
      ("gone", .setTitle("rejected: deleted")),
    ])
  let phone = batch("phone", ws1, [("home", .setProperty(name: "Owner", value: .string("bob")))])
  try! connection.transaction {
    _ = try store.apply(setup, user: id("admin"), workspaces: [ws1, ws2], nowMillis: 1)
    _ = try store.apply(secret, user: id("admin"), workspaces: [ws1, ws2], nowMillis: 2)
    _ = try store.apply(laptop, user: alice, workspaces: [ws1], nowMillis: 3)
    _ = try store.apply(phone, user: id("bob"), workspaces: [ws1], nowMillis: 4)
  }
  return store
}

nonisolated(unsafe) private let store = startingStore()
nonisolated(unsafe) private let startingSequence = store.sequence
nonisolated(unsafe) private var inputs = 0

private let pages = ["home", "tasks", "r1", "r2", "gone", "secret", "new1", "new2"].map(id)
private let blocks = ["b1", "b2", "b3"].map(id)
private let names = ["Status", "Due", "", String(repeating: "n", count: 129)]

/// A batch from the input's bytes: which client, workspace and first id, then up to 12 mutations, each an
/// action with its arguments chosen by the following bytes.
private func generatedBatch(_ input: inout FuzzBytes) -> MutationBatch {
  let client = input.pick(["laptop", "laptop", "laptop", "phone", "fresh"])
  let workspace = input.pick([ws1, ws1, ws1, ws2])
  var next = input.pick([4, 4, 4, 1, 2, 0, 5, UInt64.max - 1])
  if client != "laptop" && next == 4 { next = 1 }
  var mutations: [Mutation] = []
  for _ in 0..<input.below(13) {
    func value() -> PropertyValue {
      switch input.below(6) {
      case 0: .string("Done")
      case 1: .number([0, -0.0, 1, 3, 1e300, -2.5][input.below(6)])
      case 2: .bool(input.byte() & 1 == 1)
      case 3: .list(["a", "b", ""].prefix(input.below(4)).map { $0 })
      default: .string(input.text(maxCount: 16))
      }
    }
    func maybe<T>(_ make: () -> T) -> T? { input.byte() & 1 == 0 ? nil : make() }
    let action: MutationAction =
      switch input.below(12) {
      case 0: .createPage(parent: maybe { input.pick(pages) }, title: input.text(maxCount: 8))
      case 1: .createDatabase(parent: maybe { input.pick(pages) }, title: input.text(maxCount: 8))
      case 2:
        .createRow(
          database: input.pick(pages), title: input.text(maxCount: 8),
          properties: maybe { [input.pick(names): value()] } ?? [:])
      case 3: .setTitle(input.text(maxCount: 8))
      case 4: .setProperty(name: input.pick(names), value: maybe(value))
      case 5:
        .addBlock(
          block: input.pick(blocks), type: input.pick(["text", "heading", "Bad", "child_database"]),
          text: input.text(maxCount: 8), after: maybe { input.pick(blocks) },
          attributes: maybe { ["database": input.pick(pages).rawValue] } ?? [:])
      case 6:
        .editBlock(
          block: input.pick(blocks), text: maybe { input.text(maxCount: 8) },
          attributes: maybe { [input.pick(names): "v"] })
      case 7: .moveBlock(block: input.pick(blocks), after: maybe { input.pick(blocks) })
      case 8: .deleteBlock(block: input.pick(blocks))
      case 9: .movePage(parent: maybe { input.pick(pages) })
      case 10: .deletePage
      default:
        .setView(
          filter: maybe { ViewFilter(property: input.pick(names), value: value()) },
          sort: maybe { ViewSort(property: input.pick(names), descending: input.byte() & 1 == 1) })
      }
    let millis = input.pick([500, 1_500, 2_000_000, UInt64.max]) &+ UInt64(input.below(4))
    let time = HLCTimestamp(millis: millis, counter: UInt32(input.below(3)))
    mutations.append(Mutation(id: next, page: input.pick(pages), time: time, action: action))
    // Now and then a gap inside the batch (refused whole: ids must be consecutive).
    next = next &+ (input.byte() == 0xFF ? 2 : 1)
  }
  return MutationBatch(client: id(client), workspace: workspace, mutations: mutations)
}

/// Applies `batch` in a savepoint, as the broker's writer does: the outcome, or the whole batch's refusal.
private func apply(_ batch: MutationBatch) -> Result<BatchOutcome, BatchError> {
  do {
    return .success(
      try store.connection.savepoint("batch") {
        try store.apply(batch, user: alice, workspaces: [ws1], nowMillis: 10)
      })
  } catch let error as BatchError {
    return .failure(error)
  } catch {
    preconditionFailure("property violated: a store error on a client's batch: \(error)")
  }
}

private func check(_ batch: MutationBatch) {
  let first = apply(batch)
  let again = apply(batch)
  switch (first, again) {
  case (.failure(let refused), .failure(let refusedAgain)):
    require(refused == refusedAgain, "refused for \(refused), then for \(refusedAgain)")
    require(!refused.description.isEmpty, "a refusal without a message")
  case (.success(let outcome), .success(let resent)):
    // One result per mutation: these batches (4 KiB at most, a store of a few pages) stay far below the work
    // budget, which could otherwise answer a batch in part (docs/protocol.md).
    require(outcome.results.count == batch.mutations.count, "not one result per mutation: \(outcome)")
    require(resent.sequence == nil, "the re-sent batch changed something: \(resent)")
    require(resent.lastMutationId == outcome.lastMutationId, "the re-send moved the last id: \(resent)")
    if let sequence = outcome.sequence {
      require(sequence == startingSequence + 1, "sequence \(sequence) after \(startingSequence)")
    }
    for (result, resentResult) in zip(outcome.results, resent.results) {
      require(
        result.mutationId == resentResult.mutationId && result.page == resentResult.page,
        "the re-send answered other mutations: \(result) vs \(resentResult)")
      let expected: MutationResult.Status = result.status == .applied ? .duplicate : result.status
      require(
        resentResult.status == expected && resentResult.reason == result.reason,
        "not exactly once: \(result) then \(resentResult)")
      if let reason = result.reason {
        require(RejectionReason.all.contains(reason), "a rejection outside the catalogue: \(reason)")
      }
      require(
        (result.status == .rejected) == (result.reason != nil), "a reason on a non-rejection: \(result)")
    }
    for (page, time) in outcome.pages {
      let snapshot = try! store.snapshot(of: page, workspaces: [ws1])
      require(snapshot?.lastUpdatedTime == time, "page \(page) reads back as \(String(describing: snapshot))")
      let delta = try! store.delta(of: page, since: startingSequence, workspaces: [ws1])
      require(
        delta?.lastUpdatedTime == time, "page \(page)'s delta reads back as \(String(describing: delta))")
    }
  default:
    preconditionFailure("property violated: the same batch was \(first), then \(again)")
  }
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> Int32 {
  let bytes = UnsafeRawBufferPointer(start: data, count: size)
  if case .disagreement(let what) = DecodingAgreement.check(MutationBatch.self, Array(bytes)) {
    preconditionFailure("property violated: the strict reader and JSONDecoder disagree: \(what)")
  }
  let batch: MutationBatch
  if let decoded = try? JSONReader.decode(MutationBatch.self, from: bytes) {
    batch = decoded
  } else {
    var input = FuzzBytes(bytes)
    batch = generatedBatch(&input)
  }
  try! store.connection.execute("BEGIN IMMEDIATE TRANSACTION")
  check(batch)
  inputs += 1
  if inputs % 32 == 0 {
    // The store is on SQLite here (`startingStore`); PageStore holds any engine's connection.
    let report = try! (store.connection as! SQLiteConnection).integrityCheck()
    require(report == ["ok"], "integrity_check: \(report)")
  }
  try! store.connection.execute("ROLLBACK TRANSACTION")
  return 0
}

runLibFuzzer { data, size in fuzz(data ?? UnsafePointer(bitPattern: 1)!, size) }
