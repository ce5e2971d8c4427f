import DaemonCore
import DaemonCoreTestKit
import DaemonStore
import EventLoopTestKit
import FoundationEssentials
import SyncModel
import SyncProtocol
import Testing
import Web

@testable import Daemon

#if canImport(Glibc)
  import Glibc
#endif

/// The daemon's token against a scripted broker: read from `token_file`, printed by `token_command`, handed by
/// `PUT /v1/token` (driven with curl), and got again when the broker refuses it, with nothing queued lost and a
/// catch-up (not a download of everything) after.
@Suite struct TokenTests {
  /// The harness's directory, known from the store path the harness chose.
  static func directory(_ configuration: DaemonConfiguration) -> String {
    String(configuration.storePath.dropLast("pagesyncd.sqlite".count))
  }

  static func write(_ text: String, to path: String) throws {
    let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
    try #require(fd >= 0)
    defer { close(fd) }
    _ = text.withCString { Glibc.write(fd, $0, strlen($0)) }
  }

  struct StatusBody: Decodable {
    var state: String
    var lastError: String?
    var tokenSource: String
    var tokenProblem: String?
    var pendingMutations: Int
  }

  static func status(_ harness: DaemonHarness) throws -> StatusBody {
    let answer = try harness.answer(harness.request(.GET, "/v1/status"), "the status")
    return try JSONDecoder().decode(StatusBody.self, from: Data(answer.body.readableBytesArray))
  }

