import EventLoop
import EventLoopTestKit
import Testing

#if canImport(Glibc)
  import Glibc
#endif

/// The broker and the daemon as systemd runs them (`Type=notify`, `WatchdogSec=`): a socket owned by the test
/// stands in for systemd's, and each notification is checked against what the process can be seen doing at the
/// moment it arrives.
@Suite(.serialized) struct ServiceNotificationTests {
  /// A 200 ms watchdog: pings and status updates every 100 ms.
  static let watchdogMicroseconds: UInt64 = 200_000

  @Test func theBrokerIsReadyOnlyOnceItsPortAcceptsAndReportsLiveFigures() throws {
    let loop = try Loop()
    let directory = ScratchDirectory()
    defer { directory.remove() }
    directory.write(
      "broker.toml",
      """
      [server]
      listen = "127.0.0.1:0"
      [store]
      path = "\(directory.path)/broker.sqlite"
      """)
    let broker = try NotifiedProcess(
      loop: loop, program: builtProgram("pagesync-broker"),
      arguments: ["--config", directory.path + "/broker.toml"],
      directory: directory, name: "broker", watchdogMicroseconds: Self.watchdogMicroseconds)
    var logAtReady: String?
    var connectedAtReady = false
    var connection: Int32 = -1
    var sawOneConnection = false
    var stopped: (status: Int64, signal: Int32)?
    func stop() { broker.stop { stopped = ($0, $1) } }
    broker.onNotification = { datagram in
      if datagram.hasPrefix("READY=1"), logAtReady == nil {
        // What was logged before READY=1 left, and whether the port takes a connection right now.
        let log = broker.log
        logAtReady = log
        let port = logValue("broker.address", in: log)?.split(separator: ":").last.flatMap { UInt16($0) }
        connection = port.map { connectNow(port: $0) } ?? -1
        connectedAtReady = connection >= 0
        if !connectedAtReady { stop() }
      } else if !sawOneConnection, datagram.contains(": 1 connections,") {
        // The connection made at READY shows in the figures; closing it must too.
        sawOneConnection = true
        close(connection)
      } else if sawOneConnection, datagram.contains(": 0 connections,") {
        stop()
      }
    }
    try loop.runUntilDone(timeout: 60_000)
    try loop.close()
    let notifications = broker.notifications
    let log = broker.log
    #expect(
      logValue("broker.address", in: logAtReady ?? "") != nil, "READY=1 before the address was logged: \(log)"
    )
    #expect(connectedAtReady, "READY=1 while the port refused connections: \(notifications) \(log)")
    #expect(
      notifications.first?.hasPrefix("READY=1\nSTATUS=listening on 127.0.0.1:") == true, "\(notifications)")
    #expect(notifications.filter { $0.contains("READY=1") }.count == 1, "\(notifications)")
    #expect(sawOneConnection, "\(notifications)")
    #expect(notifications.contains { $0.hasPrefix("WATCHDOG=1") }, "\(notifications)")
    #expect(
      notifications.contains("STOPPING=1\nSTATUS=draining 0 connections"), "\(notifications)")
    #expect(stopped?.status == 0 && stopped?.signal == 0, "SIGTERM drains and exits 0: \(log)")
  }

  @Test func theDaemonIsReadyOnceItsAPIListensAndReportsItsLink() throws {
    let loop = try Loop()
    let directory = ScratchDirectory()
    defer { directory.remove() }
    directory.write(
      "broker.toml",
      """
      [server]
      listen = "127.0.0.1:0"
      [store]
      path = "\(directory.path)/broker.sqlite"
      """)
    let broker = try NotifiedProcess(
      loop: loop, program: builtProgram("pagesync-broker"),
      arguments: ["--config", directory.path + "/broker.toml"],
      directory: directory, name: "broker")
    let socket = directory.path + "/daemon.sock"
    var daemon: NotifiedProcess?
    var logAtReady: String?
    var connectedAtReady = false
    var brokerStopped: (status: Int64, signal: Int32)?
    var daemonStopped: (status: Int64, signal: Int32)?
    func stopBoth() {
      daemon?.stop { status, signal in
        daemonStopped = (status, signal)
        broker.stop { brokerStopped = ($0, $1) }
      }
    }
    broker.onNotification = { datagram in
      guard datagram.hasPrefix("READY=1"), daemon == nil,
        let address = logValue("broker.address", in: broker.log)
      else { return }
      directory.write(
        "daemon.toml",
        """
        [broker]
        url = "http://\(address)"
        [store]
        path = "\(directory.path)/daemon.sqlite"
        [api]
        socket = "\(socket)"
        """)
      do {
        let started = try NotifiedProcess(
          loop: loop, program: builtProgram("pagesyncd"),
          arguments: ["--config", directory.path + "/daemon.toml"],
          directory: directory, name: "daemon", watchdogMicroseconds: Self.watchdogMicroseconds)
        daemon = started
        started.onNotification = { datagram in
          if datagram.hasPrefix("READY=1"), logAtReady == nil {
            logAtReady = started.log
            let connection = connectNow(path: socket)
            connectedAtReady = connection >= 0
            if connectedAtReady { close(connection) } else { stopBoth() }
          } else if datagram.contains("STATUS=connected to http://\(address):") {
            stopBoth()
          }
        }
      } catch {
        Issue.record("pagesyncd: \(error)")
        broker.stop { brokerStopped = ($0, $1) }
      }
    }
    try loop.runUntilDone(timeout: 60_000)
    try loop.close()
    let notifications = daemon?.notifications ?? []
    let log = daemon?.log ?? ""
    #expect(logAtReady?.contains("pagesyncd started") == true, "READY=1 before the API listened: \(log)")
    #expect(connectedAtReady, "READY=1 while the API socket refused connections: \(notifications) \(log)")
    #expect(
      notifications.first?.hasPrefix("READY=1\nSTATUS=not connected to http://127.0.0.1:") == true
        || notifications.first?.hasPrefix("READY=1\nSTATUS=connected to http://127.0.0.1:") == true,
      "\(notifications)")
    #expect(notifications.filter { $0.contains("READY=1") }.count == 1, "\(notifications)")
    #expect(
      notifications.contains { $0.contains(": 0 offline pages, 0 pending mutations, 0 rejected") },
      "\(notifications)")
    #expect(notifications.contains { $0.hasPrefix("WATCHDOG=1") }, "\(notifications)")
    #expect(notifications.contains("STOPPING=1\nSTATUS=stopping"), "\(notifications)")
    #expect(daemonStopped?.status == 0 && daemonStopped?.signal == 0, "SIGTERM stops and exits 0: \(log)")
    #expect(brokerStopped?.status == 0, "\(broker.log)")
  }
}
