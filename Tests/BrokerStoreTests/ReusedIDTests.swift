import BrokerStore
import EventLoopTestKit
import SQLiteStore
import SyncModel
import Testing

private func id(_ text: String) -> EntityID { try! EntityID(validating: text) }

/// Exactly once against two copies of one device's store (a backup restored, a cloned image): the same id
/// sent again with the same content is a duplicate, with other content `id_reused`, never applied and never
/// consumed, so the device can send it under a new client id.
@Suite struct ReusedIDTests {
  final class Fixture {
    let file: TestStoreDatabase
    let store: PageStore
    let wall: UInt64 = 1_700_000_000_000

    init(_ engine: StoreEngine) throws {
      file = try TestStoreDatabase(engine)
      let connection = try file.open()
      store = try PageStore(connection: connection)
    }

    deinit {
      store.connection.close()
      file.remove()
    }

    func mutation(
      _ number: UInt64, _ action: MutationAction, page: String = "home", at counter: UInt32? = nil
    )
      -> Mutation
    {
      Mutation(
        id: number, page: id(page), time: HLCTimestamp(millis: wall, counter: counter ?? UInt32(number)),
        action: action)
    }

    @discardableResult
    func push(_ mutations: [Mutation], client: String = "laptop") throws -> BatchOutcome {
      let batch = MutationBatch(client: id(client), workspace: id("ws"), mutations: mutations)
      return try store.connection.transaction(writing: true) {
        try store.apply(batch, user: id("alice"), workspaces: [id("ws")], nowMillis: wall)
      }
    }

    func title() throws -> String? { try store.snapshot(of: id("home"), workspaces: [id("ws")])?.title }

    func last(_ client: String = "laptop") throws -> SQLiteValue? {
      try store.connection.query("SELECT last_mutation_id FROM client WHERE id = ?", [.text(client)]).first?
        .first
    }
  }

  @Test(arguments: StoreEngine.tested) func aReSendIsADuplicateAndAnotherMutationUnderItsIdIsIdReused(
    engine: StoreEngine
  ) throws {
    let f = try Fixture(engine)
    let original = [f.mutation(1, .createPage(parent: nil, title: "first")), f.mutation(2, .setTitle("a"))]
    try f.push(original)
    // The same batch again (its answer was lost): duplicates.
    #expect(try f.push(original).results.map(\.status) == [.duplicate, .duplicate])
    // A clone's batch: id 1 the same (made before the copy), id 2 another edit, id 3 new to the broker.
    let clone = try f.push([original[0], f.mutation(2, .setTitle("b")), f.mutation(3, .setTitle("c"))])
    #expect(clone.results.map(\.status) == [.duplicate, .rejected, .rejected])
    #expect(clone.results.map(\.reason) == [nil, .idReused, .idReused])
    #expect(clone.lastMutationId == 2 && clone.sequence == nil)
    #expect(try f.title() == "a", "nothing of the clone's batch was applied")
    #expect(try f.last() == .integer(2), "id 3 was not consumed")
    // The original device goes on with id 3, which the clone's batch did not take.
    #expect(try f.push([f.mutation(3, .setTitle("d"))]).results.map(\.status) == [.applied])
    #expect(try f.title() == "d")
    // The clone under its new client id: applied.
    let renamed = try f.push(
      [f.mutation(1, .setTitle("b"), at: 10), f.mutation(2, .setTitle("c"), at: 11)], client: "laptop-2")
    #expect(renamed.results.map(\.status) == [.applied, .applied])
    #expect(try f.title() == "c")
  }

  @Test(arguments: StoreEngine.tested) func aReSentRejectionIsRejectedAgainOnlyWithItsOwnContent(
    engine: StoreEngine
  ) throws {
    let f = try Fixture(engine)
    try f.push([f.mutation(1, .createPage(parent: nil, title: "first"))])
    let refused = f.mutation(2, .setTitle("x"), page: "nowhere")
    #expect(try f.push([refused]).results.map(\.reason) == [.unknownPage])
    #expect(try f.push([refused]).results.map(\.reason) == [.unknownPage])
    #expect(try f.push([f.mutation(2, .setTitle("y"))]).results.map(\.reason) == [.idReused])
    #expect(try f.title() == "first")
  }

  /// Only the newest `digestsPerClient` ids keep their digest (whole rows of 64): a re-send below them is taken
  /// for a duplicate (as before digests were kept), one within them is checked; older rows go as newer ids come.
  @Test(arguments: StoreEngine.tested) func onlyTheNewestIdsKeepTheirDigest(engine: StoreEngine) throws {
    let f = try Fixture(engine)
    f.store.digestsPerClient = 64
    try f.push(
      [f.mutation(1, .createPage(parent: nil, title: "t"))]
        + (2...200).map { f.mutation($0, .setTitle("\($0)")) })
    // Ids 137 to 200 must be kept: chunks 2 and 3 (ids 128 to 255), the newest in the client's row; chunks 0
    // and 1 are gone.
    #expect(
      try f.store.connection.query("SELECT chunk FROM mutation_digest ORDER BY chunk") == [[.integer(2)]])
    #expect(
      try f.store.connection.query("SELECT length(recent_digests) FROM client WHERE id = 'laptop'")
        == [[.integer(512)]])
    #expect(try f.push([f.mutation(100, .setTitle("other"))]).results.map(\.status) == [.duplicate])
    #expect(try f.push([f.mutation(137, .setTitle("other"))]).results.map(\.reason) == [.idReused])
    #expect(try f.push([f.mutation(200, .setTitle("200"))]).results.map(\.status) == [.duplicate])
    // One batch at a time, the chunks follow: 3 leaves the client's row for the table, 2 goes.
    for id in UInt64(201)...300 { try f.push([f.mutation(id, .setTitle("\(id)"))]) }
    #expect(
      try f.store.connection.query("SELECT chunk FROM mutation_digest ORDER BY chunk") == [[.integer(3)]])
    #expect(try f.push([f.mutation(300, .setTitle("other"))]).results.map(\.reason) == [.idReused])
    #expect(try f.push([f.mutation(237, .setTitle("other"))]).results.map(\.reason) == [.idReused])
    // 0 checks none.
    f.store.digestsPerClient = 0
    #expect(try f.push([f.mutation(237, .setTitle("other"))]).results.map(\.status) == [.duplicate])
  }
}
