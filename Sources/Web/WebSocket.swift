import ByteBuffers
import EventLoop

/// Settings of one WebSocket connection. Times are in milliseconds.
public struct WebSocketConfiguration: Sendable {
  /// Largest frame payload accepted; a bigger frame closes with 1009.
  public var maxFramePayload = 1 << 20
  /// Largest message (all fragments) accepted; a bigger one closes with 1009.
  public var maxMessageSize = 4 << 20
  /// A ping goes out after this long without hearing from the peer; 0 turns heartbeats off.
  public var pingInterval: UInt64 = 30_000
  /// After a ping, how long the peer has to answer (with anything) before it is taken for dead and dropped.
  public var pongTimeout: UInt64 = 30_000
  /// How long to wait for the peer's close frame (or, for a client, the server's TCP close) after ours.
  public var closeTimeout: UInt64 = 5_000

  public init() {}
}

/// How a WebSocket ended, as `onClose` reports it once.
public struct WebSocketCloseInfo: Equatable, Sendable, CustomStringConvertible {
  /// The code of the close frame that ended it: the peer's if the peer closed first, ours if we did (1006
  /// when the connection dropped with no close frame, 1005 when the peer's close frame had no code).
  public var code: WebSocketCloseCode
  public var reason: String
  /// Whether the peer started the close (or dropped the connection).
  public var initiatedByPeer: Bool

  public init(code: WebSocketCloseCode, reason: String, initiatedByPeer: Bool) {
    self.code = code
    self.reason = reason
    self.initiatedByPeer = initiatedByPeer
  }

  public var description: String {
    "\(code.rawValue)\(reason.isEmpty ? "" : " \(reason)") (\(initiatedByPeer ? "peer" : "local"))"
  }
}

/// A WebSocket connection (RFC 6455), server or client side, over a `ByteStream`.
///
/// ```
///   open ──close(code)──▶ closeSent ──peer's close──▶ closed
///    │                        └──── closeTimeout ────▶ closed
///    ├──peer's close──▶ (echo it) ──▶ closed
///    ├──protocol error──▶ (close 1002/1007/1009) ──▶ closed
///    └──EOF, reset, heartbeat timeout──▶ closed (1006)
/// ```
///
/// Frames sent in one loop turn are written together (the stream coalesces per turn). Pings are answered
/// automatically; a peer silent for `pingInterval` is pinged and, if still silent `pongTimeout` later, dropped.
///
/// Ownership: an open socket keeps itself alive (its stream holds it) until it is closed.
///
/// Threading: loop thread only.
public final class WebSocket {
  public let role: WebSocketRole
  public let configuration: WebSocketConfiguration
  /// The upgrade request (server side), for its path, headers and query.
  public let request: HTTPRequest?
  let stream: ByteStream
  private var decoder: WebSocketFrameDecoder
  private var assembler: WebSocketMessageAssembler
  private var state = State.open
  private var heartbeat: LoopTimer?
  private var closeTimer: LoopTimer?
  private var lastHeard: UInt64
  private var pingOutstanding = false
  private var leftover: ByteBuffer
  private var closeInfo: WebSocketCloseInfo?

  private enum State { case open, closeSent, closed }

  /// A text message arrived.
  public var onText: ((String) -> Void)?
  /// A binary message arrived.
  public var onBinary: ((ByteBuffer) -> Void)?
  /// A pong arrived (pings are answered automatically).
  public var onPong: ((ByteBuffer) -> Void)?
  /// The connection is gone; called exactly once, after the TCP connection closed.
  public var onClose: ((WebSocketCloseInfo) -> Void)?
  /// Bytes read from the connection, the opening handshake included (final once closed).
  public var bytesReceived: Int { stream.bytesRead }
  /// Bytes handed to the kernel for the connection, the opening handshake included (final once closed).
  public var bytesSent: Int { stream.bytesWritten }
  /// Everything queued has been handed to the kernel.
  public var onDrain: (() -> Void)? {
    didSet { stream.onDrain = onDrain }
  }

  init(
    stream: ByteStream, role: WebSocketRole, configuration: WebSocketConfiguration, request: HTTPRequest?,
    leftover: ByteBuffer
  ) {
    self.stream = stream
    self.role = role
    self.configuration = configuration
    self.request = request
    self.leftover = leftover
    decoder = WebSocketFrameDecoder(role: role, maxFramePayload: configuration.maxFramePayload)
    assembler = WebSocketMessageAssembler(maxMessageSize: configuration.maxMessageSize)
    lastHeard = stream.loop.now
  }

