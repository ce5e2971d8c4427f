import ByteBuffers
import DaemonCore
import DaemonStore
import EventLoop
import EventLoopTestKit
import Logging
import SyncProtocol
import Testing
import Web

@testable import Daemon

#if canImport(Glibc)
  import Glibc
#endif

/// Why a harness run failed.
struct HarnessTimedOut: Error, CustomStringConvertible {
  var what: String
  var description: String { "the loop ran out of time waiting for \(what)" }
}

/// A daemon wired to a scripted broker, in-process: a real `Loop`, a real `LocalStore` in a temporary directory,
/// the real `SyncDriver` and, if asked, the real `LocalAPI` on a Unix socket there. Everything runs on the test's
/// thread: a scripted answer is delivered when the test calls it, and the loop runs only in `run(until:)` (for
/// the local API's sockets and timers) and at `shutdown()`. Loop thread only.
final class DaemonHarness {
  let loop: Loop
  let directory: String
  let broker = ScriptedBroker()
  let log = LogRecorder()
  let configuration: DaemonConfiguration
  let driver: SyncDriver
  private(set) var api: LocalAPI?

  var store: LocalStore { driver.store }
  var machine: SyncStateMachine<SystemRandomNumberGenerator> { driver.machine }

  /// `prepare` writes the store before the daemon opens it (pages stored and offline, an epoch, …);
  /// `configure` changes the configuration (socket and store paths are the harness's). `api`: serve the local
  /// API (`syncTimeout` ms for `POST /v1/sync`). `loop` and `realLink`: the daemon runs on a loop the test made
  /// (where a real broker listens) and talks to `configuration.brokerURL` over HTTP and WebSocket, not to the
  /// scripted broker.
  init(
    prepare: (LocalStore) throws -> Void = { _ in },
    configure: (inout DaemonConfiguration) -> Void = { _ in },
    api: Bool = false, syncTimeout: UInt64 = LocalAPI.defaultSyncTimeout, loop: Loop? = nil,
    realLink: Bool = false, brokers: Int = 1
  ) throws {
    var template = Array("/tmp/pagesync-daemon-XXXXXX".utf8CString)
    guard let made = mkdtemp(&template) else { throw HarnessTimedOut(what: "a temporary directory") }
    directory = String(cString: made)
    var configuration = DaemonConfiguration()
    configuration.storePath = directory + "/pagesyncd.sqlite"
    configuration.socketPath = directory + "/api.sock"
    // A lost connection is tried again within a millisecond: tests wait for the attempt, not a backoff.
    configuration.backoffBase = 1
    configuration.backoffCap = 1
    configure(&configuration)
    self.configuration = configuration
    let prepared = try LocalStore(path: configuration.storePath)
    defer { prepared.close() }
    try prepare(prepared)
    self.loop = try loop ?? Loop()
    let recorder = log
    let logger = Logger(label: "test.daemon") { _ in LogRecorder.Handler(recorder: recorder) }
    broker.brokerCount = brokers
    driver = try SyncDriver(
      loop: self.loop, configuration: configuration, logger: logger, link: realLink ? nil : broker)
    if api {
      let localAPI = LocalAPI(driver: driver, syncTimeout: syncTimeout)
      try localAPI.listen()
      self.api = localAPI
    }
  }

  /// Runs the loop until `condition` holds. The watchdog only bounds a broken test: a passing one returns as soon
  /// as the condition holds.
  func run(until what: String, timeout: UInt64 = 10_000, _ condition: () -> Bool) throws {
    guard !condition() else { return }
    let watchdog = LoopTimer(loop: loop)
    var expired = false
    watchdog.start(after: timeout) { expired = true }
    defer { watchdog.close() }
    while !condition() {
      if expired { throw HarnessTimedOut(what: what) }
      // What is due now first: a turn that waits would, after running a due timer, still wait in poll for the
      // next event (the watchdog, when nothing else comes).
      loop.runNoWait()
      if condition() { break }
      loop.runOnce()
    }
  }

  // MARK: Scripts

  /// Starts the daemon and accepts its stream: it subscribes its whole offline set and waits for `subscribed`.
  @discardableResult
  func startAndConnect() -> ScriptedStream {
    driver.start()
    return broker.acceptStream()
  }

  /// Starts, connects, answers `subscribed` and the catch-up with `answer`: live if nothing changed.
  @discardableResult
  func goLive(caughtUp answer: BrokerProtocol.CatchUpResponse = Broker.caughtUp()) -> ScriptedStream {
    let stream = startAndConnect()
    stream.answerSubscribe()
    broker.catchUps.last?.succeed(answer)
    return stream
  }

  // MARK: The local API

  /// Sends one request to the local API on its socket; the answer is in the box once the loop delivered it.
  func request(_ method: HTTPMethod, _ target: String, body: String? = nil) -> AnswerBox {
    let box = AnswerBox()
    var headers = HTTPHeaders()
    if body != nil { headers.add(name: "Content-Type", value: "application/json") }
    let request = HTTPRequest(
      head: HTTPRequestHead(method: method, target: target, headers: headers),
      body: ByteBuffer(bytes: Array((body ?? "").utf8)))
    HTTPClient.send(loop: loop, to: .unix(path: configuration.socketPath), request) { box.result = $0 }
    return box
  }

  /// The answer to `box`'s request, running the loop until it came.
  func answer(_ box: AnswerBox, _ what: String) throws -> HTTPResponse {
    try run(until: what) { box.result != nil }
    return try box.result!.get()
  }

  /// One request's answer, once it comes.
  final class AnswerBox {
    var result: Result<HTTPResponse, HTTPClientError>?
  }

  // MARK: Shutdown

  /// Stops the daemon as `pagesyncd` does (the API first, then the driver, which closes the store), runs the loop
  /// until every handle is closed, closes the loop and removes the directory. Fails if anything is left open.
  func shutdown() throws {
    api?.close()
    var stopped = false
    driver.stop(drainMillis: 0) { stopped = true }
    try loop.runUntilDone(timeout: 10_000)
    #expect(stopped, "the store closed")
    try loop.close()
    for name in ["pagesyncd.sqlite", "pagesyncd.sqlite-wal", "pagesyncd.sqlite-shm", "api.sock"] {
      unlink(directory + "/" + name)
    }
    rmdir(directory)
  }
}
