import ByteBuffers
import EventLoop
import EventLoopTestKit
import Testing
import Web

#if canImport(Glibc)
  import Glibc
#endif

/// A request the scripted daemon received.
struct ReceivedRequest: Sendable {
  var method: String
  var target: String
  var headers: HTTPHeaders
  var body: String
}

/// A `GET /v1/events` the scripted daemon received: the request, its responder (the daemon keeps it), the
/// stream's index (0 for the first) and the daemon's loop.
struct EventsCall {
  var request: ReceivedRequest
  var responder: HTTPResponder
  var index: Int
  var loop: Loop
}

/// A stand-in for pagesyncd's local API: our `HTTPServer` on a temporary Unix socket, on a `LoopThread`. It
/// answers what the test scripted (`answer`), holds every other request unanswered, and streams `/v1/events`
/// as the test's `events` handler says (on the loop thread, with the responder). It records every request and
/// counts open connections, and a test can wait for either to reach a figure.
///
/// Threading: `answer`, `onEvents`, `onLoop` and the waits from the test; handlers run on the loop thread.
final class ScriptedDaemon: @unchecked Sendable {
  // @unchecked: `canned`, `eventsHandler` and the observed state are guarded by `lock`; `server`, `held` and
  // `streams` belong to the loop thread.
  let path: String
  private let thread: LoopThread
  private let server: HTTPServer
  private let lock = Lock()
  private var canned: [String: (status: Int, body: String)] = [:]
  private var eventsHandler: (@Sendable (EventsCall) -> Void)?
  private var heldHandler: (@Sendable () -> Void)?
  private var state = Observed()
  private var held: [HTTPResponder] = []
  /// The streams of `/v1/events` in the order they were opened (loop thread).
  private(set) var streams: [HTTPResponder] = []
  private var sampler: LoopTimer?
  /// Whether the sampler also writes a keep-alive comment to every stream (loop thread).
  private var keepingAlive = false

  struct Observed {
    var requests: [ReceivedRequest] = []
    var connections = 0
    var waiters: [(condition: @Sendable (Observed) -> Bool, continuation: CheckedContinuation<Void, Never>)] =
      []
  }

  init(path: String = temporarySocketPath("client")) throws {
    // As pagesyncd does: a client that went away must fail the daemon's write, not kill the test process.
    ignoreBrokenPipes()
    self.path = path
    thread = try LoopThread()
    let router = HTTPRouter()
    // A test may hold a stream unread for long (a slow app; a starved task when the whole suite runs): the
    // server must not drop it for that.
    var configuration = HTTPServerConfiguration()
    configuration.writeStallTimeout = 0
    server = HTTPServer(loop: thread.loop, configuration: configuration, router: router)
    let handler: HTTPHandler = { [unowned self] request, responder in self.handle(request, responder) }
    for method in [HTTPMethod.GET, .POST, .PUT, .PATCH, .DELETE] { router.add(method, "/*", handler) }
    try server.listen(on: .unix(path: path))
    thread.start { [unowned self] loop in
      // Samples the open connections (the server reports no close): a watcher, not a wait.
      let timer = LoopTimer(loop: loop)
      timer.start(after: 2, repeatEvery: 2) { [unowned self] in
        if self.keepingAlive {
          for responder in self.streams { responder.writeChunk(ByteBuffer(string: ": keep-alive\n\n")) }
        }
        self.update { $0.connections = self.server.openConnectionCount }
      }
      self.sampler = timer
    }
  }

  /// Answers `method path` with `body` (JSON) and `status`.
  func answer(_ method: HTTPMethod, _ path: String, _ body: String, status: Int = 200) {
    lock.withLock { canned["\(method) \(path)"] = (status, body) }
  }

  /// What `GET /v1/events` does, on the loop thread.
  func onEvents(_ handler: @escaping @Sendable (EventsCall) -> Void) {
    lock.withLock { eventsHandler = handler }
  }

  /// What the loop thread does once it holds a request unanswered (after recording it): for what a test must
  /// do the moment the request is in, without waiting for a task of its own to be scheduled.
  func onHeld(_ handler: @escaping @Sendable () -> Void) {
    lock.withLock { heldHandler = handler }
  }

  /// Runs `body` on the loop thread with the streams opened so far.
  func onLoop(_ body: @escaping @Sendable ([HTTPResponder]) -> Void) {
    thread.execute { [unowned self] in body(self.streams) }
  }

  var requests: [ReceivedRequest] { lock.withLock { state.requests } }

