import ByteBuffers
import EventLoop
import EventLoopTestKit
import PagesyncCLI
import Testing
import Web

#if canImport(Glibc)
  import Glibc
#endif

/// `pagesync watch` as a process against a daemon streaming Server-Sent Events on its socket: a line per event
/// as it comes (the test acts only once the lines are in the pipe, while the program still runs), `--json`,
/// the ways it ends (Ctrl-C, SIGTERM, a reader that went away) and fails.
@Suite struct PagesyncWatchTests {
  static let events =
    "retry: 1000\n\n"
    + "event: sync\ndata: {\"type\":\"sync\",\"state\":\"live\",\"connected\":true,\"pendingMutations\":0}\n\n"
    + "id: 101\nevent: page\n"
    + "data: {\"type\":\"page\",\"id\":\"home\",\"lastDownloadedTimestamp\":null,\"source\":\"local\"}\n\n"
    + ": keep-alive\n\n"
    + "id: 102\nevent: page\n"
    + "data: {\"type\":\"page\",\"id\":\"task-1\",\"lastDownloadedTimestamp\":17,\"source\":\"remote\"}\n\n"
    + "id: 103\nevent: typing\ndata: {\"type\":\"typing\"}\n\n"
    + "id: 104\nevent: offline\ndata: {\"type\":\"offline\",\"id\":\"home\",\"available\":true}\n\n"
    + "id: 105\nevent: offline\n"
    + "data: {\"type\":\"offline\",\"id\":\"NOPE\",\"available\":false,\"missing\":true}\n\n"
    + "id: 106\nevent: sync\n"
    + "data: {\"type\":\"sync\",\"state\":\"offline\",\"connected\":false,\"pendingMutations\":1}\n\n"
    + "id: 107\nevent: conflict\n"
    + "data: {\"type\":\"conflict\",\"mutationId\":41,\"page\":\"home\",\"reason\":\"page_deleted\"}\n\n"
    + "id: 108\nevent: page\n"
    + "data: {\"type\":\"page\",\"id\":\"old\",\"lastDownloadedTimestamp\":9,\"source\":\"remote\",\"deleted\":true}\n\n"
    + "id: 109\nevent: reset\ndata: {\"type\":\"reset\",\"reason\":\"daemon restarted\"}\n\n"