  /// Starts reading (and processes bytes that arrived with the handshake). Called once the owner has set its
  /// callbacks.
  func start() {
    // The stream's callbacks hold the socket: it lives while open, whoever else holds it.
    stream.onRead = { bytes in self.received(bytes) }
    stream.onEnd = { self.connectionLost("connection closed without a close frame") }
    stream.onError = { error in self.connectionLost(error.description) }
    stream.startReading()
    if configuration.pingInterval > 0 {
      let timer = LoopTimer(loop: stream.loop)
      heartbeat = timer
      let period = Swift.max(configuration.pingInterval / 4, 1)
      timer.start(after: period, repeatEvery: period) { [unowned self] in self.checkHeartbeat() }
    }
    if !leftover.isEmpty {
      let bytes = leftover
      leftover = ByteBuffer(capacity: 0)
      bytes.withUnsafeReadableBytes { received($0) }
    }
  }

  /// Stops reading from the connection: the kernel's buffers fill and the peer is flow-controlled (how a load test
  /// plays a device that stopped reading). Nothing is delivered, pings included, until `resumeReading()`.
  public func pauseReading() { stream.stopReading() }

  /// Reads again after `pauseReading()`.
  public func resumeReading() {
    guard state != .closed else { return }
    stream.startReading()
  }

  /// The connection's socket descriptor (for socket options), nil once closed.
  public var fileDescriptor: Int32? { stream.fileDescriptor }

  /// The loop this socket runs on.
  public var loop: Loop { stream.loop }
  /// Whether messages can still be sent.
  public var isOpen: Bool { state == .open }
  /// Bytes queued for the peer and not yet taken by the kernel.
  public var queuedBytes: Int { stream.queuedBytes }
  /// Write system calls made for this socket (frames queued in one loop turn share one).
  public var writeCalls: Int { stream.writeCalls }
  /// The peer's address (TCP only).
  public var peerAddress: SocketAddress? { stream.peerAddress }
  /// Bytes read from and written to the connection so far, handshake and framing included (for the load
  /// harness's bytes on the wire).
  public var bytesRead: Int { stream.bytesRead }
  public var bytesWritten: Int { stream.bytesWritten }

  // MARK: Sending

  /// Sends a text message.
  public func send(text: String) {
    var text = text
    text.withUTF8 { send(.text, UnsafeRawBufferPointer($0)) }
  }

  /// Sends a binary message.
  public func send(binary: ByteBuffer) {
    binary.withUnsafeReadableBytes { send(.binary, $0) }
  }

  /// Sends a ping (payload at most 125 bytes).
  public func sendPing(_ payload: ByteBuffer = ByteBuffer(capacity: 0)) {
    guard payload.readableBytes <= 125 else { return }
    payload.withUnsafeReadableBytes { send(.ping, $0) }
  }

  /// Sends a frame encoded once for many server-side sockets (`WebSocket.encodeServerFrame`), without copying.
  public func send(encodedFrame: ByteBuffer) {
    precondition(role == .server, "a client must mask every frame")
    guard state == .open else { return }
    stream.write(encodedFrame)
  }

  /// An unmasked frame, as a server sends it: encode once, `send(encodedFrame:)` to many sockets.
  public static func encodeServerFrame(text: String) -> ByteBuffer {
    var text = text
    var buffer = ByteBuffer(capacity: text.utf8.count + 10)
    text.withUTF8 {
      WebSocketFrameEncoder.encode(opcode: .text, payload: UnsafeRawBufferPointer($0), into: &buffer)
    }
    return buffer
  }

  private func send(_ opcode: WebSocketOpcode, _ payload: UnsafeRawBufferPointer) {
    guard state == .open else { return }
    var frame = ByteBuffer(capacity: payload.count + 14)
    WebSocketFrameEncoder.encode(
      opcode: opcode, payload: payload, maskingKey: role == .client ? Crypto.randomUInt32() : nil,
      into: &frame)
    stream.write(frame)
  }

  // MARK: Closing

