import ByteBuffers
import EventLoop
import EventLoopTestKit
import Testing
import Web

#if canImport(Glibc)
  import Glibc
#endif

/// What our server-side sockets saw, for checks after the run. Close reports are compared by their
/// description (`4000 server bye (local)`): code, reason and which side started.
private final class ServerSideLog {
  /// Close reports of every server-side socket, in the order they closed.
  var closes: [WebSocketCloseInfo] = []
  /// Text messages received, as our server assembled them (long ones shortened to their size).
  var texts: [String] = []
  var onSocketClosed: (() -> Void)?
}

/// Our WebSocket endpoints for the Python client (`Python/ws_client.py`):
/// - `/echo` echoes text and binary; the text `close CODE REASON` makes it close with that code and reason.
/// - `/small` does the same with a 16 KiB frame limit and a 32 KiB message limit.
private func addEchoEndpoints(to router: HTTPRouter, log: ServerSideLog) {
  func open(_ socket: WebSocket) {
    socket.onText = { [unowned socket] text in
      log.texts.append(text.utf8.count <= 100 ? text : "<\(text.utf8.count) bytes>")
      if text.hasPrefix("close ") {
        let parts = text.split(separator: " ", maxSplits: 2)
        let code = parts.count > 1 ? UInt16(parts[1]) ?? 1000 : 1000
        socket.close(code: WebSocketCloseCode(code), reason: parts.count > 2 ? String(parts[2]) : "")
      } else {
        socket.send(text: text)
      }
    }
    socket.onBinary = { [unowned socket] data in socket.send(binary: data) }
    socket.onClose = { info in
      log.closes.append(info)
      log.onSocketClosed?()
    }
  }
  router.webSocket("/echo", WebSocketRoute(onOpen: open))
  var small = WebSocketConfiguration()
  small.maxFramePayload = 16 * 1024
  small.maxMessageSize = 32 * 1024
  router.webSocket("/small", WebSocketRoute(configuration: small, onOpen: open))
}

/// Runs `ws_client.py BASE scenario` against a test server with the echo endpoints. The run ends once Python
/// has exited and `sockets` server-side sockets have reported their close (or at once if Python failed, so a
/// broken handshake fails the test quickly instead of waiting for the watchdog).
private func runPythonClient(scenario: String, sockets: Int) throws -> (ProcessRun, ServerSideLog) {
  let loop = try Loop()
  let test = try TestServer(loop: loop)
  let log = ServerSideLog()
  addEchoEndpoints(to: test.router, log: log)
  let done = Countdown(sockets + 1) { test.server.close() }
  log.onSocketClosed = { done.done() }
  var run: ProcessRun?
  try runProgram(loop, "python3", pythonScript("ws_client.py") + ["ws://\(test.address!)", scenario]) {
    run = $0
    if $0.status != 0 { test.server.close() }
    done.done()
  }
  try loop.runUntilDone()
  try loop.close()
  let python = try #require(run)
  #expect(python.status == 0, "\(python.output.string)\n\(python.errorOutput.string)")
  #expect(python.output.string.hasSuffix("ALL OK\n"), "\(python.output.string)")
  return (python, log)
}

/// Our WebSocket server against the Python `websockets` client, and our client against its server.
@Suite struct WebSocketInteropTests {
  // MARK: Python client, our server

  @Test func pythonClientEchoesThroughOurServer() throws {
    let (python, log) = try runPythonClient(scenario: "echo", sockets: 1)
    for check in [
      "OK text echo 'hello'", "OK binary echo", "OK 1 MiB text echo", "OK 1 MiB binary echo",
      "OK fragmented text echo", "OK fragmented binary echo", "OK ping answered with pong",
      "OK normal close code",
    ] {
      #expect(python.output.string.contains(check + "\n"), "missing \(check) in:\n\(python.output.string)")
    }
    // The fragments arrived at our side as one message.
    #expect(log.texts.contains("frag1-frag2-ü-frag3"), "\(log.texts)")
    #expect(log.texts.contains("<1048576 bytes>"))
    #expect(log.closes.map(\.description) == ["1000 echo done (peer)"])
  }

  @Test func closeHandshakeCodesAndReasonsAreSeenOnBothSides() throws {
    let (python, log) = try runPythonClient(scenario: "close", sockets: 2)
    for check in [
      "OK server-initiated close code", "OK server-initiated close reason",
      "OK client-initiated close echoed code",
    ] {
      #expect(python.output.string.contains(check + "\n"), "missing \(check) in:\n\(python.output.string)")
    }
    #expect(log.closes.map(\.description) == ["4000 server bye (local)", "4002 client bye (peer)"])
  }

  @Test func oversizeFrameAndMessageCloseWith1009() throws {
    let (python, log) = try runPythonClient(scenario: "oversize", sockets: 2)
    for check in ["OK frame over the limit closes with", "OK fragmented message over the limit closes with"] {
      #expect(python.output.string.contains(check + "\n"), "missing \(check) in:\n\(python.output.string)")
    }
    #expect(log.closes.map(\.code) == [.messageTooBig, .messageTooBig])
    #expect(log.closes.allSatisfy { !$0.initiatedByPeer })
    #expect(log.texts.isEmpty, "nothing over the limit may reach the application: \(log.texts)")
  }

