import ByteBuffers
import EventLoop
import EventLoopTestKit
import FoundationEssentials
import Logging
import SyncModel
import Testing
import Web

@testable import Broker

#if canImport(Glibc)
  import Glibc
#endif

/// A `BrokerServer` driven in-process, as swift-nio's `EmbeddedChannel` drives a pipeline and Hummingbird's
/// `app.test(.router)` an application: requests go through the broker's own router to its handlers with a
/// detached responder (`HTTPResponder(request:onResponse:)`) that hands the answer back; device streams are
/// `EmbeddedStreamSocket`s, let in by the stream route's own check and opened by `BrokerServer.openStream`, which
/// is all the route's `onOpen` does with a real WebSocket. Nothing listens and no socket is made.
///
/// The store is real: a SQLite file in /tmp on the broker's own `SQLiteWriter` thread, so an answer that waits
/// for a commit arrives on a later loop turn. `run(until:)` turns the loop until it did. Writer completions do
/// not keep a loop running (by design, `SQLiteWriter`), so `Loop.runUntilDone` alone would return before them:
/// `run(until:)` holds the loop with `keepsRunningWhenIdle` and has a watchdog of its own (an event ends the
/// wait, never the passing of time). `shutDown()` stops the broker, then `runUntilDone` finishes the closes and
/// `Loop.close` proves no handle was left.
///
/// Threading: the test's thread runs the loop.
final class BrokerHarness {
  static let alice = "alice-token-0123456789abcdef"
  static let bob = "bob-token-0123456789abcdef"
  static let dana = "dana-token-0123456789abcdef"
  /// Alice may see w1, Bob w2, Dana both.
  static let tokens = [
    TokenGrant(token: alice, user: id("alice"), workspaces: [id("w1")]),
    TokenGrant(token: bob, user: id("bob"), workspaces: [id("w2")]),
    TokenGrant(token: dana, user: id("dana"), workspaces: [id("w1"), id("w2")]),
  ]

  let loop: Loop
  let broker: BrokerServer
  let storePath: String
  /// What the broker logged at `.warning` and above (also written to standard error).
  let log = LogRecorder()
  private var nextMutation: [String: Int] = [:]

  init(configure: (inout BrokerConfiguration) -> Void = { _ in }) throws {
    loop = try Loop()
    storePath = "/tmp/pagesync-broker-harness-\(getpid())-\(UInt32.random(in: 0...UInt32.max)).sqlite"
    var configuration = BrokerConfiguration()
    configuration.storePath = storePath
    configuration.synchronous = "normal"
    configuration.tokens = Self.tokens
    configure(&configuration)
    let recorder = log
    var logger = Logger(label: "broker-harness") { label in
      MultiplexLogHandler([
        StreamLogHandler.standardError(label: label), LogRecorder.Handler(recorder: recorder),
      ])
    }
    logger.logLevel = .warning
    broker = try BrokerServer(loop: loop, configuration: configuration, logger: logger)
    broker.startServices()
    // Start-up gives its memory back through the store's threads (BrokerServer+Memory.swift): let that finish, so
    // that a test starts with no job of the broker's own in the writer's queue.
    try run(until: { !broker.returningMemory })
  }

  /// Stops the broker (as SIGTERM does), lets every handle close, and removes the store.
  func shutDown() throws {
    var stopped = false
    broker.shutdown { stopped = true }
    try run(until: { stopped })
    try loop.runUntilDone(timeout: 10_000)
    try loop.close()
    for suffix in ["", "-wal", "-shm"] { unlink(storePath + suffix) }
  }

  // MARK: Running

  struct TimedOut: Error, CustomStringConvertible {
    var milliseconds: UInt64
    var description: String { "what the test waited for did not happen within \(milliseconds) ms" }
  }

  /// Turns the loop until `done()` holds (checked after every turn); throws if it does not within `timeout` ms.
  func run(until done: () -> Bool, timeout: UInt64 = 20_000) throws {
    guard !done() else { return }
    loop.keepsRunningWhenIdle = true
    defer { loop.keepsRunningWhenIdle = false }
    let watchdog = LoopTimer(loop: loop)
    watchdog.keepsLoopAlive = false
    var timedOut = false
    watchdog.start(after: timeout) { timedOut = true }
    defer { watchdog.close() }
    while !done() && !timedOut { loop.runOnce() }
    if !done() { throw TimedOut(milliseconds: timeout) }
  }

  // MARK: HTTP

  /// A request on its way: `response` once it has been answered.
  final class PendingAnswer {
    fileprivate(set) var response: HTTPResponse?
    /// Called when the answer arrives, before anything else runs (a test records what was true then).
    var onResponse: ((HTTPResponse) -> Void)?
  }

  /// Dispatches a request through the broker's router and returns at once; the answer comes as the loop runs.
  @discardableResult
  func send(_ method: HTTPMethod, _ target: String, token: String? = alice, body: String? = nil)
    -> PendingAnswer
  {
    var headers = HTTPHeaders()
    if let token { headers.add(name: "Authorization", value: "Bearer \(token)") }
    if body != nil { headers.add(name: "Content-Type", value: "application/json") }
    let request = HTTPRequest(
      head: HTTPRequestHead(method: method, target: target, headers: headers),
      body: ByteBuffer(string: body ?? ""))
    let pending = PendingAnswer()
    let responder = HTTPResponder(request: request.head) { response in
      pending.response = response
      pending.onResponse?(response)
    }
    switch broker.http.router.resolve(request) {
    case .success(let handler): handler(request, responder)
    case .failure(let error): responder.respond(error.response)
    }
    return pending
  }

