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
  /// Bytes queued to the peer (our answers to its frames, pongs included, and anything the owner sends) beyond
  /// which no more of its frames are handled, and the connection not read, until the queue is written. The queue
  /// can exceed it by one answer.
  public var maxQueuedBytes = 4 << 20
  /// How long a frame, or a fragmented message, may take to arrive from its first byte; then the connection
  /// closes with 1008 and `messageTimeoutReason`. 0 for no limit. Time the connection is not read (paused by its
  /// owner or by `maxQueuedBytes`) does not count.
  public var messageTimeout: UInt64 = 30_000
  /// The reason of the 1008 close when `messageTimeout` passes.
  public var messageTimeoutReason = "message not completed in time"
  /// How long the peer may take no byte of what is queued for it before it is dropped (1006); 0 for no limit
  /// (`ByteStream.writeStallTimeout`).
  public var writeStallTimeout: UInt64 = 60_000
  /// Frames handled for one connection in one turn of the loop; past it the connection yields (is not read)
  /// until the next turn, so that a peer sending many small frames, pings or bad messages, even one that reads
  /// every answer, cannot hold the loop while the others wait. (libuv reads up to 32 × 64 KiB of a ready socket
  /// in one turn: some 350,000 empty frames, each answered.)
  public var maxFramesPerTurn = 64

  public init() {}
}

/// One copy of a `WebSocketConfiguration` for every socket that uses it: the sockets of a route (`WebSocketRoute`)
/// share their route's, so an open socket holds a reference to its settings, not a copy of them (B6: memory per
/// idle connection, docs/benchmarks.md).
///
/// Immutable; safe to share across threads.
public final class SharedWebSocketConfiguration: Sendable {
  public let value: WebSocketConfiguration

  public init(_ value: WebSocketConfiguration) { self.value = value }
}

/// What a socket's owner hears from it, as one object instead of the closure properties (`onText`, `onBinary`,
/// `onDrain`, `onClose`): an owner that keeps many sockets open (a broker's device streams) then costs no closure
/// context per callback and socket. The socket holds its delegate weakly, tells it before the matching closure
/// (both run when both are set) and forgets it once it reported the close.
///
/// Threading: called on the socket's loop thread.
public protocol WebSocketDelegate: AnyObject {
  /// A text message arrived.
  func webSocketReceived(text: String)
  /// A binary message arrived.
  func webSocketReceived(binary: ByteBuffer)
  /// Everything queued has been handed to the kernel.
  func webSocketDrained()
  /// The connection is gone; called exactly once, after the TCP connection closed.
  func webSocketClosed(_ info: WebSocketCloseInfo)
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
///    ├──message not complete within messageTimeout──▶ (close 1008) ──▶ closed
///    └──EOF, reset, heartbeat timeout, write stall──▶ closed (1006)
/// ```
///
/// Frames sent in one loop turn are written together (the stream coalesces per turn). Pings are answered
/// automatically; a peer from which no complete frame came for `pingInterval` is pinged and, if still silent
/// `pongTimeout` later, dropped (the bytes of an unfinished frame are no sign of life: `messageTimeout` bounds
/// them).
///
/// Reading: frames are handled while the owner has not paused reading and at most `maxQueuedBytes` wait to be
/// written; otherwise the connection is not read (bytes already read wait in the decoder, at most one read
/// beyond a frame) until the queue drains or the owner resumes. So a peer that sends and never reads costs at
/// most `maxQueuedBytes` plus one answer, whatever it sends.
///
/// Ownership: an open socket keeps itself alive (its stream holds it) until it is closed.
///
/// Threading: loop thread only.
public final class WebSocket {
  // Stored properties are declared wide ones first and the narrow ones last, packed into the words that
  // `closeInfo` and `messageTimeLeft` leave: Swift lays a class out in declaration order, and a `Bool` between
  // two words costs a word (B6: an idle server socket is ~0.4 KB).

