import ByteBuffers
import EventLoop
import EventLoopTestKit
import Testing
import Web

/// A server with an echo WebSocket route at /ws that records how each socket closed.
private final class EchoWebSocketServer {
  let server: HTTPServer
  let address: SocketAddress
  var closes: [WebSocketCloseInfo] = []
  var opened: [WebSocket] = []
  var onServerClose: ((WebSocketCloseInfo) -> Void)?

  init(loop: Loop, configuration: WebSocketConfiguration = WebSocketConfiguration()) throws {
    let router = HTTPRouter()
    server = HTTPServer(loop: loop, router: router)
    address = try server.listen(on: .inet(host: "127.0.0.1", port: 0))
    router.webSocket(
      "/ws",
      WebSocketRoute(
        configuration: configuration,
        shouldAccept: { request in
          request.head.headers["Authorization"] == "Bearer bad"
            ? .reject(HTTPResponseError(.unauthorized, "bad token").response) : .accept()
        },
        onOpen: { [unowned self] socket in
          self.opened.append(socket)
          socket.onText = { [unowned socket] text in
            if text.hasPrefix("close:") {
              socket.close(code: WebSocketCloseCode(UInt16(text.dropFirst(6))!), reason: "asked to")
            } else {
              socket.send(text: text)
            }
          }
          socket.onBinary = { [unowned socket] data in socket.send(binary: data) }
          socket.onClose = { [unowned self] info in
            self.closes.append(info)
            self.onServerClose?(info)
          }
        }))
  }
}

/// The upgrade request a raw client sends to /ws (RFC 6455's sample key).
private func rawHandshake(version: Int) -> String {
  "GET /ws HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
    + "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: \(version)\r\n\r\n"
}

@Suite struct WebSocketConnectionTests {
  @Test func echoTextAndBinaryAndCloseFromTheClient() throws {
    let loop = try Loop()
    let echo = try EchoWebSocketServer(loop: loop)
    var texts: [String] = []
    var binary: ByteBuffer?
    var clientClose: WebSocketCloseInfo?
    WebSocketClient.connect(loop: loop, to: echo.address, target: "/ws?x=1") { result in
      guard case .success(let socket) = result else {
        Issue.record("connect failed: \(result)")
        echo.server.close()
        return
      }
      socket.onText = { [unowned socket] text in
        texts.append(text)
        if texts.count == 3 { socket.send(binary: ByteBuffer(bytes: [0, 1, 2, 255])) }
      }
      socket.onBinary = { [unowned socket] data in
        binary = data
        socket.close(code: .normalClosure, reason: "bye")
      }
      socket.onClose = { info in clientClose = info }
      socket.send(text: "one")
      socket.send(text: "two ✓")
      socket.send(text: String(repeating: "x", count: 100_000))
    }
    echo.onServerClose = { [unowned echo] _ in echo.server.close() }
    try loop.runUntilDone()
    #expect(texts == ["one", "two ✓", String(repeating: "x", count: 100_000)])
    #expect(binary?.readableBytesArray == [0, 1, 2, 255])
    #expect(clientClose == WebSocketCloseInfo(code: .normalClosure, reason: "bye", initiatedByPeer: false))
    #expect(echo.closes == [WebSocketCloseInfo(code: .normalClosure, reason: "bye", initiatedByPeer: true)])
    #expect(echo.opened.first?.request?.head.queryValue("x") == "1")
    try loop.close()
  }

