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

  @Test func theBrokerReloadsOnSIGHUPBetweenReloadingAndReady() throws {
    let loop = try Loop()
    let directory = ScratchDirectory()
    defer { directory.remove() }
    let config = directory.path + "/broker.toml"
    directory.write(
      "broker.toml",
      """
      [server]
      listen = "127.0.0.1:0"
      [store]
      path = "\(directory.path)/broker.sqlite"
      [[auth.tokens]]
      token = "\(TestTokens.alice)"
      user = "alice"
      workspaces = ["w1", "w2"]
      [[auth.tokens]]
      token = "\(TestTokens.bob)"
      user = "bob"
      workspaces = ["w2"]
      [limits]

      """)
    let broker = try NotifiedProcess(
      loop: loop, program: builtProgram("pagesync-broker"), arguments: ["--config", config],
      directory: directory, name: "broker")
    var script: ProcessRun?
    var stopped: (status: Int64, signal: Int32)?
    broker.onNotification = { datagram in
      guard datagram.hasPrefix("READY=1"), script == nil,
        let address = logValue("broker.address", in: broker.log)
      else { return }
      do {
        script = try ProcessRun(
          loop: loop, "python3",
          [
            integrationResource("Python/broker_reload.py"), "http://" + address, config,
            "\(broker.process.pid)", broker.logPath, TestTokens.alice, TestTokens.bob,
          ]
        ) { _ in broker.stop { stopped = ($0, $1) } }
      } catch {
        Issue.record("python3: \(error)")
        broker.stop { stopped = ($0, $1) }
      }
    }
    try loop.runUntilDone(timeout: 90_000)
    try loop.close()
    let log = broker.log
    #expect(
      script?.status == 0, "\(script?.output.string ?? "")\(script?.errorOutput.string ?? "")\n\(log)")
    #expect(script?.output.string.hasSuffix("ALL OK\n") == true)
    // Each SIGHUP: RELOADING=1 first, then READY=1 with what the reload did.
    let notifications = broker.notifications.filter { !$0.hasPrefix("WATCHDOG=1") }
    let reloads = notifications.filter { $0.hasPrefix("RELOADING=1") }
    #expect(reloads.count == 3, "\(notifications)")
    for reload in reloads {
      #expect(reload.contains("MONOTONIC_USEC="), "\(reload)")
      let index = notifications.firstIndex(of: reload)!
      let next = notifications[(index + 1)...].first { !$0.hasPrefix("STATUS=") }
      #expect(next?.hasPrefix("READY=1") == true, "\(notifications)")
    }
    let ready = notifications.filter { $0.hasPrefix("READY=1") }
    #expect(ready.count == 4, "\(notifications)")
    #expect(
      ready.dropFirst().first?.contains("reload failed, running configuration kept") == true, "\(ready)")
    #expect(ready.dropFirst(2).first?.contains("restart needed for server.listen") == true, "\(ready)")
    #expect(
      ready.dropFirst(2).first?.contains("applied auth.tokens, limits.batch_mutations") == true, "\(ready)")
    #expect(log.contains("reload refused") && log.contains("not_a_key"), "\(log)")
    #expect(stopped?.status == 0, "\(log)")
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
    var reloadSent = false
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
            if connectedAtReady { close(connection) } else { return stopBoth() }
            // The link may be up before the API is (READY=1 then says "connected"): no later STATUS= would
            // repeat it, so this datagram is the one to go on from.
            guard datagram.contains("STATUS=connected to http://\(address):") else { return }
          }
          if !reloadSent, datagram.contains("STATUS=connected to http://\(address):") {
            // `systemctl reload`: with no change in the file, RELOADING=1 then READY=1, and nothing else happens.
            reloadSent = true
            try? started.process.kill(SIGHUP)
          } else if reloadSent, datagram.hasPrefix("READY=1") {
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
    let ready = notifications.filter { $0.contains("READY=1") }
    #expect(ready.count == 2, "once at start-up, once after the reload: \(notifications)")
    let reloading = notifications.firstIndex { $0.hasPrefix("RELOADING=1\nMONOTONIC_USEC=") }
    let reloaded = notifications.lastIndex {
      $0.hasPrefix("READY=1\nSTATUS=reloaded: nothing changed; connected")
    }
    #expect(reloading != nil && reloaded != nil && reloading! < reloaded!, "\(notifications)")
    #expect(
      notifications.contains { $0.contains(": 0 offline pages, 0 pending mutations, 0 rejected") },
      "\(notifications)")
    #expect(notifications.contains { $0.hasPrefix("WATCHDOG=1") }, "\(notifications)")
    #expect(notifications.contains("STOPPING=1\nSTATUS=stopping"), "\(notifications)")
    #expect(daemonStopped?.status == 0 && daemonStopped?.signal == 0, "SIGTERM stops and exits 0: \(log)")
    #expect(brokerStopped?.status == 0, "\(broker.log)")
  }
}
