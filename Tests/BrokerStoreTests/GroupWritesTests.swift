import BrokerStore
import EventLoop
import EventLoopTestKit
import SQLiteStore
import SyncModel
import Testing

private func id(_ text: String) -> EntityID { try! EntityID(validating: text) }

/// The writes a writer group's batches make once for the whole group (SQLite: the store's sequence and each
/// client's row, `PageStore.defersWritesToGroupEnd`): exactly-once, increasing times and what is stored must be
/// what they were with one write per batch, whatever the group holds.
@Suite struct GroupWritesTests {
  private static let workspace = id("ws")

  private func batch(_ client: String, _ ids: ClosedRange<UInt64>, page: String = "p", title: String = "t")
    -> MutationBatch
  {
    MutationBatch(
      client: id(client), workspace: Self.workspace,
      mutations: ids.map {
        Mutation(
          id: $0, page: id(page), time: HLCTimestamp(millis: 1000 + $0), action: .setTitle("\(title)\($0)"))
      })
  }

  private func apply(_ store: PageStore, _ batch: MutationBatch) throws -> BatchOutcome {
    try store.apply(batch, user: id("alice"), workspaces: [Self.workspace], nowMillis: 5000)
  }

  /// A fresh SQLite store file with page `p`, and the store on it as the broker's writer runs it (groups that
  /// defer their kept writes to the group's end). `close(_:_:)` both at the end (`defer`).
  private func makeStore() throws -> (TestStoreDatabase, PageStore) {
    let file = try TestStoreDatabase(.sqlite)
    do {
      let store = try PageStore(connection: try file.open())
      store.defersWritesToGroupEnd()
      try applyAlone(
        store,
        MutationBatch(
          client: id("maker"), workspace: Self.workspace,
          mutations: [
            Mutation(
              id: 1, page: id("p"), time: HLCTimestamp(millis: 1), action: .createPage(parent: nil, title: "")
            )
          ]))
      return (file, store)
    } catch {
      file.remove()
      throw error
    }
  }

  private func close(_ file: TestStoreDatabase, _ store: PageStore) {
    store.connection.close()
    file.remove()
  }

  /// Applies `batch` in a writer group of its own.
  @discardableResult
  private func applyAlone(_ store: PageStore, _ batch: MutationBatch) throws -> BatchOutcome {
    var outcome: BatchOutcome?
    try group(store) { outcome = try apply(store, batch) }
    return outcome!
  }

  /// Runs `body` as one writer group: a transaction, the kept writes written before COMMIT.
  private func group(_ store: PageStore, _ body: () throws -> Void) throws {
    var committed = false
    defer { store.groupEnded(committed: committed) }
    try store.connection.transaction(writing: true) {
      try body()
      store.jobEnded(kept: true)
      try store.groupWillCommit()
    }
    committed = true
  }

  private func storedClient(_ file: TestStoreDatabase, _ client: String) throws -> Int64? {
    let reader = try SQLiteConnection(path: file.path)
    defer { reader.close() }
    guard
      case .integer(let last)? = try reader.query(
        "SELECT last_mutation_id FROM client WHERE id = ?", [.text(client)]
      ).first?.first
    else { return nil }
    return last
  }

  private func storedSequence(_ file: TestStoreDatabase) throws -> String? {
    let reader = try SQLiteConnection(path: file.path)
    defer { reader.close() }
    guard
      case .text(let value)? = try reader.query("SELECT value FROM meta WHERE key = 'sequence'").first?.first
    else { return nil }
    return value
  }

  @Test func aLaterBatchOfTheGroupSeesWhatAnEarlierOneAppliedForItsClient() throws {
    let (file, store) = try makeStore()
    defer { close(file, store) }
    var second: BatchOutcome?
    try group(store) {
      #expect(try apply(store, batch("c", 1...2)).results.map(\.status) == [.applied, .applied])
      store.jobEnded(kept: true)
      // Its first answer lost, the device sends the batch again with one more mutation, into the same group.
      second = try apply(store, batch("c", 1...3))
    }
    #expect(second?.results.map(\.status) == [.duplicate, .duplicate, .applied])
    #expect(try storedClient(file, "c") == 3)
    // And after the group: the stored row is what the next group reads.
    #expect(try applyAlone(store, batch("c", 3...4)).results.map(\.status) == [.duplicate, .applied])
    #expect(try storedClient(file, "c") == 4)
  }

