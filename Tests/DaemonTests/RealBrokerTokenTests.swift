import Broker
import DaemonCore
import DaemonStore
import EventLoop
import FoundationEssentials
import Logging
import SyncModel
import Testing
import Web

@testable import Daemon

#if canImport(Glibc)
  import Glibc
#endif

/// The daemon's token against the real broker, both in-process on one loop and talking over loopback (HTTP and a
/// WebSocket, port 0): the broker's own 401s and its `1008 token revoked` close, not scripted ones.
@Suite(.serialized) struct RealBrokerTokenTests {
  /// A broker on `loop` at 127.0.0.1:0 accepting `tokens` (each for user `u`, workspace `default`).
  static func broker(loop: Loop, tokens: [String], storePath: String) throws -> BrokerServer {
    var configuration = BrokerConfiguration()
    configuration.storePath = storePath
    configuration.synchronous = "normal"
    configuration.readers = 0
    configuration.listen = .inet(host: "127.0.0.1", port: 0)
    configuration.tokens = tokens.map(Self.grant)
    var logger = Logger(label: "test.broker")
    logger.logLevel = .critical
    let server = try BrokerServer(loop: loop, configuration: configuration, logger: logger)
    try server.start()
    return server
  }

  static func grant(_ token: String) -> TokenGrant {
    TokenGrant(
      token: token, user: try! EntityID(validating: "u"), workspaces: [try! EntityID(validating: "default")])
  }

  static func url(_ broker: BrokerServer) throws -> HTTPURL {
    guard case .inet(_, let port)? = broker.boundAddress else { throw HarnessTimedOut(what: "a bound port") }
    return try HTTPURL(parsing: "http://127.0.0.1:\(port)")
  }

  /// Stops the broker, then the daemon (whose reconnects would otherwise keep the loop turning).
  static func shutdown(_ harness: DaemonHarness, _ broker: BrokerServer, storePath: String) throws {
    var stopped = false
    broker.shutdown { stopped = true }
    try harness.run(until: "the broker stopped") { stopped }
    try harness.shutdown()
    for suffix in ["", "-wal", "-shm"] { unlink(storePath + suffix) }
  }

  static func storePath() -> String {
    "/tmp/pagesync-token-broker-\(getpid())-\(UInt32.random(in: 0...UInt32.max)).sqlite"
  }

  static func request(_ harness: DaemonHarness, _ method: HTTPMethod, _ target: String, _ body: String? = nil)
    throws -> Int
  {
    try harness.answer(harness.request(method, target, body: body), "\(method) \(target)").head.status.code
  }

  @Test func aWrongTokenFileIsRefused401AndOnceRightTheEditQueuedMeanwhileIsPushed() throws {
    let loop = try Loop()
    let storePath = Self.storePath()
    let broker = try Self.broker(loop: loop, tokens: ["right-token"], storePath: storePath)
    let url = try Self.url(broker)
    let harness = try DaemonHarness(
      configure: {
        $0.brokerURL = url
        $0.tokenFile = TokenTests.directory($0) + "token"
        $0.backoffCap = 20
      }, api: true, loop: loop, realLink: true)
    let file = TokenTests.directory(harness.configuration) + "token"
    try TokenTests.write("wrong-token\n", to: file)
    harness.driver.start()
    try harness.run(until: "the broker refused the token") { harness.driver.counters.tokenRefusals >= 1 }
    #expect(harness.driver.tokens.problem?.contains("the token is not valid") == true)
    #expect(harness.driver.lastError?.contains("token_file") == true)
    // Made while there is no usable token: queued, not lost.
    #expect(
      try Self.request(harness, .POST, "/v1/pages", #"{"kind":"page","id":"a","title":"made offline"}"#)
        == 201)
    #expect(try harness.store.status().pendingMutations == 1)
    #expect(!harness.driver.isConnected)

    try TokenTests.write("right-token\n", to: file)
    try harness.run(until: "the edit pushed") {
      harness.driver.isConnected && (try? harness.store.status().pendingMutations) == 0
    }
    #expect(harness.driver.counters.mutationsPushed == 1 && harness.driver.counters.mutationsRejected == 0)
    #expect(harness.driver.tokens.problem == nil)
    // One catch-up, on the connection that got in: nothing was downloaded but what changed.
    #expect(harness.driver.counters.catchUpRequests == 1)
    #expect(harness.driver.fetchedPages <= 1)
    try Self.shutdown(harness, broker, storePath: storePath)
  }

