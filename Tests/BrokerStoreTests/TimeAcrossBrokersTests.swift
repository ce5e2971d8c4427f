import BrokerStore
import EventLoop
import EventLoopTestKit
import PostgresStore
import PostgresTestKit
import SQLiteStore
import SyncModel
import Testing

private func id(_ text: String) -> EntityID { try! EntityID(validating: text) }

/// Issue #19, item 2: several brokers on one PostgreSQL store, each with its own writer (connection, group
/// commit), applying batches at once (docs/architecture.md, "Time across brokers").
@Suite struct TimeAcrossBrokersTests {
  static let workspaces: Set<EntityID> = [id("ws1"), id("ws2")]

  static func batch(_ client: String, _ workspace: String, _ mutations: [Mutation]) -> MutationBatch {
    MutationBatch(client: id(client), workspace: id(workspace), mutations: mutations)
  }

  /// The sequence-gap problem: a transaction that took an earlier number commits after a reader saw a later
  /// one. T1 changes page a (workspace 1) and stays open; T2 changes page b (workspace 2, so no lock between
  /// them) and commits; a pull sees b and hands out its cursor; T1 commits. The pull from that cursor must bring
  /// a (with sequence numbers as the cursor, a's number is below b's and it was skipped for ever).
  @Test func aCommitLandingBehindAPulledCursorIsStillPulled() throws {
    let url = try TestPostgres.shared().makeDatabase()
    let one = try PageStore(connection: PostgresConnection(url: url))
    let two = try PageStore(connection: PostgresConnection(url: url))
    let reader = try PageStore(reading: PostgresConnection(url: url))
    defer { for store in [one, two, reader] { store.connection.close() } }
    let create = { (page: String, millis: UInt64) in
      [
        Mutation(
          id: 1, page: id(page), time: HLCTimestamp(millis: millis),
          action: .createPage(parent: nil, title: page))
      ]
    }
    try one.connection.beginGroup()
    let first = try one.apply(
      Self.batch("c1", "ws1", create("a", 10)), user: id("u"), workspaces: Self.workspaces, nowMillis: 10)
    try two.connection.transaction(writing: true) {
      _ = try two.apply(
        Self.batch("c2", "ws2", create("b", 11)), user: id("u"), workspaces: Self.workspaces, nowMillis: 11)
    }
    let (seen, cursor) = try reader.connection.transaction(writing: false) {
      (
        try reader.pagesChanged(after: 0, workspaces: Self.workspaces, offset: 0, limit: 100).pages,
        reader.syncCursor
      )
    }
    #expect(seen == [id("b")])
    try one.connection.commitGroup()
    #expect(first.results.map(\.status) == [.applied])
    let next = try reader.connection.transaction(writing: false) {
      try reader.pagesChanged(after: cursor, workspaces: Self.workspaces, offset: 0, limit: 100).pages
    }
    #expect(next.contains(id("a")), "a committed after the cursor was handed out: \(next), cursor \(cursor)")
  }

  /// Two brokers' groups, each holding a batch of one client and then given a batch of the other client, in
  /// another workspace than any of the other group's (so the workspace locks never meet): group one wrote c1's
  /// row and would wait for c2's, group two the other way round, a cycle that PostgreSQL breaks only after
  /// `deadlock_timeout`, failing one group's batch (503). A later batch of a group must not wait for a client
  /// another transaction holds either: it ends the group (`StoreGroupMustEnd`) and runs first in the next one.
  /// Each connection has a `lock_timeout`, so that a wait fails this test in 2 s instead of hanging it (one test
  /// thread drives both). Run again after both commits, each deferred batch is judged against the other's
  /// commit: c2's id 1, already used for another edit, is `id_reused`, not applied a second time.
  @Test func laterBatchesOfAGroupNeverWaitForAnotherGroupsClient() throws {
    let url = try TestPostgres.shared().makeDatabase()
    let one = try PageStore(connection: PostgresConnection(url: url))
    let two = try PageStore(connection: PostgresConnection(url: url))
    defer { for store in [one, two] { store.connection.close() } }
    for store in [one, two] { try store.connection.execute("SET lock_timeout = '2s'") }
    let create = { (client: String, workspace: String, page: String) in
      Self.batch(
        client, workspace,
        [
          Mutation(
            id: 1, page: id(page), time: HLCTimestamp(millis: 10),
            action: .createPage(parent: nil, title: page))
        ]
      )
    }
    func apply(_ store: PageStore, _ batch: MutationBatch) throws -> [MutationResult.Status] {
      try store.connection.savepoint("job") {
        try store.apply(batch, user: id("u"), workspaces: Self.workspaces, nowMillis: 10).results.map(
          \.status)
      }
    }
    try one.connection.beginGroup()
    try two.connection.beginGroup()
    #expect(try apply(one, create("c1", "ws1", "p1")) == [.applied])
    #expect(try apply(two, create("c2", "ws2", "q1")) == [.applied])
    let started = ContinuousClock.now
    #expect(throws: StoreGroupMustEnd.self) { try apply(one, create("c2", "ws1", "p2")) }
    #expect(throws: StoreGroupMustEnd.self) { try apply(two, create("c1", "ws2", "q2")) }
    #expect(ContinuousClock.now - started < .seconds(1), "a later batch waited for a lock")
    try one.connection.commitGroup()
    try two.connection.commitGroup()
    let again = try one.connection.transaction(writing: true) { try apply(one, create("c2", "ws1", "p2")) }
    #expect(again == [.rejected], "c2's id 1 is q1's: \(again)")
    let check = try PostgresConnection(url: url)
    defer { check.close() }
    let pages = try check.query("SELECT id FROM page ORDER BY id")
    #expect(pages == [[.text("p1")], [.text("q1")]], "\(pages)")
  }