  /// Edits page `a`'s title through the local API: a mutation queued.
  static func edit(_ harness: DaemonHarness, _ title: String) throws {
    let answer = try harness.answer(
      harness.request(.PATCH, "/v1/pages/a", body: #"{"title":"\#(title)"}"#), "the edit")
    #expect(answer.head.status.code == 200)
  }

  @Test func aStreamClosedForAnExpiredTokenReadsTheFileAgainAndPushesWhatWasQueuedMeanwhile() throws {
    let harness = try DaemonHarness(
      prepare: SyncDriverTests.threePages,
      configure: { $0.tokenFile = TokenTests.directory($0) + "token" }, api: true)
    let file = Self.directory(harness.configuration) + "token"
    try Self.write("first-token\n", to: file)
    harness.driver.start()
    try harness.run(until: "the first attempt") { harness.broker.streamOpens.count == 1 }
    #expect(harness.broker.tokens.last == "first-token")
    let stream = harness.broker.acceptStream()
    stream.answerSubscribe()
    harness.broker.catchUps[0].succeed(Broker.caughtUp())
    #expect(harness.machine.state == .live)

    // The token's exp passes: the broker closes the stream 4401.
    stream.closeByBroker(code: 4401, reason: "token expired")
    #expect(harness.machine.state != .live)
    var status = try Self.status(harness)
    #expect(status.tokenProblem?.contains("token expired") == true)
    #expect(status.lastError == status.tokenProblem)
    #expect(status.tokenSource == "token_file")
    // An edit while there is no usable token stays queued.
    try Self.write("first-token\n", to: file)
    try Self.edit(harness, "edited offline")
    #expect(harness.broker.pushes.isEmpty)
    // The reconnect read the old token again (the app had not renewed it yet) and was refused 401.
    try harness.run(until: "the second attempt") { harness.broker.streamOpens.count == 2 }
    #expect(harness.broker.tokens.last == "first-token")
    harness.broker.streamOpens[1].fail(.status(401, "token expired"))
    // (Read without turning the loop: the next attempt is due within a millisecond.)
    #expect(try harness.store.status().pendingMutations == 1)
    #expect(harness.driver.tokens.problem?.contains("token expired") == true)

    try Self.write("renewed-token\r\n", to: file)
    try harness.run(until: "the third attempt") { harness.broker.streamOpens.count == 3 }
    #expect(harness.broker.tokens.last == "renewed-token")
    harness.broker.acceptStream().answerSubscribe()
    // A catch-up from the pages' own times, as after any reconnect: no page downloaded again unasked.
    try #require(harness.broker.catchUps.count == 2)
    #expect(harness.broker.catchUps[1].request.pages == [id("a"): 1, id("b"): 1, id("c"): 2])
    harness.broker.catchUps[1].succeed(Broker.caughtUp())
    let push = try #require(harness.broker.pushes.first)
    #expect(push.request.mutations.count == 1)
    push.succeed(Broker.outcome(of: push.request, pages: ["a": 5]))
    #expect(harness.broker.fetches.map { Set($0.request.pages.keys) } == [[id("a")]])
    status = try Self.status(harness)
    #expect(status.pendingMutations == 0 && status.tokenProblem == nil && status.lastError == nil)
    #expect(harness.driver.counters.tokenRefusals == 2)
    try harness.shutdown()
  }

  @Test func aPushRefused401KeepsItsMutationsAndGoesAgainWithTheCommandsNextToken() throws {
    let harness = try DaemonHarness(
      prepare: SyncDriverTests.threePages,
      configure: { $0.tokenCommand = ["/bin/cat", TokenTests.directory($0) + "token"] }, api: true)
    let file = Self.directory(harness.configuration) + "token"
    try Self.write("one\n", to: file)
    harness.driver.start()
    try harness.run(until: "the first attempt") { harness.broker.streamOpens.count == 1 }
    #expect(harness.broker.tokens.last == "one")
    harness.broker.acceptStream().answerSubscribe()
    harness.broker.catchUps[0].succeed(Broker.caughtUp())
    try Self.edit(harness, "edited")
    let first = try #require(harness.broker.pushes.first)
    try Self.write("two\n", to: file)
    first.fail(.status(401, "token expired"))
    #expect(harness.machine.state != .live)
    #expect(try harness.store.status().pendingMutations == 1)
    try harness.run(until: "the reconnect") { harness.broker.streamOpens.count == 2 }
    #expect(harness.broker.tokens.last == "two")
    harness.broker.acceptStream().answerSubscribe()
    harness.broker.catchUps[1].succeed(Broker.caughtUp())
    try #require(harness.broker.pushes.count == 2)
    #expect(harness.broker.pushes[1].request.mutations.map(\.id) == first.request.mutations.map(\.id))
    harness.broker.pushes[1].succeed(Broker.outcome(of: harness.broker.pushes[1].request))
    #expect(try harness.store.status().pendingMutations == 0)
    try harness.shutdown()
  }

  @Test(arguments: [
    (["/bin/sh", "-c", "exit 3"], 10, "token_command /bin/sh exited with status 3"),
    (["/bin/true"], 10, "token_command /bin/true: no token: the first line is empty"),
    (["/bin/sleep", "30"], 1, "token_command /bin/sleep timed out after 1 s (killed)"),
    (["/nonexistent/token-program"], 10, "token_command /nonexistent/token-program"),
  ])
  func aFailingTokenCommandShowsInStatusAndIsTriedAgain(argv: [String], timeout: Int, expected: String) throws
  {
    let harness = try DaemonHarness(
      configure: {
        $0.tokenCommand = argv
        $0.tokenCommandTimeoutSeconds = timeout
      }, api: true)
    harness.driver.start()
    try harness.run(until: "the command failed") { harness.driver.counters.tokenFailures >= 1 }
    let status = try Self.status(harness)
    #expect(status.lastError?.hasPrefix("no usable token: \(expected)") == true, "\(status.lastError ?? "")")
    #expect(status.tokenProblem?.hasPrefix(expected) == true)
    #expect(harness.broker.streamOpens.isEmpty, "nothing is sent without a token")
    if timeout > 1 {
      try harness.run(until: "the command ran again") { harness.driver.counters.tokenFailures >= 2 }
    }
    try harness.shutdown()
  }

  /// A program that exits 0 leaving a child that holds its stdout: the first line is taken at its exit, not at the
  /// timeout (the child would keep the pipe open for 3 s).
  @Test func aCommandWhoseChildKeepsItsOutputOpenIsNotWaitedFor() throws {
    let harness = try DaemonHarness(
      configure: {
        $0.tokenCommand = ["/bin/sh", "-c", "echo from-sh; sleep 3 &"]
        $0.tokenCommandTimeoutSeconds = 1
      })
    harness.driver.start()
    try harness.run(until: "the token read", timeout: 5_000) {
      !harness.broker.streamOpens.isEmpty || harness.driver.counters.tokenFailures > 0
    }
    #expect(harness.driver.counters.tokenFailures == 0, "\(harness.driver.tokens.problem ?? "")")
    #expect(harness.broker.tokens.last == "from-sh")
    try harness.shutdown()
  }

  /// A FIFO as token_file would block a plain open(2) until a writer came: it is refused, the loop runs on.
  @Test func aTokenFileThatIsAFIFOIsRefusedWithoutBlocking() throws {
    let harness = try DaemonHarness(configure: { $0.tokenFile = TokenTests.directory($0) + "fifo" })
    let fifo = Self.directory(harness.configuration) + "fifo"
    try #require(mkfifo(fifo, 0o600) == 0)
    defer { unlink(fifo) }
    harness.driver.start()
    try harness.run(until: "the read failed") { harness.driver.counters.tokenFailures > 0 }
    #expect(harness.driver.lastError == "no usable token: token_file \(fifo): not a regular file")
    // systemd's STATUS= line says it too.
    #expect(DaemonMain.status(of: harness.driver).contains("(token_file \(fifo): not a regular file)"))
    try harness.shutdown()
  }

  /// PUT /v1/token with curl, an HTTP client nobody here wrote.
  @Test func aTokenHandedByCurlWinsUntilRefusedAndMalformedBodiesAre400() throws {
    let harness = try DaemonHarness(
      prepare: SyncDriverTests.threePages, configure: { $0.token = "configured" }, api: true)
    harness.goLive()
    #expect(harness.broker.tokens.isEmpty || harness.broker.tokens.last == "configured")
    /// `PUT /v1/token` with `body`, or `DELETE /v1/token` when nil.
    func curl(_ body: String?) throws -> (status: String, body: String) {
      var run: ProcessRun?
      let request =
        body.map { ["-X", "PUT", "-H", "Content-Type: application/json", "--data-binary", $0] } ?? [
          "-X", "DELETE",
        ]
      let started = try ProcessRun(
        loop: harness.loop, "curl",
        ["-sS", "--unix-socket", harness.configuration.socketPath] + request + [
          "-w", "\n%{http_code}", "http://localhost/v1/token",
        ]
      ) { run = $0 }
      _ = started
      try harness.run(until: "curl") { run != nil }
      let lines = run!.output.string.split(separator: "\n", omittingEmptySubsequences: false)
      return (String(lines.last ?? ""), lines.dropLast().joined(separator: "\n"))
    }
    for (body, message) in [
      (#"{"token": ""}"#, "invalid token: the token is empty"),
      (#"{"token": "two words"}"#, "invalid token: the token holds a byte that is not visible ASCII (0x20)"),
      (#"{"token": 5}"#, "invalid JSON body"),
      (#"{}"#, "invalid JSON body"),
      ("token=abc", "invalid JSON body"),
      (
        #"{"token": "\#(String(repeating: "x", count: 20_000))"}"#,
        "longer than [broker] token_max_bytes (16384)"
      ),
    ] {
      let answer = try curl(body)
      #expect(answer.status == "400", "\(body.prefix(40))")
      #expect(answer.body.contains(message), "\(answer.body)")
      #expect(answer.body.contains("token") || body == "token=abc")
    }
    #expect(harness.machine.state == .live, "a refused body changes nothing")

    let good = try curl(#"{"token": "from-the-app.eyJhbGciOi"}"#)
    #expect(good.status == "200" && good.body.contains(#""tokenSource":"api""#))
    // The stream reopens with the app's token; the catch-up follows.
    try harness.run(until: "the reconnect") { harness.broker.streamOpens.count == 2 }
    #expect(harness.broker.tokens.last == "from-the-app.eyJhbGciOi")
    let stream = harness.broker.acceptStream()
    stream.answerSubscribe()
    harness.broker.catchUps.last?.succeed(Broker.caughtUp())
    #expect(harness.machine.state == .live)
    // The broker revokes it: the configured token is used again.
    stream.closeByBroker(code: 1008, reason: "token revoked")
    #expect(harness.driver.tokens.problem?.contains("PUT /v1/token") == true)
    try harness.run(until: "the reconnect") { harness.broker.streamOpens.count == 3 }
    #expect(harness.broker.tokens.last == "configured")
    #expect(try Self.status(harness).tokenSource == "token")
    // The app hands another, then its user signs out: back to the configured token.
    let again = try curl(#"{"token": "second-app-token"}"#)
    #expect(again.status == "200")
    try harness.run(until: "the reconnect") { harness.broker.streamOpens.count == 4 }
    #expect(harness.broker.tokens.last == "second-app-token")
    harness.broker.acceptStream()
    let withdrawn = try curl(nil)
    #expect(withdrawn.status == "200" && withdrawn.body.contains(#""tokenSource":"token""#))
    try harness.run(until: "the reconnect") { harness.broker.streamOpens.count == 5 }
    #expect(harness.broker.tokens.last == "configured")
    // The token is not in the log.
    #expect(!harness.log.messages(atLeast: .trace).contains { $0.contains("from-the-app") })
    try harness.shutdown()
  }

  @Test func aReloadReadsTheTokenFileAgainAndReconnectsOnlyIfItChanged() throws {
    let harness = try DaemonHarness(
      prepare: SyncDriverTests.threePages,
      configure: { $0.tokenFile = TokenTests.directory($0) + "token" })
    let file = Self.directory(harness.configuration) + "token"
    try Self.write("alpha\n", to: file)
    harness.driver.start()
    try harness.run(until: "the first attempt") { harness.broker.streamOpens.count == 1 }
    harness.broker.acceptStream().answerSubscribe()
    harness.broker.catchUps[0].succeed(Broker.caughtUp())
    _ = harness.driver.reload(harness.configuration)
    try harness.run(until: "the file read again") { harness.driver.tokens.refreshing == nil }
    #expect(harness.machine.state == .live && harness.broker.streamOpens.count == 1)
    try Self.write("beta\n", to: file)
    _ = harness.driver.reload(harness.configuration)
    try harness.run(until: "the reconnect") { harness.broker.streamOpens.count == 2 }
    #expect(harness.broker.tokens.last == "beta")
    try harness.shutdown()
  }

  @Test(arguments: [
    (4401, "token expired", true, true), (1008, "token revoked", true, true),
    (1008, "not authorized", true, true),
    (1008, "access changed; subscribe again", true, false), (1001, "broker shutting down", true, false),
    (1006, "", true, false), (4401, "token expired", false, false),
  ])
  func whichClosesMeanTheTokenWasRefused(code: Int, reason: String, byBroker: Bool, refused: Bool) {
    let close = BrokerStreamClose(code: UInt16(code), reason: reason, byBroker: byBroker)
    #expect(SyncDriver.refusesToken(close) == refused, "\(close)")
  }
}
