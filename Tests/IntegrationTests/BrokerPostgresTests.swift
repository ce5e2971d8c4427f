import EventLoop
import EventLoopTestKit
import PostgresStore
import PostgresTestKit
import Testing

#if canImport(Glibc)
  import Glibc
#endif

/// `pagesync-broker` on a PostgreSQL store (`[store] url`), a real server the test starts (`TestPostgres`), driven
/// by clients nobody here wrote.
@Suite(.serialized) struct BrokerPostgresTests {
  /// The whole device API script of the SQLite broker (batches, the stream's notifications, fetches, catch-up,
  /// re-sent batches applied once) passes unchanged on PostgreSQL.
  @Test func devicesUseTheHTTPAndStreamAPIOnAPostgreSQLStore() throws {
    let url = try TestPostgres.shared().makeDatabase()
    try expectBrokerScriptPasses("broker_api.py", [TestTokens.alice, TestTokens.bob], storeURL: url)
  }

  /// Two broker processes on one PostgreSQL store, written to at once through both by Python devices
  /// (Python/broker_pair.py): one epoch, every batch applied, distinct times per page with the greatest served by
  /// both, and a batch re-sent through the other broker applied once. (No bus here: each broker pushes only its
  /// own commits; the script checks the store, not notifications.)
  @Test func twoBrokersOnOneStoreKeepExactlyOnceAndTimesThatOnlyGrow() throws {
    let url = try TestPostgres.shared().makeDatabase()
    let loop = try Loop()
    let directories = [ScratchDirectory(), ScratchDirectory()]
    defer { for directory in directories { directory.remove() } }
    let brokers = try directories.map { try BrokerProcess(loop: loop, directory: $0, storeURL: url) }
    var run: ProcessRun?
    var stopped = 0
    brokers[0].whenListening { first in
      brokers[1].whenListening { second in
        run = try? ProcessRun(
          loop: loop, "python3",
          [integrationResource("Python/broker_pair.py"), first, second, TestTokens.alice, TestTokens.bob]
        ) { _ in for broker in brokers { broker.stop { status, _ in stopped += status == 0 ? 1 : 0 } } }
        if run == nil { for broker in brokers { broker.stop { _, _ in } } }
      }
    }
    try loop.runUntilDone(timeout: 120_000)
    try loop.close()
    let output = (run?.output.string ?? "") + (run?.errorOutput.string ?? "")
    #expect(run?.status == 0, "\(output)\n\(brokers[0].log)\n\(brokers[1].log)")
    #expect(run?.output.string.hasSuffix("ALL OK\n") == true, "\(output)")
    #expect(stopped == 2, "both brokers drain and exit 0")
  }

  /// The store gone (every connection of the broker's database cut, new ones refused): a batch is answered 503
  /// naming PostgreSQL and nothing of it is stored; once the database takes connections again, the broker
  /// connects again by itself, the same batch re-sent is applied (once), and a fetch reads it back. curl is the
  /// client; the database is checked through a connection of the test's own.
  @Test func aLostStoreAnswers503AcknowledgesNothingAndRecoversByItself() throws {
    let server = try TestPostgres.shared()
    let url = try server.makeDatabase()
    // postgres://postgres@/NAME?host=DIR
    let database = String(url.split(separator: "@/")[1].split(separator: "?")[0])
    let admin = try PostgresConnection(url: server.url("postgres"))
    defer { admin.close() }
    let loop = try Loop()
    let directory = ScratchDirectory()
    defer { directory.remove() }
    let broker = try BrokerProcess(loop: loop, directory: directory, storeURL: url)
    var answers: [String] = []
    func batch(_ id: Int, _ title: String) -> String {
      #"{"client":"c1","workspace":"w1","mutations":[{"id":\#(id),"page":"home","time":"\#(id + 5):0","type":"#
        + (id == 1
          ? #""create_page","title":"\#(title)"}]}"# : #""set_title","title":"\#(title)"}]}"#)
    }
    broker.whenListening { base in
      let auth = ["-H", "Authorization: Bearer \(TestTokens.alice)"]
      // (request, what to do to the store before it)
      let steps: [([String], (() throws -> Void)?)] = [
        (auth + ["-X", "POST", "\(base)/v1/batch", "--data-binary", batch(1, "Home")], nil),
        (
          auth + ["-X", "POST", "\(base)/v1/batch", "--data-binary", batch(2, "Gone")],
          {
            try admin.execute("ALTER DATABASE \(database) ALLOW_CONNECTIONS false")
            try admin.execute(
              "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '\(database)'")
          }
        ),
        (auth + ["\(base)/v1/pages/home"], nil),
        (
          auth + ["-X", "POST", "\(base)/v1/batch", "--data-binary", batch(2, "Back")],
          { try admin.execute("ALTER DATABASE \(database) ALLOW_CONNECTIONS true") }
        ),
        (auth + ["\(base)/v1/pages/home"], nil),
        (["\(base)/healthz"], nil),
      ]
      func next(_ index: Int) {
        guard index < steps.count else {
          broker.stop { _, _ in }
          return
        }
        do {
          try steps[index].1?()
        } catch {
          Issue.record("store step \(index): \(error)")
        }
        _ = try? ProcessRun(
          loop: loop, "curl", ["-s", "--max-time", "20", "-w", " %{http_code}"] + steps[index].0
        ) { run in
          answers.append(run.output.string)
          next(index + 1)
        }
      }
      next(0)
    }
    try loop.runUntilDone(timeout: 90_000)
    try loop.close()
    try #require(answers.count == 6, "\(answers) \(broker.log)")
    #expect(answers[0].contains(#""status":"applied""#) && answers[0].hasSuffix(" 200"), "\(answers[0])")
    #expect(answers[1].hasSuffix(" 503") && answers[1].contains("PostgreSQL"), "\(answers[1])")
    #expect(answers[2].hasSuffix(" 503"), "a read while the store is gone: \(answers[2])")
    #expect(answers[3].contains(#""status":"applied""#) && answers[3].hasSuffix(" 200"), "\(answers[3])")
    #expect(answers[4].contains(#""title":"Back""#) && answers[4].hasSuffix(" 200"), "\(answers[4])")
    #expect(answers[5].hasSuffix(" 200"), "\(answers[5])")
    // Nothing of the refused batch was stored: the title went from Home to Back.
    let check = try PostgresConnection(url: url)
    defer { check.close() }
    let rows = try check.query("SELECT title, last_updated FROM page WHERE id = 'home'")
    #expect(rows == [[.text("Back"), .integer(2)]], "\(rows)")
  }
}
