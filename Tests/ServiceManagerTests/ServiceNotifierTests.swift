import EventLoop
import EventLoopTestKit
import ServiceManager
import Testing

#if canImport(Glibc)
  import Glibc
#endif

/// A notification socket name no other test or run uses: `/tmp/...` or `@...`.
private func uniqueSocketName(abstract: Bool, _ label: String = #function) -> String {
  let name = "pagesync-notify-\(getpid())-\(UInt32.random(in: 0...UInt32.max))-\(label.filter(\.isLetter))"
  return abstract ? "@" + name : "/tmp/" + name + ".sock"
}

private func environment(_ socket: String?, watchdogMicroseconds: UInt64? = nil) -> ServiceEnvironment {
  var variables: [String: String] = [:]
  if let socket { variables["NOTIFY_SOCKET"] = socket }
  if let watchdogMicroseconds { variables["WATCHDOG_USEC"] = "\(watchdogMicroseconds)" }
  return ServiceEnvironment(variables: variables, processID: getpid())
}

@Suite struct ServiceNotificationMessageTests {
  @Test func linesAreThoseOfSdNotify() {
    #expect(ServiceNotification.ready.line == "READY=1")
    #expect(ServiceNotification.stopping.line == "STOPPING=1")
    #expect(ServiceNotification.watchdog.line == "WATCHDOG=1")
    #expect(ServiceNotification.status("3 connections").line == "STATUS=3 connections")
    #expect(
      ServiceNotification.reloading(monotonicMicroseconds: 123_456).line
        == "RELOADING=1\nMONOTONIC_USEC=123456")
    #expect(ServiceNotification.message([.ready, .status("up")]) == "READY=1\nSTATUS=up")
  }

  @Test func aLineBreakInAStatusCannotStartAnotherAssignment() {
    #expect(ServiceNotification.status("a\nREADY=1\r").line == "STATUS=a READY=1 ")
  }
}