  @Test func aLinePerEventAsItComesThenCtrlCEndsIt() throws {
    let run = try runWatch([], until: 9, then: .signal(SIGINT))
    #expect(run.status == 0, "\(run.errorOutput)")
    #expect(run.errorOutput == "")
    #expect(
      run.output == """
        sync: live, connected, 0 pending mutations
        page home: changed (local)
        page task-1: changed (remote, sequence 17)
        page home: available offline
        page NOPE: missing (the broker says it does not exist; kept until you remove it)
        sync: offline, not connected, 1 pending mutation
        conflict: mutation 41 on page home rejected: page_deleted (see pagesync conflicts)
        page old: deleted (remote, sequence 9)
        reset: events were lost (daemon restarted)

        """)
  }

  @Test func withJSONEachLineIsTheEventsDataAndSIGTERMEndsIt() throws {
    let run = try runWatch(["--json"], until: 9, then: .signal(SIGTERM))
    #expect(run.status == 0, "\(run.errorOutput)")
    let expected = Self.events.split(separator: "\n").filter { $0.hasPrefix("data: ") }
      .map { String($0.dropFirst(6)) }.filter { !$0.contains("typing") }
    #expect(run.output.split(separator: "\n").map(String.init) == expected)
  }

  @Test func aReaderThatGoesAwayEndsItQuietly() throws {
    // `pagesync watch | head -n 2`, with pipefail: had pagesync died of SIGPIPE the status would be 141, had it
    // ignored the failed write it would never end.
    let loop = try Loop()
    let daemon = try WatchDaemon(loop: loop, tick: true)
    // `timeout`: a pagesync that never ends fails the test (124) instead of outliving it.
    let script = "set -o pipefail; timeout 15 \"$0\" watch --json --socket \"$1\" | head -n 2"
    var result: PagesyncRun?
    _ = try ProcessRun(loop: loop, "/bin/bash", ["-c", script, pagesyncProgram(), daemon.socketPath]) { run in
      result = PagesyncRun(
        status: run.status, output: run.output.string, errorOutput: run.errorOutput.string, requests: [])
      daemon.close()
    }
    try loop.runUntilDone(timeout: 20_000)
    try loop.close()
    let run = try #require(result)
    #expect(run.status == 0, "\(run.errorOutput)")
    #expect(run.errorOutput == "")
    #expect(run.output.split(separator: "\n").count == 2)
  }

  @Test func aDaemonThatIsNotThereIsAClearFailure() throws {
    let run = try runPagesyncAlone(["watch", "--socket", "/nonexistent/pagesyncd.sock"])
    #expect(run.status == 69)
    #expect(run.output == "")
    #expect(
      run.errorOutput
        == "pagesync: cannot reach the daemon at /nonexistent/pagesyncd.sock: no such file or directory "
        + "(is pagesyncd running? set --socket or PAGESYNC_SOCKET)\n")
  }

  @Test func aRefusedStreamIsTheDaemonsMessage() throws {
    let run = try runPagesync(["watch"], answer: .error(503, "too many event streams ([api] event_streams)"))
    #expect(run.status == 1)
    #expect(run.errorOutput == "pagesync: too many event streams ([api] event_streams) (HTTP 503)\n")
    #expect(try run.onlyRequest().target == "/v1/events")
  }

  @Test func anAnswerThatIsNotAStreamIsInvalid() throws {
    let run = try runPagesync(["watch"], answer: .ok("{}"))
    #expect(run.status == 1)
    #expect(
      run.errorOutput
        == "pagesync: the daemon's answer is not valid: GET /v1/events answered \"application/json\", "
        + "not text/event-stream\n")
  }

  // MARK: Harness

  enum Ending {
    case signal(Int32)
  }

  /// Runs `pagesync watch ARGUMENTS --socket S` against a daemon streaming `events`; once `lines` lines have
  /// reached the pipe (the program still running), ends it as `ending` says.
  func runWatch(_ arguments: [String], until lines: Int, then ending: Ending) throws -> PagesyncRun {
    let loop = try Loop()
    let daemon = try WatchDaemon(loop: loop, tick: false)
    var result: PagesyncRun?
    let run = try ProcessRun(
      loop: loop, pagesyncProgram(), ["watch"] + arguments + ["--socket", daemon.socketPath]
    ) { run in
      result = PagesyncRun(
        status: run.status, output: run.output.string, errorOutput: run.errorOutput.string, requests: [])
      daemon.close()
    }
    // A watcher of the pipe, not a wait: it acts as soon as the lines are there.
    let watcher = LoopTimer(loop: loop)
    watcher.start(after: 2, repeatEvery: 2) {
      guard run.output.bytes.filter({ $0 == 0x0A }).count >= lines else { return }
      watcher.close()
      switch ending {
      case .signal(let number): try? run.process.kill(number)
      }
    }
    do {
      try loop.runUntilDone(timeout: 20_000)
    } catch {
      // It did not end: it must not outlive the test, waiting for its daemon forever.
      kill(run.process.pid, SIGKILL)
      throw error
    }
    try loop.close()
    return try #require(result, "pagesync watch did not end")
  }
}

/// A daemon whose `GET /v1/events` streams `PagesyncWatchTests.events`; with `tick`, then a new page event
/// every 20 ms until the client goes.
///
/// Threading: the test's loop.
final class WatchDaemon {
  let server: HTTPServer
  let socketPath = temporarySocketPath("watch")
  private var streams: [HTTPResponder] = []
  private var ticker: LoopTimer?

  init(loop: Loop, tick: Bool) throws {
    ignoreBrokenPipes()
    let router = HTTPRouter()
    server = HTTPServer(loop: loop, router: router)
    router.add(.GET, "/v1/events") { [unowned self] _, responder in
      responder.startStreaming(
        HTTPResponseHead(
          status: .ok, headers: ["Content-Type": "text/event-stream", "Cache-Control": "no-store"]))
      responder.writeChunk(ByteBuffer(string: PagesyncWatchTests.events))
      self.streams.append(responder)
    }
    try server.listen(on: .unix(path: socketPath))
    if tick {
      let timer = LoopTimer(loop: loop)
      var id = 200
      timer.start(after: 20, repeatEvery: 20) { [unowned self] in
        id += 1
        for stream in self.streams {
          stream.writeChunk(
            ByteBuffer(
              string:
                "id: \(id)\nevent: page\ndata: {\"type\":\"page\",\"id\":\"p\(id)\",\"source\":\"remote\","
                + "\"lastDownloadedTimestamp\":\(id)}\n\n"))
        }
      }
      ticker = timer
    }
  }

  func close() {
    ticker?.close()
    for stream in streams { stream.finish() }
    streams = []
    server.close()
  }
}