  /// Its settings, shared with the other sockets of its route.
  public let sharedConfiguration: SharedWebSocketConfiguration
  public var configuration: WebSocketConfiguration { sharedConfiguration.value }
  /// The upgrade request (server side), for its path, headers and query; what is left of it after
  /// `keepRequest(headers:)`.
  public private(set) var request: HTTPRequest?
  let stream: ByteStream
  private var decoder: WebSocketFrameDecoder
  private var assembler: WebSocketMessageAssembler
  private var heartbeat: LoopTimer?
  /// The server's timer for the heartbeats of its sockets, used instead of `heartbeat` when given.
  private weak var sharedHeartbeat: WebSocketHeartbeat?
  private var closeTimer: LoopTimer?
  private var lastHeard: UInt64
  private var leftover: ByteBuffer
  /// When the frame or message under way must be complete (loop time), while one is and the connection is read.
  private var messageDeadline: UInt64?
  private var messageTimer: LoopTimer?
  /// Frames handled in loop turn `turnStarted` (`Loop.turns`), against `maxFramesPerTurn`.
  private var framesThisTurn = 0
  private var turnStarted: UInt64 = .max
  /// The owner's closures, in a box of their own made when the first is set: a socket whose owner is its
  /// `delegate` (a broker's device stream) keeps one word for them instead of five closures (80 bytes, B6).
  private var callbacks: Callbacks?
  private var closeInfo: WebSocketCloseInfo?
  public let role: WebSocketRole
  private var state = State.open
  private var pingOutstanding = false
  /// The owner paused reading (`pauseReading`).
  private var pausedByOwner = false
  /// More than `maxQueuedBytes` wait to be written.
  private var backpressured = false
  /// Within `handleBuffered` (which the owner's callbacks may reenter through `resumeReading`).
  private var handling = false
  /// Set when `maxFramesPerTurn` was reached: no frame is handled, and the connection not read, until the next
  /// turn (`Loop.runNextTurn`).
  private var yielding = false
  /// What was left of `messageDeadline`'s time when reading paused.
  private var messageTimeLeft: UInt64?
  /// This socket's place in `sharedHeartbeat`, -1 when not in it.
  var heartbeatSlot: Int32 = -1

  private enum State { case open, closeSent, closed }

  private final class Callbacks {
    var onText: ((String) -> Void)?
    var onBinary: ((ByteBuffer) -> Void)?
    var onPong: ((ByteBuffer) -> Void)?
    var onClose: ((WebSocketCloseInfo) -> Void)?
    var onDrain: (() -> Void)?
  }

  /// The box for a closure being set; nil when clearing one that was never set.
  private func callbacks(creating: Bool) -> Callbacks? {
    if let callbacks { return callbacks }
    guard creating else { return nil }
    let made = Callbacks()
    callbacks = made
    return made
  }

  /// A text message arrived.
  public var onText: ((String) -> Void)? {
    get { callbacks?.onText }
    set { callbacks(creating: newValue != nil)?.onText = newValue }
  }
  /// A binary message arrived.
  public var onBinary: ((ByteBuffer) -> Void)? {
    get { callbacks?.onBinary }
    set { callbacks(creating: newValue != nil)?.onBinary = newValue }
  }
  /// A pong arrived (pings are answered automatically).
  public var onPong: ((ByteBuffer) -> Void)? {
    get { callbacks?.onPong }
    set { callbacks(creating: newValue != nil)?.onPong = newValue }
  }
  /// The connection is gone; called exactly once, after the TCP connection closed.
  public var onClose: ((WebSocketCloseInfo) -> Void)? {
    get { callbacks?.onClose }
    set { callbacks(creating: newValue != nil)?.onClose = newValue }
  }
  /// Everything queued has been handed to the kernel.
  public var onDrain: (() -> Void)? {
    get { callbacks?.onDrain }
    set { callbacks(creating: newValue != nil)?.onDrain = newValue }
  }
  /// Whether the socket holds a box for its owner's closures: only once one was set (tests; B6).
  public var holdsCallbacks: Bool { callbacks != nil }
  /// Hears what the closures above hear, told first (`WebSocketDelegate`). Held weakly; cleared once the close is
  /// reported.
  public weak var delegate: (any WebSocketDelegate)?
  /// Bytes read from the connection, the opening handshake included (final once closed).
  public var bytesReceived: Int { stream.bytesRead }
  /// Bytes handed to the kernel for the connection, the opening handshake included (final once closed).
  public var bytesSent: Int { stream.bytesWritten }

