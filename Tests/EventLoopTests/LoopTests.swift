import EventLoop
import EventLoopTestKit
import Testing

#if canImport(Glibc)
  import Glibc
#endif

@Suite struct LoopTests {
  @Test func emptyLoopClosesCleanly() throws {
    let loop = try Loop()
    #expect(loop.liveHandleTypes.sorted() == ["async", "check", "idle"])
    loop.run()
    try loop.close()
  }

  @Test func timersFireInDeadlineOrderAndRepeat() throws {
    let loop = try Loop()
    var events: [String] = []
    let late = LoopTimer(loop: loop)
    let early = LoopTimer(loop: loop)
    let repeating = LoopTimer(loop: loop)
    late.start(after: 30) {
      events.append("late")
      late.close()
    }
    early.start(after: 1) {
      events.append("early")
      early.close()
    }
    var ticks = 0
    repeating.start(after: 1, repeatEvery: 1) {
      ticks += 1
      if ticks == 3 {
        events.append("ticks")
        repeating.close()
      }
    }
    try loop.runUntilDone()
    #expect(events.first == "early")
    #expect(events.last == "late")
    #expect(ticks == 3)
    try loop.close()
  }

  @Test func stoppedTimerDoesNotFire() throws {
    let loop = try Loop()
    var fired = false
    let timer = LoopTimer(loop: loop)
    timer.start(after: 1) { fired = true }
    #expect(timer.isActive)
    timer.stop()
    #expect(!timer.isActive)
    timer.close()
    try loop.runUntilDone()
    #expect(!fired)
    try loop.close()
  }

  @Test func closeReportsALeakedHandleAndSucceedsOnceItIsClosed() throws {
    let loop = try Loop()
    let timer = LoopTimer(loop: loop)
    timer.start(after: 100_000) {}
    timer.keepsLoopAlive = false
    loop.run()
    #expect(throws: LoopLifecycleError.handlesStillOpen(handles: ["timer"])) { try loop.close() }
    loop.closeAllHandles()
    #expect(timer.isClosing)
    loop.run()
    try loop.close()
  }

  @Test func executeFromAnotherThreadRunsOnTheLoopThreadInOrder() throws {
    let loop = try Loop()
    let worker = WorkerThread(name: "test")
    defer { worker.shutdown() }
    let loopThread = pthread_self()
    final class Log: @unchecked Sendable {
      var values: [Int] = []
      var onLoopThread = true
    }
    let log = Log()
    // Keep the loop alive until the last task arrived.
    loop.keepsRunningWhenIdle = true
    worker.submit {
      for i in 0..<100 {
        loop.execute {
          log.values.append(i)
          if pthread_equal(pthread_self(), loopThread) == 0 { log.onLoopThread = false }
          if i == 99 { loop.keepsRunningWhenIdle = false }
        }
      }
    }
    try loop.runUntilDone()
    #expect(log.values == Array(0..<100))
    #expect(log.onLoopThread)
    try loop.close()
  }

  @Test func offloadRunsTheJobOnTheWorkerAndTheCompletionOnTheLoop() throws {
    let loop = try Loop()
    let worker = WorkerThread(name: "offload")
    defer { worker.shutdown() }
    let loopThread = pthread_self()
    var results: [Int] = []
    var completionOnLoop = true
    loop.keepsRunningWhenIdle = true
    for i in 0..<10 {
      loop.offload(
        to: worker,
        { () -> Int in
          // Off the loop thread.
          pthread_equal(pthread_self(), loopThread) == 0 ? i * i : -1
        },
        then: { value in
          results.append(value)
          if pthread_equal(pthread_self(), loopThread) == 0 { completionOnLoop = false }
          if results.count == 10 { loop.keepsRunningWhenIdle = false }
        })
    }
    #expect(loop.pendingOffloads == 10)
    try loop.runUntilDone()
    #expect(results == (0..<10).map { $0 * $0 })
    #expect(completionOnLoop)
    #expect(loop.pendingOffloads == 0)
    try loop.close()
  }