  /// B6 (memory per idle connection): once a message is read, neither end keeps a receive buffer (the frame
  /// decoder's, a fragmented message's, the handshake's leftover), and a server socket told to keep only some of
  /// its request's header fields keeps those, with the target, and no body.
  @Test func anIdleSocketKeepsNoReceiveBufferAndOnlyTheRequestFieldsItWasToldToKeep() throws {
    let loop = try Loop()
    let echo = try EchoWebSocketServer(loop: loop)
    var client: WebSocket?
    var idleChecked = false
    let headers: HTTPHeaders = [
      "Authorization": "Bearer good", "X-Extra": String(repeating: "e", count: 200),
    ]
    WebSocketClient.connect(loop: loop, to: echo.address, target: "/ws?x=1", headers: headers) { result in
      guard case .success(let socket) = result else {
        Issue.record("connect failed: \(result)")
        echo.server.close()
        return
      }
      client = socket
      socket.onText = { [unowned socket] text in
        // The echo came back: both ends have read a whole message and wait, idle.
        if text.hasPrefix("last") {
          let server = echo.opened.first
          #expect(
            server?.holdsReceiveBuffers == false, "the server's socket keeps a receive buffer while idle")
          #expect(!socket.holdsReceiveBuffers, "the client's socket keeps a receive buffer while idle")
          idleChecked = true
          socket.close(code: .normalClosure, reason: "bye")
        }
      }
      socket.send(text: "first " + String(repeating: "x", count: 5_000))
      socket.send(text: "last")
    }
    echo.onServerClose = { [unowned echo] _ in echo.server.close() }
    try loop.runUntilDone()
    #expect(idleChecked)
    let server = try #require(echo.opened.first)
    #expect(server.request?.headers["X-Extra"] != nil)
    server.keepRequest(headers: ["authorization"])
    #expect(server.request?.headers.map(\.name) == ["Authorization"])
    #expect(server.request?.headers["Authorization"] == "Bearer good")
    #expect(server.request?.head.queryValue("x") == "1")
    #expect(server.request?.body.sharesEmptyStorage == true)
    _ = client
    try loop.close()
  }

  @Test func serverInitiatedCloseReachesTheClientWithCodeAndReason() throws {
    let loop = try Loop()
    let echo = try EchoWebSocketServer(loop: loop)
    var clientClose: WebSocketCloseInfo?
    WebSocketClient.connect(loop: loop, to: echo.address, target: "/ws") { result in
      guard case .success(let socket) = result else { return }
      socket.onClose = { info in
        clientClose = info
        echo.server.close()
      }
      socket.send(text: "close:4001")
    }
    try loop.runUntilDone()
    #expect(
      clientClose
        == WebSocketCloseInfo(code: WebSocketCloseCode(4001), reason: "asked to", initiatedByPeer: true))
    #expect(echo.closes.first?.code == WebSocketCloseCode(4001))
    #expect(echo.closes.first?.initiatedByPeer == false)
    try loop.close()
  }

  @Test func oversizeMessageClosesWith1009() throws {
    let loop = try Loop()
    var configuration = WebSocketConfiguration()
    configuration.maxMessageSize = 1000
    configuration.maxFramePayload = 1000
    let echo = try EchoWebSocketServer(loop: loop, configuration: configuration)
    var clientClose: WebSocketCloseInfo?
    WebSocketClient.connect(loop: loop, to: echo.address, target: "/ws") { result in
      guard case .success(let socket) = result else { return }
      socket.onClose = { info in
        clientClose = info
        echo.server.close()
      }
      socket.send(text: String(repeating: "y", count: 1001))
    }
    try loop.runUntilDone()
    #expect(clientClose?.code == .messageTooBig)
    #expect(clientClose?.initiatedByPeer == true)
    #expect(echo.closes.first?.code == .messageTooBig)
    try loop.close()
  }

  @Test func invalidUTF8AndUnmaskedFramesCloseWith1007And1002() throws {
    let loop = try Loop()
    let echo = try EchoWebSocketServer(loop: loop)
    // Raw clients: a masked text frame carrying invalid UTF-8, and an unmasked frame (clients must mask).
    let handshake =
      rawHandshake(version: 13)
    var invalidUTF8 = ByteBuffer(string: handshake)
    WebSocketFrameEncoder.encode(
      opcode: .text, payload: ByteBuffer(bytes: [0xC0, 0x80]), maskingKey: 0x1234_5678, into: &invalidUTF8)
    var unmasked = ByteBuffer(string: handshake)
    WebSocketFrameEncoder.encode(opcode: .text, payload: ByteBuffer(string: "hi"), into: &unmasked)
    var answers: [[UInt8]] = []
    for bytes in [invalidUTF8, unmasked] {
      ByteStream.connect(loop: loop, to: echo.address) { result in
        guard case .success(let stream) = result else { return }
        var received: [UInt8] = []
        stream.onRead = { received.append(contentsOf: $0) }
        stream.onEnd = { [unowned stream] in
          stream.close()
          answers.append(received)
          if answers.count == 2 { echo.server.close() }
        }
        stream.startReading()
        stream.write(bytes)
      }
    }
    try loop.runUntilDone()
    // Each answer is the 101 response followed by a close frame: 0x88, length, code (big-endian), reason.
    let codes = answers.compactMap { bytes -> UInt16? in
      guard let end = bytes.firstRange(of: Array("\r\n\r\n".utf8))?.upperBound, bytes.count >= end + 4,
        bytes[end] == 0x88
      else { return nil }
      return UInt16(bytes[end + 2]) << 8 | UInt16(bytes[end + 3])
    }
    #expect(codes.sorted() == [1002, 1007])
    #expect(Set(echo.closes.map(\.code)) == [.protocolError, .invalidFramePayloadData])
    try loop.close()
  }

  @Test func refusedUpgradesCarryTheServersAnswer() throws {
    let loop = try Loop()
    let echo = try EchoWebSocketServer(loop: loop)
    var unauthorized: HTTPClientError?
    var wrongVersion = ""
    var notFound: HTTPClientError?
    WebSocketClient.connect(
      loop: loop, to: echo.address, target: "/ws", headers: ["Authorization": "Bearer bad"]
    ) {
      if case .failure(let error) = $0 { unauthorized = error }
      WebSocketClient.connect(loop: loop, to: echo.address, target: "/elsewhere") {
        if case .failure(let error) = $0 { notFound = error }
        rawExchange(
          loop, echo.address,
          rawHandshake(version: 8)
        ) {
          wrongVersion = $0
          echo.server.close()
        }
      }
    }
    try loop.runUntilDone()
    guard case .upgradeRefused(let response)? = unauthorized else {
      Issue.record("expected a refused upgrade, got \(String(describing: unauthorized))")
      return
    }
    #expect(response.head.status.code == 401)
    guard case .upgradeRefused(let missing)? = notFound else {
      Issue.record("expected a refused upgrade, got \(String(describing: notFound))")
      return
    }
    #expect(missing.head.status.code == 404)
    #expect(statusCodes(wrongVersion) == [426])
    #expect(wrongVersion.contains("Sec-WebSocket-Version: 13\r\n"))
    try loop.close()
  }

  @Test func aWebSocketPathAnswersPlainRequestsWith426AndOtherMethodsWith405() throws {
    let loop = try Loop()
    let echo = try EchoWebSocketServer(loop: loop)
    var plain = ""
    var post = ""
    rawExchange(loop, echo.address, "GET /ws HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n") { answer in
      plain = answer
      rawExchange(
        loop, echo.address, "POST /ws HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
      ) {
        post = $0
        echo.server.close()
      }
    }
    try loop.runUntilDone()
    #expect(statusCodes(plain) == [426], "\(plain)")
    #expect(plain.contains("Upgrade: websocket\r\n") && plain.contains("Sec-WebSocket-Version: 13\r\n"))
    #expect(statusCodes(post) == [405], "\(post)")
    #expect(post.contains("Allow: GET\r\n"))
    try loop.close()
  }

  @Test func framesSentInOneTurnLeaveInOneWrite() throws {
    let loop = try Loop()
    let echo = try EchoWebSocketServer(loop: loop)
    var writesForHundredFrames = -1
    var echoed = 0
    WebSocketClient.connect(loop: loop, to: echo.address, target: "/ws") { result in
      guard case .success(let socket) = result else { return }
      socket.onText = { [unowned socket] _ in
        echoed += 1
        if echoed == 100 { socket.close() }
      }
      socket.onClose = { _ in echo.server.close() }
      // Wait until the server side exists, then measure its writes for a burst of 100 frames.
      let timer = LoopTimer(loop: loop)
      timer.start(after: 1, repeatEvery: 1) {
        guard let server = echo.opened.first else { return }
        timer.close()
        let before = server.writeCalls
        let frame = WebSocket.encodeServerFrame(text: "notification")
        for _ in 0..<100 { server.send(encodedFrame: frame) }
        server.onDrain = { [unowned server] in
          writesForHundredFrames = server.writeCalls - before
          server.onDrain = nil
        }
      }
    }
    try loop.runUntilDone()
    #expect(echoed == 100)
    #expect(writesForHundredFrames == 1)
    try loop.close()
  }

  /// B6 (memory per idle connection): a server's sockets share one heartbeat timer instead of keeping one each,
  /// and the timer goes once the last of them closed. (That it still pings and drops a silent peer:
  /// `silentPeerIsPingedAndDroppedWhenItNeverAnswers`, `answeringPeerStaysConnectedAcrossPings`.)
  @Test func aServersSocketsShareOneHeartbeatTimer() throws {
    let loop = try Loop()
    let echo = try EchoWebSocketServer(loop: loop)
    var clients: [ByteStream] = []
    var timersWithOpenSockets: [Int] = []
    func timers() -> Int { loop.liveHandleTypes.filter { $0 == "timer" }.count }
    func connect() {
      ByteStream.connect(loop: loop, to: echo.address) { result in
        guard case .success(let stream) = result else {
          Issue.record("connect failed: \(result)")
          echo.server.close()
          return
        }
        clients.append(stream)
        var answered = false
        stream.onRead = { _ in
          // The 101 came back: the server's socket is open and started.
          guard !answered else { return }
          answered = true
          timersWithOpenSockets.append(timers())
          if clients.count < 3 {
            connect()
          } else {
            for client in clients { client.close() }
            echo.server.close()
          }
        }
        stream.startReading()
        stream.write(ByteBuffer(string: rawHandshake(version: 13)))
      }
    }
    connect()
    try loop.runUntilDone()
    #expect(echo.opened.count == 3)
    #expect(timersWithOpenSockets.count == 3)
    #expect(
      timersWithOpenSockets.first == timersWithOpenSockets.last,
      "timers with 1, 2, 3 sockets open: \(timersWithOpenSockets)")
    // Throws if a handle is left: the shared timer goes with the last socket.
    try loop.close()
  }

  @Test func silentPeerIsPingedAndDroppedWhenItNeverAnswers() throws {
    let loop = try Loop()
    var configuration = WebSocketConfiguration()
    configuration.pingInterval = 20
    configuration.pongTimeout = 20
    let echo = try EchoWebSocketServer(loop: loop, configuration: configuration)
    // A raw client that completes the handshake and then never reads or answers anything.
    var rawStream: ByteStream?
    ByteStream.connect(loop: loop, to: echo.address) { result in
      guard case .success(let stream) = result else { return }
      rawStream = stream
      stream.write(
        ByteBuffer(
          string: rawHandshake(version: 13)))
    }
    echo.onServerClose = { [unowned echo] _ in
      rawStream?.close()
      echo.server.close()
    }
    try loop.runUntilDone()
    #expect(echo.closes.first?.code == .abnormalClosure)
    #expect(echo.closes.first?.reason.contains("no answer to ping") == true)
    try loop.close()
  }

  @Test func answeringPeerStaysConnectedAcrossPings() throws {
    let loop = try Loop()
    var configuration = WebSocketConfiguration()
    // A ping every 10 ms for a second; a pong may take 200 ms (it took over 10 ms under AddressSanitizer on a busy
    // machine). A peer that did not answer would be dropped after about 210 ms, well within the second.
    configuration.pingInterval = 10
    configuration.pongTimeout = 200
    let echo = try EchoWebSocketServer(loop: loop, configuration: configuration)
    var clientClose: WebSocketCloseInfo?
    WebSocketClient.connect(loop: loop, to: echo.address, target: "/ws", configuration: configuration) {
      result in
      guard case .success(let socket) = result else { return }
      socket.onClose = { info in
        clientClose = info
        echo.server.close()
      }
      // Many ping intervals pass; our client answers pings by itself, so nobody is dropped.
      let timer = LoopTimer(loop: loop)
      timer.start(after: 1000) {
        timer.close()
        socket.close(code: .goingAway, reason: "done")
      }
    }
    try loop.runUntilDone()
    #expect(clientClose?.code == .goingAway)
    #expect(echo.closes.first?.code == .goingAway)
    try loop.close()
  }
}