  init(
    stream: ByteStream, role: WebSocketRole, configuration: SharedWebSocketConfiguration,
    request: HTTPRequest?,
    leftover: ByteBuffer, heartbeat: WebSocketHeartbeat? = nil
  ) {
    self.stream = stream
    self.role = role
    self.sharedConfiguration = configuration
    let configuration = configuration.value
    self.request = request
    self.leftover = leftover
    decoder = WebSocketFrameDecoder(role: role, maxFramePayload: configuration.maxFramePayload)
    assembler = WebSocketMessageAssembler(maxMessageSize: configuration.maxMessageSize)
    lastHeard = stream.loop.now
    sharedHeartbeat = heartbeat
  }

  /// Starts reading (and processes bytes that arrived with the handshake). Called once the owner has set its
  /// callbacks.
  func start() {
    // The stream's callbacks hold the socket: it lives while open, whoever else holds it. Each captures the
    // socket alone, and strongly, so that it needs no closure context of its own (a closure whose one capture is
    // a strong reference uses that object as its context; an `unowned` capture takes a 32-byte box, B6); the
    // stream drops them when it closes.
    stream.onRead = { bytes in self.received(bytes) }
    stream.onEnd = { self.connectionLost("connection closed without a close frame") }
    stream.onError = { error in self.connectionLost(error.description) }
    stream.onDrain = { self.drained() }
    stream.writeStallTimeout = configuration.writeStallTimeout
    stream.onWriteStall = {
      self.connectionLost("the peer took no byte for \(self.configuration.writeStallTimeout) ms")
    }
    stream.startReading()
    if configuration.pingInterval > 0, let shared = sharedHeartbeat {
      shared.add(self)
    } else if configuration.pingInterval > 0 {
      let timer = LoopTimer(loop: stream.loop)
      heartbeat = timer
      let period = Swift.max(configuration.pingInterval / 4, 1)
      timer.start(after: period, repeatEvery: period) { [unowned self] in self.checkHeartbeat() }
    }
    // The handshake's leftover buffer is released even when empty: an idle socket keeps no buffer.
    let bytes = leftover
    leftover = .empty
    if !bytes.isEmpty { bytes.withUnsafeReadableBytes { received($0) } }
  }

  /// Keeps of the upgrade request only its method, target and version and the header fields named (compared
  /// case-insensitively), and drops its body: for an owner that keeps the socket open for long and needs the
  /// request later only for those (a broker re-checking a device's credentials on reload). Each idle connection
  /// then holds one or two strings instead of every header the client sent.
  public func keepRequest(headers names: [String]) {
    request = request?.keeping(headers: names)
  }

  /// Whether the socket holds a receive buffer of its own: only while a frame or a fragmented message is
  /// partly read. An idle socket holds none (B6: memory per idle connection).
  public var holdsReceiveBuffers: Bool {
    decoder.holdsBuffer || assembler.holdsBuffer || !leftover.sharesEmptyStorage
  }

  /// Stops reading from the connection: the kernel's buffers fill and the peer is flow-controlled (how a load test
  /// plays a device that stopped reading). Nothing more is delivered, pings included, until `resumeReading()`:
  /// frames already read wait.
  public func pauseReading() {
    pausedByOwner = true
    updateReading()
  }