  @Test func wakeupSignalsCoalesceAndCrossThreads() throws {
    let loop = try Loop()
    var calls = 0
    var wakeup: Wakeup!
    wakeup = Wakeup(loop: loop) {
      calls += 1
      wakeup.close()
    }
    let w = wakeup!
    final class Box: @unchecked Sendable {
      let w: Wakeup
      init(_ w: Wakeup) { self.w = w }
    }
    let box = Box(w)
    let worker = WorkerThread(name: "signaller")
    // All signals are sent before the loop runs: they coalesce into one callback.
    worker.submit { for _ in 0..<50 { box.w.signal() } }
    worker.shutdown()
    try loop.runUntilDone()
    #expect(calls == 1)
    w.signal()  // after close: ignored, no crash
    try loop.close()
  }

  @Test func runNextTurnRunsAfterTheNextPollAndWorkItAsksForATurnLater() throws {
    let loop = try Loop()
    var log: [String] = []
    var wakeup: Wakeup!
    wakeup = Wakeup(loop: loop) {
      log.append("poll")
      wakeup.close()
    }
    // Owed work does not keep the loop running by itself (the handle it is for does): this one does here.
    let keepAlive = LoopTimer(loop: loop)
    keepAlive.start(after: 60_000) {}
    let timer = LoopTimer(loop: loop)
    timer.start(after: 0) {
      timer.close()
      let asked = loop.turns
      loop.runNextTurn {
        log.append("first, \(loop.turns - asked) turns on")
        // Asked for from the work itself: not in this check phase, the next one.
        let again = loop.turns
        loop.runNextTurn {
          log.append("second, \(loop.turns - again) turn on")
          keepAlive.close()
        }
      }
      // I/O that is ready in this turn's poll: it comes first.
      wakeup.signal()
    }
    try loop.runUntilDone()
    #expect(log == ["poll", "first, 2 turns on", "second, 1 turn on"])
    try loop.close()
  }

  @Test func signalWatcherSeesTheSignal() throws {
    let loop = try Loop()
    var seen: Int32 = 0
    var watcher: SignalWatcher!
    watcher = try SignalWatcher(loop: loop, signal: SIGUSR2) { signum in
      seen = signum
      watcher.close()
    }
    kill(getpid(), SIGUSR2)
    try loop.runUntilDone()
    #expect(seen == SIGUSR2)
    try loop.close()
  }

  @Test func loopThreadShutdownLeavesNothingOpen() throws {
    let thread = try LoopThread()
    thread.start { loop in
      let timer = LoopTimer(loop: loop)
      timer.start(after: 1, repeatEvery: 1) {}
      _ = try? Listener(loop: loop, address: .inet(host: "127.0.0.1", port: 0))
    }
    try thread.shutdown()
  }

  @Test func childProcessOutputAndExitStatus() throws {
    let loop = try Loop()
    var run: ProcessRun?
    run = try ProcessRun(loop: loop, "/bin/sh", ["-c", "echo out; echo err >&2; exit 3"])
    try loop.runUntilDone()
    #expect(run?.output.string == "out\n")
    #expect(run?.errorOutput.string == "err\n")
    #expect(run?.status == 3)
    run = nil
    try loop.close()
  }

  @Test func spawningAMissingProgramFailsWithENOENT() throws {
    let loop = try Loop()
    #expect(throws: LoopError.self) {
      _ = try ChildProcess(loop: loop, executable: "/nonexistent/program", arguments: [])
    }
    try loop.runUntilDone()
    try loop.close()
  }
}

@Suite struct SocketAddressTests {
  @Test func parsesEveryForm() throws {
    #expect(try SocketAddress(parsing: "127.0.0.1:7700") == .inet(host: "127.0.0.1", port: 7700))
    #expect(try SocketAddress(parsing: "[::1]:0") == .inet(host: "::1", port: 0))
    #expect(try SocketAddress(parsing: "localhost:80") == .inet(host: "localhost", port: 80))
    #expect(try SocketAddress(parsing: "unix:/run/x.sock") == .unix(path: "/run/x.sock"))
    #expect(try SocketAddress(parsing: "/run/x.sock") == .unix(path: "/run/x.sock"))
    #expect(SocketAddress.inet(host: "::1", port: 5).description == "[::1]:5")
  }

  @Test(arguments: [
    "", "127.0.0.1", "127.0.0.1:", "127.0.0.1:70000", ":80", "::1:80", "[::1]80", "unix:", "h:x",
  ])
  func refusesMalformed(_ text: String) {
    #expect(throws: SocketAddress.ParseError.self) { try SocketAddress(parsing: text) }
  }
}