  /// Two brokers' writers apply batches to the same pages at once, each group mixing both workspaces in the
  /// opposite order of the other's (what would deadlock two groups that waited for each other's locks), and one
  /// client sends the same batch through both (a device that failed over and re-sent it). Every batch is
  /// answered; each page's times are distinct and its stored time is the greatest (in commit order, a later
  /// commit never carries a smaller time); the change log holds exactly the times answered; the re-sent batch is
  /// applied once.
  @Test func batchesOnTwoBrokersKeepExactlyOnceAndTimesThatOnlyGrow() throws {
    let url = try TestPostgres.shared().makeDatabase()
    let setup = try PageStore(connection: PostgresConnection(url: url))
    let pages = ["ws1": ["p0", "p1", "p2"], "ws2": ["q0", "q1", "q2"]]
    try setup.connection.transaction(writing: true) {
      for (workspace, ids) in pages.sorted(by: { $0.key < $1.key }) {
        let mutations = ids.enumerated().map { index, page in
          Mutation(
            id: UInt64(index + 1), page: id(page), time: HLCTimestamp(millis: 1),
            action: .createPage(parent: nil, title: page))
        }
        _ = try setup.apply(
          Self.batch("setup-\(workspace)", workspace, mutations), user: id("u"), workspaces: Self.workspaces,
          nowMillis: 1)
      }
    }
    setup.connection.close()
    let loop = try Loop()
    let brokers = try (0..<2).map { _ in
      let connection = try PostgresConnection(url: url)
      return (
        StoreBoxForTest(try PageStore(connection: connection)), StoreWriter(store: connection, name: "w")
      )
    }
    let perBroker = 60
    var outcomes: [[String: UInt64]] = []
    var failures: [String] = []
    var resent: [MutationResult.Status] = []
    var remaining = 2 * perBroker + 2
    loop.keepsRunningWhenIdle = true
    func finished() {
      remaining -= 1
      if remaining == 0 { loop.keepsRunningWhenIdle = false }
    }
    for round in 0..<perBroker {
      for (index, (box, writer)) in brokers.enumerated() {
        // Broker 0 goes ws1, ws2, ws1, ...; broker 1 the other way round.
        let workspace = (round + index) % 2 == 0 ? "ws1" : "ws2"
        let touched = pages[workspace]!.shuffled().prefix(2)
        let mutations = touched.enumerated().map { offset, page in
          Mutation(
            id: UInt64(offset + 1), page: id(page),
            time: HLCTimestamp(millis: UInt64(100 + round), counter: UInt32(index)),
            action: .setTitle("\(round)"))
        }
        let batch = Self.batch("b\(index)-\(round)", workspace, mutations)
        writer.submit(
          on: loop,
          { _ in try box.store.apply(batch, user: id("u"), workspaces: Self.workspaces, nowMillis: 1000) },
          completion: { result in
            switch result {
            case .success(let outcome):
              outcomes.append(
                Dictionary(uniqueKeysWithValues: outcome.pages.map { ($0.key.rawValue, $0.value) }))
            case .failure(let error): failures.append("\(error)")
            }
            finished()
          })
        if round == perBroker / 2 {
          let again = Self.batch(
            "failover", "ws1",
            [Mutation(id: 1, page: id("p0"), time: HLCTimestamp(millis: 500), action: .setTitle("once"))])
          writer.submit(
            on: loop,
            { _ in try box.store.apply(again, user: id("u"), workspaces: Self.workspaces, nowMillis: 1000) },
            completion: { result in
              if case .success(let outcome) = result {
                resent.append(contentsOf: outcome.results.map(\.status))
                // The applied copy's time is p0's like any other; the duplicate's answer repeats p0's current one.
                if outcome.sequence != nil {
                  outcomes.append(
                    Dictionary(uniqueKeysWithValues: outcome.pages.map { ($0.key.rawValue, $0.value) }))
                }
              }
              if case .failure(let error) = result { failures.append("\(error)") }
              finished()
            })
        }
      }
    }
    try loop.runUntilDone(timeout: 120_000)
    for (_, writer) in brokers { writer.shutdown() }
    try loop.close()
    #expect(failures.isEmpty, "\(failures)")
    #expect(resent.map(\.rawValue).sorted() == ["applied", "duplicate"], "\(resent)")
    let check = try PostgresConnection(url: url)
    defer { check.close() }
    for page in pages.values.flatMap({ $0 }) {
      let times = outcomes.compactMap { $0[page] }
      #expect(
        Set(times).count == times.count, "\(page): two commits answered the same time: \(times.sorted())")
      let stored = try check.query("SELECT last_updated FROM page WHERE id = ?", [.text(page)])
      #expect(
        stored == [[.integer(Int64(times.max() ?? 0))]],
        "\(page): stored \(stored), answered \(times.sorted())")
      let logged = try check.query(
        "SELECT seq FROM change_log WHERE page_id = ? AND field = 'title' ORDER BY seq", [.text(page)])
      #expect(logged.map { $0[0] } == times.sorted().map { .integer(Int64($0)) }, "\(page): log \(logged)")
    }
  }
}

/// The store as a writer's jobs reach it (jobs are `@Sendable`; only the writer's thread touches it).
final class StoreBoxForTest: @unchecked Sendable {
  let store: PageStore
  init(_ store: PageStore) { self.store = store }
}