@Suite struct ServiceEnvironmentTests {
  @Test func notifySocketIsAPathOrAnAbstractName() throws {
    #expect(try NotifySocketAddress(parsing: "/run/systemd/notify") == .path("/run/systemd/notify"))
    #expect(try NotifySocketAddress(parsing: "@pagesync/1") == .abstract("pagesync/1"))
    #expect(throws: NotifySocketAddressError.empty) { try NotifySocketAddress(parsing: "") }
    #expect(throws: NotifySocketAddressError.unsupported("run/notify")) {
      try NotifySocketAddress(parsing: "run/notify")
    }
    #expect(throws: NotifySocketAddressError.unsupported("@")) { try NotifySocketAddress(parsing: "@") }
    #expect(throws: NotifySocketAddressError.unsupported("vsock:2:1234")) {
      try NotifySocketAddress(parsing: "vsock:2:1234")
    }
    let longest = "/" + String(repeating: "x", count: 106)
    #expect(try NotifySocketAddress(parsing: longest) == .path(longest))
    #expect(throws: NotifySocketAddressError.tooLong(longest + "x")) {
      try NotifySocketAddress(parsing: longest + "x")
    }
    let name = String(repeating: "y", count: 107)
    #expect(try NotifySocketAddress(parsing: "@" + name) == .abstract(name))
    #expect(throws: NotifySocketAddressError.tooLong("@" + name + "y")) {
      try NotifySocketAddress(parsing: "@" + name + "y")
    }
  }

  @Test func unsetMeansNothingToDoAndIsNoProblem() {
    let environment = ServiceEnvironment(variables: [:], processID: 42)
    #expect(environment.notifySocket == nil)
    #expect(environment.watchdogMicroseconds == nil)
    #expect(environment.watchdogPingInterval == nil)
    #expect(environment.problems.isEmpty)
  }

  @Test func theWatchdogIsPingedAtHalfItsTimeout() {
    let environment = ServiceEnvironment(
      variables: ["NOTIFY_SOCKET": "@x", "WATCHDOG_USEC": "30000000"], processID: 42)
    #expect(environment.watchdogMicroseconds == 30_000_000)
    #expect(environment.watchdogPingInterval == 15_000)
    #expect(ServiceNotifier(environment: environment).updateInterval() == 10_000)
    #expect(ServiceNotifier(environment: environment).updateInterval(statusInterval: 60_000) == 15_000)
    let tiny = ServiceEnvironment(variables: ["NOTIFY_SOCKET": "@x", "WATCHDOG_USEC": "1"], processID: 42)
    #expect(tiny.watchdogPingInterval == 1)
  }

  @Test func aWatchdogForAnotherProcessIsNotOurs() {
    let mine = ServiceEnvironment(
      variables: ["NOTIFY_SOCKET": "@x", "WATCHDOG_USEC": "2000000", "WATCHDOG_PID": "42"], processID: 42)
    #expect(mine.watchdogPingInterval == 1000)
    let theirs = ServiceEnvironment(
      variables: ["NOTIFY_SOCKET": "@x", "WATCHDOG_USEC": "2000000", "WATCHDOG_PID": "41"], processID: 42)
    #expect(theirs.watchdogMicroseconds == nil)
    #expect(theirs.problems.isEmpty)
  }

  @Test func malformedVariablesAreReportedAndIgnored() {
    let environment = ServiceEnvironment(
      variables: ["NOTIFY_SOCKET": "notify", "WATCHDOG_USEC": "soon"], processID: 42)
    #expect(environment.notifySocket == nil)
    #expect(environment.watchdogMicroseconds == nil)
    #expect(environment.problems.count == 2)
    #expect(
      ServiceEnvironment(variables: ["WATCHDOG_USEC": "0"], processID: 42).problems == [
        "WATCHDOG_USEC=0: not a positive number of microseconds"
      ])
    #expect(
      ServiceEnvironment(variables: ["WATCHDOG_USEC": "10", "WATCHDOG_PID": "me"], processID: 42)
        .watchdogMicroseconds == nil)
  }
}

@Suite struct ServiceNotifierTests {
  @Test(arguments: [false, true])
  func notificationsArriveAsOneDatagramEach(abstract: Bool) throws {
    let receiver = try DatagramReceiver(address: uniqueSocketName(abstract: abstract))
    defer { receiver.close() }
    let notifier = ServiceNotifier(environment: environment(receiver.address))
    #expect(notifier.isEnabled)
    #expect(notifier.ready(status: "listening on 127.0.0.1:7700"))
    #expect(notifier.status("1 connection"))
    let before = ServiceNotifier.monotonicMicroseconds()
    #expect(notifier.reloading())
    let after = ServiceNotifier.monotonicMicroseconds()
    #expect(notifier.ready())
    #expect(notifier.watchdog())
    #expect(notifier.stopping(status: "draining"))
    let received = receiver.receiveAvailable()
    try #require(received.count == 6, "\(received)")
    #expect(received[0] == "READY=1\nSTATUS=listening on 127.0.0.1:7700")
    #expect(received[1] == "STATUS=1 connection")
    let reload = received[2].split(separator: "\n")
    #expect(reload.count == 3 && reload[0] == "RELOADING=1" && reload[2] == "STATUS=reloading")
    let time = reload.count > 1 ? UInt64(reload[1].dropFirst("MONOTONIC_USEC=".count)) : nil
    #expect(reload.count > 1 && reload[1].hasPrefix("MONOTONIC_USEC="))
    #expect(time.map { before <= $0 && $0 <= after } == true, "\(received[2]) not in [\(before), \(after)]")
    #expect(received[3] == "READY=1")
    #expect(received[4] == "WATCHDOG=1")
    #expect(received[5] == "STOPPING=1\nSTATUS=draining")
    #expect(notifier.sentCount == 6 && notifier.lastError == nil)
    notifier.close()
    #expect(!notifier.ready())
    #expect(receiver.receiveAvailable().isEmpty)
  }