  /// Sends a request and runs the loop until it is answered.
  func request(_ method: HTTPMethod, _ target: String, token: String? = alice, body: String? = nil) throws
    -> HTTPResponse
  {
    let pending = send(method, target, token: token, body: body)
    try run(until: { pending.response != nil })
    return pending.response!
  }

  /// Pushes a batch for `client` (its mutation ids continue from its last batch here).
  @discardableResult
  func pushBatch(client: String, workspace: String = "w1", token: String = alice, _ edits: [Edit])
    -> PendingAnswer
  {
    var mutations: [String] = []
    for edit in edits {
      let next = nextMutation[client, default: 1]
      nextMutation[client] = next + 1
      mutations.append(edit.json(id: next, time: "\(1_700_000_000_000 + next):0"))
    }
    let body =
      #"{"client":"\#(client)","workspace":"\#(workspace)","mutations":[\#(mutations.joined(separator: ","))]}"#
    return send(.POST, "/v1/batch", token: token, body: body)
  }

  /// A mutation of `pushBatch`.
  enum Edit {
    case create(String, title: String)
    case createUnder(String, parent: String, title: String)
    case setTitle(String, String)

    func json(id: Int, time: String) -> String {
      switch self {
      case .create(let page, let title):
        #"{"id":\#(id),"page":"\#(page)","time":"\#(time)","type":"create_page","parent":null,"title":"\#(title)"}"#
      case .createUnder(let page, let parent, let title):
        #"{"id":\#(id),"page":"\#(page)","time":"\#(time)","type":"create_page","parent":"\#(parent)","title":"\#(title)"}"#
      case .setTitle(let page, let title):
        #"{"id":\#(id),"page":"\#(page)","time":"\#(time)","type":"set_title","title":"\#(title)"}"#
      }
    }
  }

  /// Pushes a batch and runs the loop until it is answered 200; returns the batch's sequence.
  @discardableResult
  func commit(client: String, workspace: String = "w1", token: String = alice, _ edits: [Edit]) throws
    -> UInt64
  {
    let pending = pushBatch(client: client, workspace: workspace, token: token, edits)
    try run(until: { pending.response != nil })
    let response = pending.response!
    try #require(response.status == .ok, "\(response.body.readableString)")
    return try #require(try decode(BatchAnswer.self, response).sequence)
  }

  // MARK: Streams

  /// Opens a device stream as the stream route would: its upgrade check, then `openStream`. Throws the refusal.
  func openStream(token: String? = alice) throws -> EmbeddedStreamSocket {
    var headers: HTTPHeaders = ["Upgrade": "websocket", "Connection": "Upgrade"]
    if let token { headers.add(name: "Authorization", value: "Bearer \(token)") }
    let request = HTTPRequest(head: HTTPRequestHead(method: .GET, target: "/v1/stream", headers: headers))
    let route = try #require(broker.http.router.webSocketRoute(for: "/v1/stream"))
    switch route.shouldAccept(request) {
    case .reject(let response): throw Refused(response: response)
    case .accept:
      let socket = EmbeddedStreamSocket(loop: loop, request: request)
      broker.openStream(socket)
      return socket
    }
  }

  struct Refused: Error {
    var response: HTTPResponse
  }

  /// Sends `text` on `socket` and runs the loop until the broker sent `count` more frames; returns them.
  @discardableResult
  func exchange(_ socket: EmbeddedStreamSocket, _ text: String, answers count: Int = 1) throws -> [Frame] {
    let before = socket.frames.count
    socket.receive(text)
    try run(until: { socket.frames.count >= before + count })
    return try socket.frames[before...].map(Frame.init)
  }

  /// Runs the loop until `socket` has sent `count` frames in all.
  func waitForFrames(_ socket: EmbeddedStreamSocket, count: Int) throws {
    try run(until: { socket.frames.count >= count })
  }

  // MARK: JSON

  func decode<T: Decodable>(_ type: T.Type, _ response: HTTPResponse) throws -> T {
    try JSONDecoder().decode(type, from: Data(response.body.readableBytesArray))
  }
}

/// Any frame the broker sends on a stream, decoded loosely (each op uses some of the fields).
struct Frame: Decodable, Equatable, CustomStringConvertible {
  var op: String
  var pages: [String: UInt64]?
  var added: Int?
  var removed: Int?
  var total: Int?
  var denied: [String]?
  var revokedPages: [String]?
  var code: Int?
  var message: String?

  init(_ text: String) throws {
    self = try JSONDecoder().decode(Frame.self, from: Data(text.utf8))
  }

  var description: String {
    var parts = [op]
    if let pages { parts.append("pages \(pages.sorted { $0.key < $1.key })") }
    if let added { parts.append("added \(added)") }
    if let removed { parts.append("removed \(removed)") }
    if let total { parts.append("total \(total)") }
    if let denied { parts.append("denied \(denied)") }
    if let revokedPages { parts.append("revoked \(revokedPages)") }
    if let code { parts.append("code \(code)") }
    if let message { parts.append("\"\(message)\"") }
    return parts.joined(separator: " ")
  }
}

/// The parts of a batch's answer the tests read.
struct BatchAnswer: Decodable {
  var sequence: UInt64?
  var pages: [String: UInt64]
}

func id(_ text: String) -> EntityID { try! EntityID(validating: text) }

extension EmbeddedStreamSocket {
  /// The frames sent so far, decoded.
  func decodedFrames() throws -> [Frame] { try frames.map(Frame.init) }

  /// The pages of every `changed` frame sent so far, with the newest time of each.
  func changedPages() throws -> [String: UInt64] {
    var pages: [String: UInt64] = [:]
    for frame in try decodedFrames() where frame.op == "changed" {
      for (page, time) in frame.pages ?? [:] { pages[page] = max(pages[page] ?? 0, time) }
    }
    return pages
  }
}