  /// From now on, writes a comment to every stream every 2 ms, as pagesyncd does every 15 s. Our server learns
  /// that a client closed a stream only when a write fails (it keeps a connection whose peer ended while an
  /// answer is due, for clients that half-close), so this is how a test sees a stream's connection go. Call it
  /// once the test's own writes are done: a comment in the middle of a line would break the stream.
  func sendKeepAlives() {
    thread.execute { [unowned self] in self.keepingAlive = true }
  }

  /// Answers every request held so far with `{}`: on a connection the client closed the write fails and the
  /// server closes it; on one it kept, the connection stays open.
  func answerHeld() {
    thread.execute { [unowned self] in
      for responder in held {
        responder.respond(
          HTTPResponse(
            status: .ok, headers: ["Content-Type": "application/json"], body: ByteBuffer(string: "{}")))
      }
      held = []
    }
  }

  /// Waits until `count` requests came in (at most 60 s).
  func waitForRequests(_ count: Int) async throws {
    try await wait("\(count) requests") { $0.requests.count >= count }
  }

  /// Waits until exactly `count` connections are open (at most 60 s).
  func waitForConnections(_ count: Int) async throws {
    try await wait("\(count) open connections") { $0.connections == count }
  }

  /// Closes everything and joins the thread.
  func shutdown() {
    thread.execute { [self] in
      for responder in streams { responder.finish() }
      streams = []
      held = []
      sampler?.close()
      server.close()
    }
    try? thread.shutdown()
    // Release anyone still waiting.
    let waiters = lock.withLock { () -> [CheckedContinuation<Void, Never>] in
      defer { state.waiters = [] }
      return state.waiters.map(\.continuation)
    }
    for continuation in waiters { continuation.resume() }
  }

  // MARK: Loop thread

  private func handle(_ request: HTTPRequest, _ responder: HTTPResponder) {
    let received = ReceivedRequest(
      method: request.method.rawValue, target: request.head.target, headers: request.headers,
      body: request.body.readableString)
    update { $0.requests.append(received) }
    if request.method == .GET && request.head.target == "/v1/events",
      let events = lock.withLock({ eventsHandler })
    {
      streams.append(responder)
      events(EventsCall(request: received, responder: responder, index: streams.count - 1, loop: thread.loop))
      return
    }
    guard let answer = lock.withLock({ canned["\(request.method) \(request.head.target)"] }) else {
      held.append(responder)
      lock.withLock { heldHandler }?()
      return
    }
    responder.respond(
      HTTPResponse(
        status: HTTPStatus(code: answer.status), headers: ["Content-Type": "application/json"],
        body: ByteBuffer(string: answer.body)))
  }

  private func update(_ change: (inout Observed) -> Void) {
    let ready = lock.withLock { () -> [CheckedContinuation<Void, Never>] in
      change(&state)
      let now = state
      var ready: [CheckedContinuation<Void, Never>] = []
      state.waiters.removeAll { waiter in
        guard waiter.condition(now) else { return false }
        ready.append(waiter.continuation)
        return true
      }
      return ready
    }
    for continuation in ready { continuation.resume() }
  }

  private func wait(_ what: String, _ condition: @escaping @Sendable (Observed) -> Bool) async throws {
    let reached = await withTaskGroup(of: Bool.self) { group in
      group.addTask {
        await withCheckedContinuation { continuation in
          let now = self.lock.withLock { () -> Bool in
            if condition(self.state) { return true }
            self.state.waiters.append((condition, continuation))
            return false
          }
          if now { continuation.resume() }
        }
        return true
      }
      group.addTask {
        // A watchdog: a passing test never waits for it.
        try? await Task.sleep(for: .seconds(60))
        return false
      }
      let first = await group.next()!
      group.cancelAll()
      if !first {
        // Release the waiter the watchdog beat.
        let waiters = lock.withLock { () -> [CheckedContinuation<Void, Never>] in
          defer { state.waiters = [] }
          return state.waiters.map(\.continuation)
        }
        for continuation in waiters { continuation.resume() }
      }
      return first
    }
    if !reached { throw WaitTimedOut(what: what) }
  }
}

struct WaitTimedOut: Error, CustomStringConvertible {
  var what: String
  var description: String { "timed out waiting for \(what)" }
}

/// An SSE body piece.
func chunk(_ text: String) -> ByteBuffer { ByteBuffer(string: text) }

/// The head of a `GET /v1/events` answer, as the contract gives it.
let eventStreamHead = HTTPResponseHead(
  status: .ok, headers: ["Content-Type": "text/event-stream", "Cache-Control": "no-store"])
