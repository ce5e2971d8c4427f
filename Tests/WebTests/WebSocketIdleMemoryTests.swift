import ByteBuffers
import EventLoop
import EventLoopTestKit
import Testing
import Web

/// Records what a socket tells its delegate, in order.
private final class RecordingDelegate: WebSocketDelegate {
  var events: [String] = []
  var onClosed: (() -> Void)?

  func webSocketReceived(text: String) { events.append("text \(text)") }
  func webSocketReceived(binary: ByteBuffer) { events.append("binary \(binary.readableBytes)") }
  func webSocketDrained() {}
  func webSocketClosed(_ info: WebSocketCloseInfo) {
    events.append("closed \(info.code.rawValue)")
    onClosed?()
  }
}

/// B6 (memory per idle connection, docs/benchmarks.md): what ties an open server socket to its route, its stream,
/// its owner and its server costs it no allocation of its own.
@Suite struct WebSocketIdleMemoryTests {
  /// Two sockets of one route, open and idle, with an owner that is their delegate: they share the route's one
  /// copy of its configuration; no closure holds them `unowned` (their stream's callbacks capture them strongly,
  /// with no context of their own); they keep no box for closures nobody set; and their streams' close callbacks
  /// hold no weak reference (to the server or to the finished HTTP connection, whose side table it kept alive).
  @Test func openSocketsShareTheirRoutesConfigurationAndKeepNoClosureContexts() throws {
    let loop = try Loop()
    let test = try TestServer(loop: loop)
    let (router, server, address) = (test.router, test.server, test.address!)
    let owner = RecordingDelegate()
    var opened: [WebSocket] = []
    router.webSocket(
      "/ws",
      WebSocketRoute(onOpen: { socket in
        socket.delegate = owner
        opened.append(socket)
      }))
    let weakReferencesBefore = _getWeakRetainCount(server)
    var clients: [WebSocket] = []
    var checked = false
    func connect() {
      WebSocketClient.connect(loop: loop, to: address, target: "/ws") { result in
        guard case .success(let client) = result else {
          Issue.record("connect failed: \(result)")
          server.close()
          return
        }
        clients.append(client)
        guard clients.count == 2 else { return connect() }
        // Both server sockets are open, started and idle.
        #expect(opened.count == 2)
        let route = router.webSocketRoute(for: "/ws")
        #expect(
          opened.allSatisfy { $0.sharedConfiguration === route?.sharedConfiguration },
          "every socket shares its route's configuration")
        for socket in opened {
          #expect(_getUnownedRetainCount(socket) == 1, "a closure holds an open socket unowned")
          #expect(!socket.holdsCallbacks, "a socket keeps a box for closures nobody set")
          #expect(socket.delegate === owner)
        }
        #expect(server.upgradedCount == 2)
        #expect(
          _getWeakRetainCount(server) == weakReferencesBefore,
          "an upgraded stream's close callback holds the server weakly (and its connection)")
        checked = true
        for client in clients { client.close() }
      }
    }
    var closed = 0
    owner.onClosed = {
      closed += 1
      if closed == 2 { server.close() }
    }
    connect()
    try loop.runUntilDone()
    #expect(checked)
    #expect(owner.events == ["closed 1000", "closed 1000"])
    #expect(
      opened.allSatisfy { $0.delegate == nil }, "a socket forgets its delegate once it reported the close")
    #expect(server.upgradedCount == 0 && server.openConnectionCount == 0)
    #expect(server.openConnectionCount(fromPeer: "127.0.0.1") == 0)
    // The test's own cycles: the route's closure holds `opened` and `owner`, whose callback holds the server,
    // which holds the route (LeakSanitizer).
    opened = []
    owner.onClosed = nil
    try loop.close()
  }

  /// A socket tells its delegate what it tells its closures, the delegate first: text and binary messages, then
  /// the close, once.
  @Test func theDelegateHearsMessagesAndTheCloseBeforeTheClosures() throws {
    let loop = try Loop()
    let test = try TestServer(loop: loop)
    let (router, server, address) = (test.router, test.server, test.address!)
    let owner = RecordingDelegate()
    router.webSocket(
      "/ws",
      // The server weakly: the route's closure would otherwise hold the server that holds the route.
      WebSocketRoute(onOpen: { [weak server] socket in
        socket.delegate = owner
        socket.onText = { owner.events.append("closure text \($0)") }
        socket.onBinary = { owner.events.append("closure binary \($0.readableBytes)") }
        socket.onClose = { _ in
          owner.events.append("closure closed")
          server?.close()
        }
      }))
    WebSocketClient.connect(loop: loop, to: address, target: "/ws") { result in
      guard case .success(let client) = result else {
        Issue.record("connect failed: \(result)")
        server.close()
        return
      }
      client.send(text: "one")
      client.send(binary: ByteBuffer(bytes: [1, 2, 3]))
      client.close(code: .goingAway, reason: "bye")
    }
    try loop.runUntilDone()
    #expect(
      owner.events == [
        "text one", "closure text one", "binary 3", "closure binary 3", "closed 1001", "closure closed",
      ])
    try loop.close()
  }
}
