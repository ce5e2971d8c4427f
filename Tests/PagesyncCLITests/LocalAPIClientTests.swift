import EventLoop
import EventLoopTestKit
import Testing
import Web

@testable import PagesyncCLI

#if canImport(Glibc)
  import Glibc
#endif

/// The client's failures that a canned answer cannot produce, in process: a daemon that never answers (75)
/// and one that hangs up (1). The server side runs on a `LoopThread`; the client runs its own loop on the
/// test's thread, as it does in `pagesync`.
@Suite struct LocalAPIClientTests {
  @Test func aDaemonThatNeverAnswersTimesOut() throws {
    let path = temporarySocketPath()
    let thread = try LoopThread()
    // Built before the thread starts, on this thread, as a loop allows; the handler keeps each responder and
    // never answers.
    let router = HTTPRouter()
    let server = HTTPServer(loop: thread.loop, router: router)
    let held = HeldResponders()
    router.add(.POST, "/v1/sync") { _, responder in held.responders.append(responder) }
    try server.listen(on: .unix(path: path))
    thread.start()
    defer { try? thread.shutdown() }

    let started = monotonicMilliseconds()
    let request = LocalAPIRequest(.POST, "/v1/sync", timeoutSeconds: 1)
    #expect(throws: CLIFailure.timedOut(socket: path, seconds: 1)) {
      try LocalAPIClient(socketPath: path).send(request)
    }
    let elapsed = monotonicMilliseconds() - started
    #expect(elapsed >= 900 && elapsed < 10_000, "\(elapsed) ms")
    #expect(CLIFailure.timedOut(socket: path, seconds: 1).exitCode == 75)
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
      #expect(error.exitCode == 1)
      #expect(error.description.contains("may or may not have taken effect"))
    }
  }
}

/// Responders a test keeps unanswered. Loop thread only.
private final class HeldResponders {
  var responders: [HTTPResponder] = []
}

private func monotonicMilliseconds() -> Int64 {
  var now = timespec()
  clock_gettime(CLOCK_MONOTONIC, &now)
  return Int64(now.tv_sec) * 1000 + Int64(now.tv_nsec) / 1_000_000
}