  /// Reads again after `pauseReading()`: frames that waited are delivered first, before this returns.
  public func resumeReading() {
    guard state != .closed, pausedByOwner else { return }
    pausedByOwner = false
    handleBuffered()
    updateReading()
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

  /// `send(encodedFrame:)`, written at once when nothing else of this socket waits for the kernel
  /// (`ByteStream.writeNow`): for the last frame of a turn to this socket, as a fan-out's one frame to each of many
  /// sockets, which then costs one system call each and no queue. Frames sent in a burst this way each take a
  /// system call of their own: a burst is better sent with `send(encodedFrame:)`, gathered at the end of the turn.
  public func sendNow(encodedFrame: ByteBuffer) {
    precondition(role == .server, "a client must mask every frame")
    guard state == .open else { return }
    stream.writeNow(encodedFrame)
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
    stream.onWriteStall = nil
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
    let told = delegate
    callbacks = nil
    delegate = nil
    told?.webSocketClosed(info)
    callback?(info)
  }

  private func stopTimers() {
    heartbeat?.close()
    heartbeat = nil
    sharedHeartbeat?.remove(self)
    closeTimer?.close()
    closeTimer = nil
    messageTimer?.close()
    messageTimer = nil
  }

  // MARK: Receiving

  private func received(_ bytes: UnsafeRawBufferPointer) {
    let turn = stream.loop.turns
    if turn != turnStarted {
      turnStarted = turn
      framesThisTurn = 0
    }
    decoder.append(bytes)
    handleBuffered()
    updateReading()
  }

  /// Whether frames may be handled now: open (or closing), not paused, and the queue within its bound.
  private var mayHandle: Bool { state != .closed && !pausedByOwner && !backpressured && !yielding }

  /// Handles the complete frames the decoder holds, while allowed; then times what is left unfinished.
  private func handleBuffered() {
    guard !handling else { return }
    handling = true
    defer { handling = false }
    do {
      while mayHandle, let frame = try decoder.nextFrame() {
        // A complete frame is a sign of life; the bytes of an unfinished one are not.
        lastHeard = stream.loop.now
        pingOutstanding = false
        let message = try assembler.push(frame)
        if !assembler.isAssembling { messageFinished() }
        if let message { handle(message) }
        if stream.queuedBytes > sharedConfiguration.value.maxQueuedBytes { backpressured = true }
        framesThisTurn += 1
        if framesThisTurn >= sharedConfiguration.value.maxFramesPerTurn && state != .closed { yieldTurn() }
      }
    } catch {
      fail(error)
      return
    }
    timeUnfinishedMessage()
  }

  /// Lets the loop serve the others: nothing more of this connection until the next turn.
  private func yieldTurn() {
    yielding = true
    stream.loop.runNextTurn { [weak self] in
      guard let self, self.yielding else { return }
      self.yielding = false
      self.framesThisTurn = 0
      self.turnStarted = self.stream.loop.turns
      guard self.state != .closed else { return }
      self.handleBuffered()
      self.updateReading()
    }
  }

  /// Reads while frames may be handled, and stops otherwise (the peer is then flow-controlled by TCP).
  private func updateReading() {
    guard state != .closed else { return }
    if mayHandle {
      stream.startReading()
      resumeMessageClock()
    } else {
      stream.stopReading()
      pauseMessageClock()
    }
  }

  private func drained() {
    if backpressured {
      backpressured = false
      handleBuffered()
      updateReading()
    }
    delegate?.webSocketDrained()
    onDrain?()
  }

  // MARK: Message deadline

  /// A message (or a control frame) ended: nothing is under way.
  private func messageFinished() {
    messageDeadline = nil
    messageTimeLeft = nil
    messageTimer?.stop()
  }

  /// Starts the clock of a frame or message left unfinished by what was read, from now (its first byte came in
  /// this read) unless it runs already.
  private func timeUnfinishedMessage() {
    guard sharedConfiguration.value.messageTimeout > 0, state == .open, mayHandle, messageDeadline == nil,
      messageTimeLeft == nil, decoder.bufferedBytes > 0 || assembler.isAssembling
    else { return }
    startMessageClock(configuration.messageTimeout)
  }

  private func startMessageClock(_ time: UInt64) {
    messageDeadline = stream.loop.now + time
    messageTimeLeft = nil
    let timer = messageTimer ?? LoopTimer(loop: stream.loop)
    messageTimer = timer
    timer.start(after: time) { [unowned self] in self.messageTimedOut() }
  }

  /// Time the connection is not read is not the peer's: keep what is left of its time.
  private func pauseMessageClock() {
    guard let deadline = messageDeadline else { return }
    let now = stream.loop.now
    messageTimeLeft = deadline > now ? deadline - now : 1
    messageDeadline = nil
    messageTimer?.stop()
  }

  private func resumeMessageClock() {
    guard let left = messageTimeLeft, state == .open else { return }
    startMessageClock(left)
  }

  private func messageTimedOut() {
    guard state == .open, mayHandle, messageDeadline != nil else { return }
    messageDeadline = nil
    fail(WebSocketError(.policyViolation, configuration.messageTimeoutReason))
  }

  private func handle(_ message: WebSocketMessage) {
    switch message {
    case .text(let text):
      guard state == .open else { return }
      delegate?.webSocketReceived(text: text)
      // The delegate may have closed the socket.
      if state == .open { onText?(text) }
    case .binary(let data):
      guard state == .open else { return }
      delegate?.webSocketReceived(binary: data)
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

  /// Pings a peer silent for `pingInterval`, drops one silent `pongTimeout` after that; every quarter of the
  /// interval, by its own timer or its server's (`WebSocketHeartbeat`).
  func checkHeartbeat() {
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
