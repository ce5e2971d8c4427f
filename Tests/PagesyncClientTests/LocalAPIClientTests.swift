import ByteBuffers
import EventLoop
import EventLoopTestKit
import Testing
import Web

@testable import PagesyncClient

#if canImport(Glibc)
  import Glibc
#endif

/// The request-answer client against our `HTTPServer` on a `LoopThread`: the synchronous calls (a loop on the
/// test's thread, as `pagesync` runs them) and the `async` ones (a thread of their own); typed answers; the
/// failures a canned answer cannot produce.
@Suite struct LocalAPIClientTests {
  @Test func aDaemonThatNeverAnswersTimesOut() throws {
    let daemon = try ScriptedDaemon()
    defer { daemon.shutdown() }
    let started = monotonicMilliseconds()
    let request = LocalAPIRequest(.POST, "/v1/sync", timeoutSeconds: 1)
    #expect(throws: PagesyncClientError.timedOut(socket: daemon.path, seconds: 1)) {
      try LocalAPIClient(socketPath: daemon.path).send(request)
    }
    let elapsed = monotonicMilliseconds() - started
    #expect(elapsed >= 900 && elapsed < 10_000, "\(elapsed) ms")
  }

  @Test func aDaemonThatHangsUpIsAConnectionLost() throws {
    let path = temporarySocketPath()
    let thread = try LoopThread()
    let listener = try Listener(loop: thread.loop, address: .unix(path: path))
    listener.onConnection = { stream in stream.close() }
    thread.start()
    defer { try? thread.shutdown() }

    do {
      _ = try LocalAPIClient(socketPath: path).send(LocalAPIRequest(.GET, "/v1/status"))
      Issue.record("a hang-up gave an answer")
    } catch {
      guard case .connectionLost(let socket, _) = error else {
        Issue.record("expected connectionLost, got \(error)")
        return
      }
      #expect(socket == path)
      #expect(error.description.contains("may or may not have taken effect"))
    }
  }

  @Test func nobodyListeningIsUnreachableForBothKindsOfCall() async throws {
    let path = temporarySocketPath()
    let client = LocalAPIClient(socketPath: path)
    #expect(throws: PagesyncClientError.unreachable(socket: path, reason: "no such file or directory")) {
      try client.send(.status)
    }
    await #expect(throws: PagesyncClientError.unreachable(socket: path, reason: "no such file or directory"))
    {
      try await client.send(.status)
    }
  }

  @Test func typedAnswersDecodeWhatTheDaemonSends() async throws {
    let daemon = try ScriptedDaemon()
    defer { daemon.shutdown() }
    daemon.answer(
      .GET, "/v1/status",
      #"""
      {"connected": true, "state": "live", "pendingMutations": 2, "failedMutations": 0, "offlinePages": 12,
       "lastSuccessfulSync": 1764072000123, "lastSyncAttempt": null, "fetchedPages": 40, "clientId": "laptop",
       "workspace": "team", "broker": "http://127.0.0.1:7700", "lastError": null, "reconnects": 2,
       "someFieldFromLater": {"x": 1}}
      """#)
    daemon.answer(
      .PATCH, "/v1/pages/home", #"{"id": "home", "mutationIds": [7, 8]}"#)
    daemon.answer(
      .GET, "/v1/offline",
      #"""
      [{"id": "home", "reasons": [{"origin": "home", "from": null, "type": "toggled"}],
        "lastDownloadedTimestamp": 17, "complete": true}]
      """#)
    daemon.answer(
      .GET, "/v1/pages/home",
      #"""
      {"id": "home", "kind": "page", "title": "Home", "parent": null, "deleted": false,
       "properties": {"Points": 3, "Tags": ["a"]},
       "blocks": [{"id": "b1", "type": "text", "text": "Hi", "marks": [{"type": "bold", "start": 0, "end": 2}],
                   "attributes": {}}],
       "databases": [], "view": null, "lastUpdatedTime": 5, "source": "local", "syncStatus": "synced"}
      """#)
    let client = LocalAPIClient(socketPath: daemon.path)

    let status = try await client.send(.status)
    #expect(status.connected && status.state == "live" && status.pendingMutations == 2)
    #expect(status.lastSuccessfulSync == 1_764_072_000_123 && status.lastSyncAttempt == nil)
    #expect(status.reconnects == 2 && status.bytesSent == nil)
    let edit = try blocking(client, .editPage("home", title: "Home"))
    #expect(edit == EditResult(id: "home", page: nil, mutationIds: [7, 8]))
    let offline = try await client.send(.offlinePages)
    #expect(offline.map(\.id) == ["home"])
    #expect(offline.first?.reasons == [OfflineReason(origin: "home", from: nil, type: "toggled")])
    let page = try await client.send(.page("home"))
    #expect(page.blocks.first?.marks == [Page.Mark(type: "bold", start: 0, end: 2, value: nil)])
    #expect(page.properties["Points"] == .integer(3))
    #expect(
      daemon.requests.map(\.target) == ["/v1/status", "/v1/pages/home", "/v1/offline", "/v1/pages/home"])
    #expect(daemon.requests[1].body == #"{"title":"Home"}"#)
  }

  @Test func setTokenSendsTheTokenAsJSONAndAReasonedRefusalIsADaemonError() throws {
    let daemon = try ScriptedDaemon()
    defer { daemon.shutdown() }
    let client = LocalAPIClient(socketPath: daemon.path)
    daemon.answer(.PUT, "/v1/token", #"{"tokenSource": "api"}"#)
    #expect(try client.send(.setToken("eyJhbGciOiJFUzI1NiJ9.e30.sig")) == TokenHanded(tokenSource: "api"))
    let request = try #require(daemon.requests.last)
    #expect(request.method == "PUT" && request.target == "/v1/token")
    #expect(request.body == #"{"token":"eyJhbGciOiJFUzI1NiJ9.e30.sig"}"#)
    daemon.answer(.DELETE, "/v1/token", #"{"tokenSource": "token_file"}"#)
    #expect(try client.send(.clearToken) == TokenHanded(tokenSource: "token_file"))
    #expect(daemon.requests.last?.method == "DELETE" && daemon.requests.last?.target == "/v1/token")
    daemon.answer(
      .PUT, "/v1/token", #"{"error": 400, "message": "invalid token: the token is empty"}"#, status: 400)
    do {
      _ = try client.send(.setToken(""))
      Issue.record("a 400 gave an answer")
    } catch {
      #expect("\(error)".contains("invalid token: the token is empty"))
    }
  }

  @Test func anAnswerMissingAPromisedFieldIsInvalidAndSaysWhich() async throws {
    let daemon = try ScriptedDaemon()
    defer { daemon.shutdown() }
    daemon.answer(.GET, "/v1/status", #"{"connected": true, "state": "live"}"#)
    daemon.answer(.GET, "/v1/offline", #"[{"id": "home", "reasons": "toggled", "complete": true}]"#)
    let client = LocalAPIClient(socketPath: daemon.path)
    await #expect(
      throws: PagesyncClientError.invalidAnswer("GET /v1/status: \"pendingMutations\" is missing")
    ) {
      try await client.send(.status)
    }
    do {
      _ = try blocking(client, .offlinePages)
      Issue.record("a list where an object is due was accepted")
    } catch {
      guard case .invalidAnswer(let what) = error else { throw error }
      #expect(what.hasPrefix("GET /v1/offline: [0].reasons is not a"), "\(what)")
    }
  }

  @Test func aRefusalCarriesTheDaemonsStatusAndMessage() async throws {
    let daemon = try ScriptedDaemon()
    defer { daemon.shutdown() }
    daemon.answer(
      .GET, "/v1/pages/gone", #"{"error": 503, "message": "page gone is not available offline"}"#, status: 503
    )
    await #expect(
      throws: PagesyncClientError.daemonError(status: 503, message: "page gone is not available offline")
    ) {
      try await LocalAPIClient(socketPath: daemon.path).send(.page("gone"))
    }
  }

  @Test func anIdThatCannotBeAPathSegmentIsEscaped() throws {
    #expect(LocalAPICall.page("a/b c").request.path == "/v1/pages/a%2Fb%20c")
    #expect(LocalAPICall.deleteBlock("é").request.path == "/v1/blocks/%C3%A9")
    #expect(LocalAPICall.why("Ok_-9").request.path == "/v1/why/Ok_-9")
  }

  @Test func cancellingAnAsyncCallClosesItsConnectionAtOnce() async throws {
    let daemon = try ScriptedDaemon()
    defer { daemon.shutdown() }
    let client = LocalAPIClient(socketPath: daemon.path)
    // The daemon holds /v1/sync unanswered and cancels the task from its own thread once the request is in. Not
    // from this task after a wait: when the whole suite runs, tests that block their threads can starve this one
    // past the request's 120 s timeout (it did under AddressSanitizer in CI), and `timedOut` would end the call.
    let pending = PendingTask()
    daemon.onHeld { pending.cancel() }
    let task = pending.start { _ = try await client.send(.sync) }
    // Not the 120 s timeout's `timedOut`: the cancellation ended it.
    await #expect(throws: PagesyncClientError.cancelled) { try await task.value }
    #expect(daemon.requests.count == 1)
    // Answered now, the request finds its connection closed.
    daemon.answerHeld()
    try await daemon.waitForConnections(0)
  }

  /// The toolchain's crash hazard: a C callback created in `@MainActor` code traps when libuv runs it on another
  /// thread. Every call from the main actor, whatever thread its loop runs on, must come back.
  @MainActor @Test func callsFromTheMainActorComeBack() async throws {
    let daemon = try ScriptedDaemon()
    defer { daemon.shutdown() }
    daemon.answer(.POST, "/v1/visits/home", #"{"id": "home", "offlinePages": 1}"#)
    daemon.onEvents { call in
      call.responder.startStreaming(eventStreamHead)
      call.responder.writeChunk(chunk("id: 1\nevent: reset\ndata: {\"type\":\"reset\",\"reason\":\"r\"}\n\n"))
    }
    let client = LocalAPIClient(socketPath: daemon.path)
    #expect(try blocking(client, .visit("home")).offlinePages == 1)
    #expect(try await client.send(.visit("home")).offlinePages == 1)
    var options = EventStreamOptions()
    options.idleTimeout = 0
    for try await event in client.events(options) {
      #expect(event.id == 1)
      break
    }
  }

  @Test func manyAsyncCallsAtOnceEachGetTheirAnswer() async throws {
    let daemon = try ScriptedDaemon()
    defer { daemon.shutdown() }
    for index in 0..<20 {
      daemon.answer(.POST, "/v1/visits/p\(index)", #"{"id": "p\#(index)", "offlinePages": \#(index)}"#)
    }
    let client = LocalAPIClient(socketPath: daemon.path)
    let counts = try await withThrowingTaskGroup(of: (Int, Int).self) { group in
      for index in 0..<20 {
        group.addTask { (index, try await client.send(.visit("p\(index)")).offlinePages) }
      }
      var counts: [Int: Int] = [:]
      for try await (index, count) in group { counts[index] = count }
      return counts
    }
    #expect(counts == Dictionary(uniqueKeysWithValues: (0..<20).map { ($0, $0) }))
  }
}

/// The synchronous call (an `async` context would pick the `async` overload).
func blocking<Answer>(_ client: LocalAPIClient, _ call: LocalAPICall<Answer>) throws(PagesyncClientError)
  -> Answer
{
  try client.send(call)
}

func monotonicMilliseconds() -> Int64 {
  var now = timespec()
  clock_gettime(CLOCK_MONOTONIC, &now)
  return Int64(now.tv_sec) * 1000 + Int64(now.tv_nsec) / 1_000_000
}

/// A task that another thread may cancel as soon as it exists: `start` makes it under the lock `cancel` takes.
private final class PendingTask: @unchecked Sendable {
  // @unchecked: `task` is guarded by `lock`.
  private let lock = Lock()
  private var task: Task<Void, any Error>?

  func start(_ body: @escaping @Sendable () async throws -> Void) -> Task<Void, any Error> {
    lock.withLock {
      let task = Task { try await body() }
      self.task = task
      return task
    }
  }

  func cancel() { lock.withLock { task?.cancel() } }
}