  @Test func unsupportedWebSocketVersionGets426WithTheVersionWeSpeak() throws {
    let loop = try Loop()
    let test = try TestServer(loop: loop)
    let log = ServerSideLog()
    addEchoEndpoints(to: test.router, log: log)
    var run: ProcessRun?
    try runProgram(
      loop, "curl",
      [
        "--silent", "--show-error", "--noproxy", "*", "--max-time", "15", "-i", "-H", "Connection: Upgrade",
        "-H", "Upgrade: websocket", "-H", "Sec-WebSocket-Version: 8", "-H",
        "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==", "http://\(test.address!)/echo",
      ]
    ) {
      run = $0
      test.server.close()
    }
    try loop.runUntilDone()
    try loop.close()
    let curl = try #require(run)
    #expect(curl.status == 0, "\(curl.errorOutput.string)")
    #expect(curl.output.string.hasPrefix("HTTP/1.1 426 "), "\(curl.output.string)")
    #expect(curl.output.string.contains("\r\nSec-WebSocket-Version: 13\r\n"))
    #expect(log.closes.isEmpty)
  }

  // MARK: Our client, Python server

  @Test func ourClientAgainstPythonServer() throws {
    let loop = try Loop()
    let python = try BackgroundProcess(loop: loop, "python3", pythonServer("ws_server.py"))
    let bigText = String(repeating: "0123456789abcdef", count: 65_536)
    let bigBinary = ByteBuffer(bytes: patternBytes(1 << 20, seed: 5))
    let smallBinary = ByteBuffer(bytes: [0, 1, 2, 0xFF, 0x0D, 0x0A])
    var echoes: [String] = []
    var latency: Double?
    var echoClose: WebSocketCloseInfo?
    var serverClose: WebSocketCloseInfo?
    var exit: (status: Int64, signal: Int32)?

    func stopPython() { python.stop { exit = ($0, $1) } }
    func connect(_ port: Int, _ target: String, _ opened: @escaping (WebSocket) -> Void) {
      WebSocketClient.connect(loop: loop, to: .inet(host: "127.0.0.1", port: port), target: target) {
        result in
        switch result {
        case .success(let socket): opened(socket)
        case .failure(let error):
          Issue.record("connect \(target): \(error)")
          stopPython()
        }
      }
    }
    // Step 3: the server closes with 4001 at once; our side echoes and reports the server's code and reason.
    func serverCloses(_ port: Int) {
      connect(port, "/close4001") { socket in
        socket.onClose = { info in
          serverClose = info
          python.whenLine(containing: "CLOSED /close4001") { stopPython() }
        }
      }
    }
    // Step 2: echoes (1 MiB included), a ping from the server, and a close we start.
    func echo(_ port: Int) {
      connect(port, "/echo") { socket in
        func sent() {
          guard echoes.count == 5 else { return }
          socket.close(code: WebSocketCloseCode(4100), reason: "swift done")
        }
        socket.onText = { text in
          if text.hasPrefix("latency ") {
            latency = Double(text.dropFirst(8))
            echoes.append("latency")
          } else {
            echoes.append(text == bigText ? "big text" : text)
          }
          sent()
        }
        socket.onBinary = { data in
          echoes.append(data == bigBinary ? "big binary" : data == smallBinary ? "small binary" : "\(data)")
          sent()
        }
        socket.onClose = { info in
          echoClose = info
          python.whenLine(containing: "CLOSED /echo") { serverCloses(port) }
        }
        socket.send(text: "hello ✓")
        socket.send(binary: smallBinary)
        socket.send(text: bigText)
        socket.send(binary: bigBinary)
        socket.send(text: "ping-me")
      }
    }
    // Step 1: the server announces its port.
    python.whenAnnounced { line in
      guard let port = BackgroundProcess.port(fromAnnouncement: line) else {
        Issue.record("unexpected first line: \(line)")
        return stopPython()
      }
      echo(port)
    }
    python.onUnexpectedExit = {}
    try loop.runUntilDone()
    try loop.close()

    let lines = python.lines
    #expect(exit?.signal == SIGTERM, "the server should have run until killed; stderr: \(python.errorText)")
    #expect(echoes == ["hello ✓", "small binary", "big text", "big binary", "latency"])
    // Our client answered the server's ping by itself: the server measured a round trip.
    #expect((latency ?? 0) > 0, "\(lines)")
    #expect(lines.contains { $0.hasPrefix("PING answered latency=") }, "\(lines)")
    #expect(echoClose?.description == "4100 swift done (local)")
    #expect(lines.contains("CLOSED /echo code=4100 reason=swift done"), "\(lines)")
    #expect(serverClose?.description == "4001 server says bye (peer)")
    // The server received our echo of its code.
    #expect(lines.contains("CLOSED /close4001 code=4001 reason="), "\(lines)")
  }
}