  /// Starts the closing handshake with `code` and `reason`; `onClose` follows once the peer answered (or the
  /// close timeout passed). Messages that arrive meanwhile are dropped.
  public func close(code: WebSocketCloseCode = .normalClosure, reason: String = "") {
    guard state == .open else { return }
    sendClose(code, reason)
    closeInfo = WebSocketCloseInfo(code: code, reason: reason, initiatedByPeer: false)
    state = .closeSent
    let timer = LoopTimer(loop: stream.loop)
    closeTimer = timer
    timer.start(after: configuration.closeTimeout) { [unowned self] in self.finish() }
  }

  private func sendClose(_ code: WebSocketCloseCode?, _ reason: String) {
    var frame = ByteBuffer(capacity: 140)
    let payload =
      code.map { WebSocketFrameEncoder.closePayload(code: $0, reason: reason) } ?? ByteBuffer(capacity: 0)
    WebSocketFrameEncoder.encode(
      opcode: .close, payload: payload, maskingKey: role == .client ? Crypto.randomUInt32() : nil,
      into: &frame)
    stream.write(frame)
  }

  /// Drops the TCP connection without a closing handshake (the peer sees a reset or EOF); `onClose` reports 1006.
  public func abort(reason: String = "aborted") {
    guard state != .closed else { return }
    closeInfo = WebSocketCloseInfo(code: .abnormalClosure, reason: reason, initiatedByPeer: false)
    state = .closed
    stopTimers()
    stream.close { [self] in self.reportClose() }
  }

  /// Ends the connection after our close frame went out or the peer's arrived: a server closes TCP itself,
  /// a client waits briefly for the server to do so (RFC 6455 7.1.1).
  private func finish() {
    guard state != .closed else { return }
    state = .closed
    stopTimers()
    stream.onRead = nil
    let done = { [self] in self.reportClose() }
    stream.closeGracefully(linger: role == .server ? 1_000 : configuration.closeTimeout, then: done)
  }

  private func connectionLost(_ reason: String) {
    guard state != .closed else { return }
    if closeInfo == nil || state == .open {
      closeInfo = WebSocketCloseInfo(code: .abnormalClosure, reason: reason, initiatedByPeer: true)
    }
    state = .closed
    stopTimers()
    stream.close { [self] in self.reportClose() }
  }

  private func reportClose() {
    guard let info = closeInfo else { return }
    closeInfo = nil
    let callback = onClose
    onText = nil
    onBinary = nil
    onPong = nil
    onClose = nil
    callback?(info)
  }

  private func stopTimers() {
    heartbeat?.close()
    heartbeat = nil
    closeTimer?.close()
    closeTimer = nil
  }

  // MARK: Receiving

  private func received(_ bytes: UnsafeRawBufferPointer) {
    lastHeard = stream.loop.now
    pingOutstanding = false
    decoder.append(bytes)
    do {
      while state != .closed, let frame = try decoder.nextFrame() {
        guard let message = try assembler.push(frame) else { continue }
        handle(message)
      }
    } catch {
      fail(error)
    }
  }

  private func handle(_ message: WebSocketMessage) {
    switch message {
    case .text(let text):
      if state == .open { onText?(text) }
    case .binary(let data):
      if state == .open { onBinary?(data) }
    case .ping(let payload):
      payload.withUnsafeReadableBytes { send(.pong, $0) }
    case .pong(let payload):
      onPong?(payload)
    case .close(let code, let reason):
      if state == .open {
        // Echo the peer's code (RFC 6455 5.5.1), then end.
        sendClose(code, "")
        closeInfo = WebSocketCloseInfo(code: code ?? .noStatusReceived, reason: reason, initiatedByPeer: true)
      }
      finish()
    }
  }

  /// A protocol violation by the peer: close with the error's code and reason, and drop what follows.
  private func fail(_ error: WebSocketError) {
    guard state != .closed else { return }
    if state == .open {
      sendClose(error.closeCode, error.reason)
      closeInfo = WebSocketCloseInfo(code: error.closeCode, reason: error.reason, initiatedByPeer: false)
    }
    finish()
  }

  private func checkHeartbeat() {
    guard state == .open else { return }
    let silent = stream.loop.now &- lastHeard
    if pingOutstanding {
      if silent >= configuration.pingInterval + configuration.pongTimeout {
        connectionLost("no answer to ping within \(configuration.pongTimeout) ms")
      }
    } else if silent >= configuration.pingInterval {
      pingOutstanding = true
      send(.ping, UnsafeRawBufferPointer(start: nil, count: 0))
    }
  }
}