  @Test func batchesOfOneGroupTakeIncreasingSequencesAndTheStoreKeepsTheLast() throws {
    let (file, store) = try makeStore()
    defer { close(file, store) }
    var sequences: [UInt64] = []
    var times: [UInt64] = []
    try group(store) {
      for (index, client) in ["a", "b", "a"].enumerated() {
        let ids = UInt64(index / 2 + 1)...UInt64(index / 2 + 1)
        let outcome = try apply(store, batch(client, ids, title: "x\(index)"))
        if index < 2 { store.jobEnded(kept: true) }
        sequences.append(try #require(outcome.sequence))
        times.append(try #require(outcome.pages[id("p")]))
        #expect(store.sequence == outcome.sequence, "the group's reads see its newest sequence")
      }
    }
    #expect(sequences == [sequences[0], sequences[0] + 1, sequences[0] + 2])
    #expect(times == sequences, "a page's time strictly increases within the group")
    #expect(try storedSequence(file) == String(sequences[2]))
    #expect(try storedClient(file, "a") == 2)
    #expect(try storedClient(file, "b") == 1)
  }

  @Test func aJobRolledBackLeavesNothingKept() throws {
    let (file, store) = try makeStore()
    defer { close(file, store) }
    let before = store.sequence
    struct Failed: Error {}
    try group(store) {
      // The writer's savepoint for a job that failed after the store applied its batch.
      _ = try? store.connection.savepoint("job") {
        _ = try apply(store, batch("c", 1...2))
        throw Failed()
      }
      store.jobEnded(kept: false)
      #expect(store.sequence == before)
      // The same ids again: never applied, so applied now, not taken for duplicates.
      let statuses = try apply(store, batch("c", 1...2)).results.map(\.status)
      #expect(statuses == [.applied, .applied])
    }
    #expect(try storedClient(file, "c") == 2)
    #expect(try storedSequence(file) == String(before + 1))
  }

  @Test func aGroupThatFailsWritesNothingAndForgetsWhatItKept() throws {
    let (file, store) = try makeStore()
    defer { close(file, store) }
    let before = try storedSequence(file)
    struct Failed: Error {}
    #expect(throws: Failed.self) {
      try group(store) {
        _ = try apply(store, batch("c", 1...2))
        store.jobEnded(kept: true)
        throw Failed()
      }
    }
    #expect(try storedClient(file, "c") == nil)
    #expect(try storedSequence(file) == before)
    #expect(try applyAlone(store, batch("c", 1...1)).results.map(\.status) == [.applied])
    #expect(try storedClient(file, "c") == 1)
  }

  /// A page row the writer keeps between batches (`WriterCache`) is dropped when a mutation writes it: a later
  /// group's older title loses to the newer one written before, and a deleted page takes no more edits.
  @Test func theWriterSeesEveryPageRowChangeItMade() throws {
    let (file, store) = try makeStore()
    defer { close(file, store) }
    try applyAlone(store, batch("a", 1...1, title: "new"))  // time 1001
    try group(store) {
      // Time 1000 + 0 is older than 1001: last-writer-wins keeps "new1".
      let older = MutationBatch(
        client: id("b"), workspace: Self.workspace,
        mutations: [Mutation(id: 1, page: id("p"), time: HLCTimestamp(millis: 900), action: .setTitle("old"))]
      )
      let statuses = try apply(store, older).results.map(\.status)
      #expect(statuses == [.applied])
    }
    let reader = try SQLiteConnection(path: file.path)
    defer { reader.close() }
    #expect(try reader.query("SELECT title FROM page WHERE id = 'p'").first?.first == .text("new1"))
    try applyAlone(store, deletion("a", 2))
    try group(store) {
      let result = try apply(store, batch("a", 3...3)).results.first
      #expect(result?.status == .rejected && result?.reason == .pageDeleted)
    }
  }

  /// A job that read a page row after writing it and then rolled back, or a group that did and did not commit,
  /// leaves no row of what it wrote in the writer's cache.
  @Test func aRolledBackJobOrGroupLeavesNoPageRowBehind() throws {
    let (file, store) = try makeStore()
    defer { close(file, store) }
    struct Failed: Error {}
    // The deletion's second mutation reads the deleted row (and is rejected for it), then the job fails.
    let deleteThenEdit = MutationBatch(
      client: id("c"), workspace: Self.workspace,
      mutations: [
        Mutation(id: 1, page: id("p"), time: HLCTimestamp(millis: 2000), action: .deletePage),
        Mutation(id: 2, page: id("p"), time: HLCTimestamp(millis: 2001), action: .setTitle("gone")),
      ])
    try group(store) {
      _ = try? store.connection.savepoint("job") {
        let statuses = try apply(store, deleteThenEdit).results.map(\.status)
        #expect(statuses == [.applied, .rejected])
        throw Failed()
      }
      store.jobEnded(kept: false)
      let statuses = try apply(store, batch("d", 1...1)).results.map(\.status)
      #expect(statuses == [.applied], "p was never deleted")
    }
    #expect(throws: Failed.self) {
      try group(store) {
        _ = try apply(store, deleteThenEdit)
        store.jobEnded(kept: true)
        throw Failed()
      }
    }
    #expect(
      try applyAlone(store, batch("d", 2...2)).results.map(\.status) == [.applied], "p was never deleted")
  }

  /// A group that wrote its clients' rows and then did not commit leaves none of them in the writer's cache:
  /// the same ids are applied again, not answered as duplicates.
  @Test func aGroupThatFailsAfterWritingItsClientRowsLeavesNoneCached() throws {
    let (file, store) = try makeStore()
    defer { close(file, store) }
    struct Failed: Error {}
    #expect(throws: Failed.self) {
      try store.connection.transaction(writing: true) {
        _ = try apply(store, batch("c", 1...2))
        store.jobEnded(kept: true)
        try store.groupWillCommit()
        throw Failed()
      }
    }
    store.groupEnded(committed: false)
    #expect(try applyAlone(store, batch("c", 1...2)).results.map(\.status) == [.applied, .applied])
    // And a committed group's rows are what the next group reads from the cache.
    #expect(try applyAlone(store, batch("c", 2...3)).results.map(\.status) == [.duplicate, .applied])
    #expect(try storedClient(file, "c") == 3)
  }

  /// The writer's cache holds at most `writerCacheRows` page rows and as many client rows (past it, it starts
  /// over), none at 0, and the answers are the same either way.
  @Test func theWritersCacheIsBoundedByItsSetting() throws {
    let (file, store) = try makeStore()
    defer { close(file, store) }
    store.writerCacheRows = 2
    for (number, page) in ["p", "q", "r", "s"].enumerated() where page != "p" {
      let create = MutationBatch(
        client: id("maker"), workspace: Self.workspace,
        mutations: [
          Mutation(
            id: UInt64(number + 1), page: id(page), time: HLCTimestamp(millis: 1),
            action: .createPage(parent: nil, title: ""))
        ])
      try applyAlone(store, create)
    }
    for (client, page) in [("a", "p"), ("b", "q"), ("c", "r"), ("d", "s")] {
      try applyAlone(store, batch(client, 1...1, page: page))
      #expect(store.writerCacheCounts.pages <= 2 && store.writerCacheCounts.clients <= 2)
      try applyAlone(store, one(client + "x", 1, page: page, millis: 2000, setX(client)))
      #expect(store.writerCacheCounts.properties <= 2)
    }
    #expect(
      store.writerCacheCounts.pages > 0 && store.writerCacheCounts.clients > 0
        && store.writerCacheCounts.properties > 0, "it keeps rows")
    store.writerCacheRows = 0
    try applyAlone(store, deletion("a", 2))
    try group(store) {
      #expect(try apply(store, batch("a", 1...1)).results.map(\.status) == [.duplicate])
      let results = try apply(store, batch("a", 3...3)).results
      #expect(results.map(\.status) == [.rejected])
      #expect(results.last?.reason == .pageDeleted)
    }
    #expect(store.writerCacheCounts.pages <= 2)
  }

  /// One mutation of client `client`, numbered `number`, on `page`, at `millis`.
  private func one(
    _ client: String, _ number: UInt64, page: String = "p", millis: UInt64, _ action: MutationAction
  ) -> MutationBatch {
    MutationBatch(
      client: id(client), workspace: Self.workspace,
      mutations: [Mutation(id: number, page: id(page), time: HLCTimestamp(millis: millis), action: action)])
  }

  private func setX(_ value: String?) -> MutationAction {
    .setProperty(name: "x", value: value.map { .string($0) })
  }

  /// Page `page`'s property `name` as stored (its JSON), read on a connection of its own.
  private func storedProperty(_ file: TestStoreDatabase, page: String = "p", _ name: String = "x") throws
    -> SQLiteValue?
  {
    let reader = try SQLiteConnection(path: file.path)
    defer { reader.close() }
    return try reader.query(
      "SELECT value FROM property WHERE page_id = ? AND name = ?", [.text(page), .text(name)]
    ).first?.first
  }

  /// Page `page`'s kept size and its size counted from its rows (title and properties; these pages have no
  /// blocks), read on a connection of their own.
  private func sizes(_ file: TestStoreDatabase, page: String = "p") throws -> (kept: Int64?, counted: Int64?)
  {
    let reader = try SQLiteConnection(path: file.path)
    defer { reader.close() }
    let row = try reader.query(
      """
      SELECT stored_bytes, length(CAST(title AS BLOB))
        + coalesce((SELECT sum(length(CAST(name AS BLOB)) + length(CAST(value AS BLOB))) FROM property
                    WHERE page_id = page.id AND value IS NOT NULL), 0)
      FROM page WHERE id = ?
      """, [.text(page)]
    ).first
    let kept: Int64? = if case .integer(let value)? = row?[0] { value } else { nil }
    let counted: Int64? = if case .integer(let value)? = row?[1] { value } else { nil }
    return (kept, counted)
  }

  /// A property's stamp the writer keeps between batches is the one it last wrote, and one a job or group that
  /// rolled back wrote is kept nowhere: last-writer-wins decides as it would reading the store each time.
  @Test func theWriterSeesEveryPropertyChangeItMade() throws {
    let (file, store) = try makeStore()
    defer { close(file, store) }
    struct Failed: Error {}
    try applyAlone(store, one("a", 1, millis: 1000, setX("one")))
    try applyAlone(store, one("a", 2, millis: 3000, setX("three")))
    // Newer than the first stamp, older than the one written last: "three" stays.
    try applyAlone(store, one("b", 1, millis: 2000, setX("two")))
    #expect(try storedProperty(file) == .text(#""three""#))
    // A job that wrote a newer stamp and rolled back: a later write older than that stamp still wins.
    try group(store) {
      _ = try? store.connection.savepoint("job") {
        _ = try apply(store, one("c", 1, millis: 9000, setX("undone")))
        throw Failed()
      }
      store.jobEnded(kept: false)
      _ = try apply(store, one("d", 1, millis: 4000, setX("four")))
    }
    #expect(try storedProperty(file) == .text(#""four""#))
    // The same for a group that did not commit.
    #expect(throws: Failed.self) {
      try group(store) {
        _ = try apply(store, one("e", 1, millis: 9000, setX("undone")))
        store.jobEnded(kept: true)
        throw Failed()
      }
    }
    try applyAlone(store, one("f", 1, millis: 5000, setX("five")))
    #expect(try storedProperty(file) == .text(#""five""#))
    // A row's properties, kept as its creation wrote them: an older write loses to them.
    try applyAlone(store, one("g", 1, page: "db", millis: 100, .createDatabase(parent: nil, title: "")))
    try applyAlone(
      store,
      one(
        "g", 2, page: "r", millis: 7000,
        .createRow(database: id("db"), title: "", properties: ["x": .string("row")])))
    try applyAlone(store, one("h", 1, page: "r", millis: 6000, setX("older")))
    #expect(try storedProperty(file, page: "r") == .text(#""row""#))
  }

  /// The sizes the writer keeps (a property's, a title's) are what it last wrote: the page's kept size is its
  /// counted size after every change, values and titles growing, shrinking and going.
  @Test func aPagesKeptSizeFollowsItsPropertiesAndTitleThroughTheWritersCache() throws {
    let (file, store) = try makeStore()
    defer { close(file, store) }
    let changes: [MutationAction] = [
      setX("a"), .setTitle("a title"), setX("a longer value"), setX("ab"), .setTitle("t"), setX(nil),
      .setTitle("a much longer title than before"), setX("back again"), .setTitle(""),
    ]
    for (offset, action) in changes.enumerated() {
      let number = UInt64(offset + 1)
      try applyAlone(store, one("a", number, millis: 1000 + number, action))
      let (kept, counted) = try sizes(file)
      #expect(kept != nil && kept == counted, "after \(action)")
    }
    #expect(store.writerCacheCounts.properties == 1)
  }

  private func deletion(_ client: String, _ number: UInt64) -> MutationBatch {
    MutationBatch(
      client: id(client), workspace: Self.workspace,
      mutations: [
        Mutation(id: number, page: id("p"), time: HLCTimestamp(millis: 1000 + number), action: .deletePage)
      ])
  }

  /// The wiring: the writer groups jobs submitted together and tells the store where groups end.
  @Test func theWriterWritesEachGroupsKeptRowsOnce() throws {
    // The writer shuts the store's connection; only the file is left to remove.
    let (file, store) = try makeStore()
    defer { file.remove() }
    let writer = StoreWriter(store: store.connection, name: "group-writes-test", observer: store)
    let box = UncheckedBox(store)
    let loop = try Loop()
    var outcomes: [String: [MutationResult.Status]] = [:]
    var failures: [String] = []
    var remaining = 0
    loop.keepsRunningWhenIdle = true
    // The writer is held busy by a first job until every batch is queued, so that they make one group whatever
    // the threads' timing (a writer faster than the submissions would otherwise commit them one by one). The
    // batches are queued only once the writer runs that job: queued before it, they would join its group.
    let gate = ThreadGate()
    defer { gate.open() }
    writer.submit(on: loop, { _ in gate.wait() }, completion: { _ in })
    gate.waitUntilReached()
    // Two clients, each 40 one-mutation batches, and every batch sent twice (a device whose answers were lost).
    for number in UInt64(1)...40 {
      for client in ["a", "b"] {
        for _ in 0..<2 {
          let sent = batch(client, number...number, title: client)
          remaining += 1
          writer.submit(
            on: loop,
            { _ in try box.value.apply(sent, user: id("alice"), workspaces: [Self.workspace], nowMillis: 5000)
            },
            completion: { result in
              switch result {
              case .success(let outcome):
                outcomes["\(client)\(number)", default: []] += outcome.results.map(\.status)
              case .failure(let error): failures.append("\(error)")
              }
              remaining -= 1
              if remaining == 0 { loop.keepsRunningWhenIdle = false }
            })
        }
      }
    }
    gate.open()
    loop.run()
    writer.shutdown()
    try loop.close()
    #expect(failures.isEmpty)
    for number in 1...40 {
      for client in ["a", "b"] {
        #expect(
          outcomes["\(client)\(number)"]?.sorted { "\($0)" < "\($1)" } == [.applied, .duplicate],
          "\(client)\(number)")
      }
    }
    #expect(writer.transactionsCommitted == 2, "the gate's group, then every batch in one")
    #expect(try storedClient(file, "a") == 40)
    #expect(try storedClient(file, "b") == 40)
    let reader = try SQLiteConnection(path: file.path)
    defer { reader.close() }
    // The store's sequence is the group's last batch's: the page's time.
    let time = try reader.query("SELECT last_updated FROM page WHERE id = 'p'").first?.first
    guard case .integer(let lastUpdated)? = time else {
      Issue.record("page p has no time: \(String(describing: time))")
      return
    }
    #expect(try storedSequence(file) == String(lastUpdated))
  }
}

/// Hands the store to the writer's thread (it runs there only, as the broker's `StoreBox` does).
private final class UncheckedBox<T>: @unchecked Sendable {
  let value: T
  init(_ value: T) { self.value = value }
}