  @Test func aTokenRevokedByABrokerReloadIsReplacedByTheCommandsNewOneWithACatchUpNotAResync() throws {
    let loop = try Loop()
    let storePath = Self.storePath()
    let broker = try Self.broker(loop: loop, tokens: ["old-token"], storePath: storePath)
    let url = try Self.url(broker)
    let harness = try DaemonHarness(
      configure: {
        $0.brokerURL = url
        $0.tokenCommand = ["/bin/cat", TokenTests.directory($0) + "token"]
        $0.backoffCap = 20
      }, api: true, loop: loop, realLink: true)
    let file = TokenTests.directory(harness.configuration) + "token"
    try TokenTests.write("old-token\n", to: file)
    harness.driver.start()
    try harness.run(until: "connected") { harness.driver.isConnected }
    for page in ["a", "b", "c"] {
      #expect(try Self.request(harness, .POST, "/v1/pages", #"{"kind":"page","id":"\#(page)"}"#) == 201)
    }
    try harness.run(until: "pushed") { (try? harness.store.status().pendingMutations) == 0 }
    for page in ["a", "b", "c"] { #expect(try Self.request(harness, .PUT, "/v1/offline/\(page)") == 200) }
    try harness.run(until: "settled") { harness.machine.isSettled }
    let fetchedBefore = harness.driver.fetchedPages
    let catchUpsBefore = harness.driver.counters.catchUpRequests

    // The operator replaces the token on the broker; the app's command prints the new one from now on.
    try TokenTests.write("new-token\n", to: file)
    var next = broker.configuration
    next.tokens = [Self.grant("new-token")]
    _ = broker.reload(next)
    try harness.run(until: "the stream closed for the token") { harness.driver.counters.tokenRefusals >= 1 }
    #expect(harness.driver.tokens.problem?.contains("token revoked") == true)
    #expect(try Self.request(harness, .PATCH, "/v1/pages/b", #"{"title":"after the revocation"}"#) == 200)
    try harness.run(until: "back, the edit pushed") {
      harness.machine.isSettled && (try? harness.store.status().pendingMutations) == 0
    }
    #expect(harness.driver.tokens.inUse == "new-token")
    #expect(harness.driver.counters.catchUpRequests > catchUpsBefore)
    // Only the edited page was downloaded again (after its push), not the offline set: once, or twice when its
    // notification's fetch was out as the push's answer settled it (then it comes whole after that one).
    #expect(harness.driver.fetchedPages - fetchedBefore <= 2)
    try Self.shutdown(harness, broker, storePath: storePath)
  }

  /// The real link's reading of a close frame: a peer that closes the stream 4401 `token expired` (what the broker
  /// does when a JSON Web Token's `exp` passes) is a refused token, and the next attempt reads the file again.
  @Test func aStreamClosed4401ByThePeerIsAnExpiredTokenAndTheFileIsReadAgain() throws {
    let loop = try Loop()
    let router = HTTPRouter()
    let server = HTTPServer(loop: loop, router: router)
    let address = try server.listen(on: .inet(host: "127.0.0.1", port: 0))
    guard case .inet(_, let port) = address else { throw HarnessTimedOut(what: "a bound port") }
    var presented: [String] = []
    var sockets: [WebSocket] = []
    router.webSocket(
      "/v1/stream",
      WebSocketRoute(
        shouldAccept: { request in
          presented.append(request.head.headers["Authorization"] ?? "")
          return .accept()
        },
        onOpen: { socket in
          sockets.append(socket)
          if presented.last == "Bearer old" {
            socket.close(code: WebSocketCloseCode(4401), reason: "token expired")
          }
        }))
    let url = try HTTPURL(parsing: "http://127.0.0.1:\(port)")
    let harness = try DaemonHarness(
      configure: {
        $0.brokerURL = url
        $0.tokenFile = TokenTests.directory($0) + "token"
        $0.backoffCap = 20
      }, loop: loop, realLink: true)
    let file = TokenTests.directory(harness.configuration) + "token"
    try TokenTests.write("old\n", to: file)
    harness.driver.start()
    try harness.run(until: "the stream closed for its token") { harness.driver.counters.tokenRefusals >= 1 }
    #expect(harness.driver.counters.streamsOpened == 1)
    #expect(harness.driver.tokens.problem?.contains("4401 token expired") == true)
    try TokenTests.write("new\n", to: file)
    try harness.run(until: "reconnected with the new token") {
      presented.last == "Bearer new" && harness.driver.isConnected
    }
    #expect(presented.first == "Bearer old")
    server.close()
    for socket in sockets { socket.close(code: .goingAway, reason: "") }
    try harness.shutdown()
  }
}