  @Test func withoutNotifySocketNothingIsSentAndNothingStarts() throws {
    let notifier = ServiceNotifier(environment: environment(nil, watchdogMicroseconds: 1000))
    #expect(!notifier.isEnabled)
    #expect(!notifier.ready(status: "x"))
    #expect(!notifier.watchdog())
    #expect(notifier.lastError == nil && notifier.sentCount == 0)
    let loop = try Loop()
    notifier.startUpdates(loop: loop) { "never asked" }
    #expect(loop.liveHandleTypes.filter { $0 == "timer" }.isEmpty)
    try loop.runUntilDone(timeout: 1000)
    try loop.close()
  }

  @Test func aSocketNobodyListensOnIsAnErrorNotACrash() {
    let notifier = ServiceNotifier(environment: environment(uniqueSocketName(abstract: false)))
    #expect(notifier.isEnabled)
    #expect(!notifier.ready())
    #expect(notifier.lastError?.contains("No such file") == true, "\(notifier.lastError ?? "")")
  }

  /// The loop's timer pings the watchdog and sends the status when it changed, and only then; after `stopping`
  /// the status is left alone and the pings go on.
  @Test func updatesPingTheWatchdogAndSendStatusChanges() throws {
    let loop = try Loop()
    let receiver = try DatagramReceiver(address: uniqueSocketName(abstract: true))
    let notifier = ServiceNotifier(environment: environment(receiver.address, watchdogMicroseconds: 20_000))
    #expect(notifier.updateInterval() == 10)
    var figure = 0
    notifier.ready(status: "figure 0")
    notifier.startUpdates(loop: loop) { "figure \(figure)" }
    var pingsAfterStopping = 0
    receiver.onDatagram = { datagram in
      if datagram == "WATCHDOG=1\nSTATUS=figure 1" {
        notifier.stopping(status: "stopping")
        figure = 2
      } else if datagram.hasPrefix("WATCHDOG=1"), figure == 0 {
        figure = 1
      } else if datagram.hasPrefix("WATCHDOG=1"), figure == 2 {
        pingsAfterStopping += 1
        if pingsAfterStopping == 3 {
          notifier.close()
          receiver.close()
        }
      }
    }
    try receiver.watch(loop: loop)
    try loop.runUntilDone(timeout: 10_000)
    try loop.close()
    let kinds = receiver.received.filter { $0 != "WATCHDOG=1" }
    #expect(
      kinds == [
        "READY=1\nSTATUS=figure 0", "WATCHDOG=1\nSTATUS=figure 1", "STOPPING=1\nSTATUS=stopping",
      ], "\(receiver.received)")
    #expect(pingsAfterStopping == 3)
  }

  /// The pings come from the loop: while a callback holds the loop for ten ping intervals, none is sent, so
  /// systemd sees a stuck loop as a dead service.
  @Test func aStuckLoopStopsFeedingTheWatchdog() throws {
    let loop = try Loop()
    let receiver = try DatagramReceiver(address: uniqueSocketName(abstract: true))
    let notifier = ServiceNotifier(environment: environment(receiver.address, watchdogMicroseconds: 20_000))
    notifier.startUpdates(loop: loop) { "" }
    var duringStall: [String]?
    receiver.onDatagram = { _ in
      guard duringStall == nil, receiver.received.count >= 3 else { return }
      receiver.onDatagram = nil
      // Stall the loop: whatever arrives meanwhile was sent by something other than the loop.
      receiver.receiveAvailable()
      usleep(100_000)
      duringStall = receiver.receiveAvailable()
      notifier.close()
      receiver.close()
    }
    try receiver.watch(loop: loop)
    try loop.runUntilDone(timeout: 10_000)
    try loop.close()
    #expect(duringStall == [], "pings while the loop was stuck: \(duringStall ?? [])")
  }
}
