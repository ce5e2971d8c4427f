import ByteBuffers
import EventLoop

/// One HTTP connection of an `HTTPServer`.
///
/// ```
///            bytes                       complete request            response(s) written
///   idle ────────────▶ reading ─────────────────────────▶ handling ───────────────────▶ idle
///    │  idleTimeout       │ requestReadTimeout → 408           │ (pipelined requests queue up
///    ▼                    ▼ parse error → 400/413/431/505      │  to maxPipelinedRequests; their
///  closed              closing ◀──── Connection: close ────────┘  responses go out in order)
///                         │ answers written, lingering     │ upgrade accepted
///                         ▼                                ▼
///                       closed                  WebSocket owns the stream
/// ```
///
/// Bytes are parsed straight from the loop's read buffer; only bytes that cannot be parsed yet (pipelining
/// backpressure) are copied. Responses complete in any order but are written in request order.
///
/// Bounds: each request must arrive within `requestReadTimeout` of its first byte; no request is parsed while
/// more than `maxQueuedResponseBytes` wait to be written (reading stops until they are); a connection is idle
/// only with nothing to write, and a peer that takes no byte for `writeStallTimeout` is dropped.
///
/// Threading: loop thread only.
final class HTTPServerConnection {
  private let server: HTTPServer
  let stream: ByteStream
  /// The peer's host, as the server counts connections per peer (nil for a Unix socket).
  private let peer: String?
  private let decoder: HTTPRequestDecoder
  private let timer: LoopTimer
  private var timerMode = TimerMode.none
  /// Bytes read but not parsed yet (parsing paused for pipelining backpressure).
  private var unparsed = ByteBuffer(capacity: 0)
  /// Responders in request order; the first one is the one being written.
  private var inFlight: [ResponseSlot] = []
  private var inFlightHead = 0
  /// No more requests are read: an error, `Connection: close`, an upgrade, or the server closing.
  private var acceptingRequests = true
  private var closed = false
  private var upgrade: (request: HTTPRequest, route: WebSocketRoute)?
  /// Whether `100 Continue` went out for the request whose body is arriving.
  private var continueSent = false
  /// Bytes that followed an upgrade request.
  private var upgradeLeftover = ByteBuffer.empty

  private enum TimerMode { case none, idle, reading }
  /// The request the read deadline runs for (`HTTPRequestDecoder.requestsBegun`), so that the next one gets a
  /// deadline of its own.
  private var timedRequest = 0

  init(server: HTTPServer, stream: ByteStream, peer: String?) {
    self.server = server
    self.stream = stream
    self.peer = peer
    decoder = HTTPRequestDecoder(limits: server.configuration.limits)
    timer = LoopTimer(loop: server.loop)
  }

  var configuration: HTTPServerConfiguration { server.configuration }

  func start() {
    stream.onRead = { [unowned self] bytes in self.received(bytes) }
    stream.onEnd = { [unowned self] in self.peerEnded() }
    stream.onError = { [unowned self] _ in self.closeNow() }
    stream.onDrain = { [unowned self] in self.drained() }
    stream.onWriteStall = { [unowned self] in
      self.server.onEvent?(.writeStalled(queuedBytes: self.stream.queuedBytes))
      self.closeNow()
    }
    stream.startReading()
    updateTimer()
  }

  private var pendingCount: Int { inFlight.count - inFlightHead }

  // MARK: Reading

  private func received(_ bytes: UnsafeRawBufferPointer) {
    guard acceptingRequests else { return }
    if !unparsed.isEmpty || pendingCount >= configuration.maxPipelinedRequests || isBackpressured {
      unparsed.append(contentsOf: bytes)
      pauseReadingIfNeeded()
      return
    }
    let consumed = parse(bytes)
    if consumed < bytes.count && acceptingRequests {
      unparsed.append(contentsOf: UnsafeRawBufferPointer(rebasing: bytes[consumed...]))
    }
    sendContinueIfExpected()
    pauseReadingIfNeeded()
    updateTimer()
  }

  /// Parses as many requests as the pipelining allowance lets through; returns the bytes consumed.
  private func parse(_ bytes: UnsafeRawBufferPointer) -> Int {
    let allowance = configuration.maxPipelinedRequests - pendingCount
    guard allowance > 0 else { return 0 }
    do {
      let output = try decoder.decode(bytes, maxRequests: allowance)
      if !output.requests.isEmpty || output.upgrade != nil { continueSent = false }
      // A request that closes the connection is the last one answered; any pipelined after it are dropped.
      for request in output.requests where acceptingRequests { dispatch(request) }
      if let request = output.upgrade {
        // Bytes after the upgrade request belong to the new protocol: keep them before the handler runs, since
        // an accepted upgrade may hand the stream over at once.
        upgradeLeftover.append(contentsOf: UnsafeRawBufferPointer(rebasing: bytes[output.consumed...]))
        dispatchUpgrade(request)
        return bytes.count
      }
      return output.consumed
    } catch {
      refuse(HTTPResponseError(error.status, error.detail))
      return bytes.count
    }
  }

  /// Whether more answers wait to be written than `maxQueuedResponseBytes`: no request is parsed meanwhile (an
  /// answer to a request finished later would pile up behind the ones the peer is not reading).
  private var isBackpressured: Bool { stream.queuedBytes > configuration.maxQueuedResponseBytes }

  /// Parses bytes kept back earlier, once responses made room.
  private func parseUnparsed() {
    guard acceptingRequests, !unparsed.isEmpty, pendingCount < configuration.maxPipelinedRequests,
      !isBackpressured
    else {
      return
    }
    var buffer = unparsed
    unparsed = ByteBuffer(capacity: 0)
    let consumed = buffer.withUnsafeReadableBytes { parse($0) }
    if acceptingRequests {
      buffer.moveReaderIndex(forwardBy: consumed)
      if !buffer.isEmpty { unparsed = buffer }
    }
    // The kept bytes may have ended inside a request: read on for the rest.
    pauseReadingIfNeeded()
    updateTimer()
  }

  /// Answers `Expect: 100-continue` once the head is in, so the client sends its body without waiting. Only when
  /// no earlier response is owed: a 100 sent before them would be read as theirs.
  private func sendContinueIfExpected() {
    guard acceptingRequests, !continueSent, pendingCount == 0, decoder.pendingRequestExpectsContinue else {
      return
    }
    continueSent = true
    stream.write(ByteBuffer(string: "HTTP/1.1 100 Continue\r\n\r\n"))
  }

  private func pauseReadingIfNeeded() {
    guard !closed else { return }
    let backlogged = !unparsed.isEmpty || isBackpressured || !acceptingRequests
    if backlogged { stream.stopReading() } else { stream.startReading() }
  }

  private func peerEnded() {
    // The client will send nothing more. Finish the responses it is waiting for (it may have half-closed
    // after pipelining), write them, then close.
    acceptingRequests = false
    if pendingCount == 0 {
      finishAndClose()
    }
    // A stream that only the peer's going ends (Server-Sent Events) would otherwise hold the connection until
    // a write to the gone peer failed.
    else if inFlight[inFlightHead...].contains(where: \.endsWithPeer) {
      closeNow()
    }
  }

  // MARK: Requests

  private func dispatch(_ request: HTTPRequest) {
    let responder = makeResponder(request.head)
    if !request.head.keepAlive { stopAcceptingAfter(responder.slot) }
    switch server.router.resolve(request) {
    case .success(let handler): handler(request, responder)
    case .failure(let error): responder.respond(error.response)
    }
  }

  private func dispatchUpgrade(_ request: HTTPRequest) {
    // The decoder stops after an upgrade request: whatever happens, no further HTTP request is read.
    acceptingRequests = false
    let responder = makeResponder(request.head)
    responder.slot.closesConnection = true
    guard let route = server.router.webSocketRoute(for: request.path),
      request.head.headers.contains(name: "Upgrade", token: "websocket")
    else {
      // Not a WebSocket endpoint (or another protocol): answer as a plain request, then close.
      switch server.router.resolve(request) {
      case .success(let handler): handler(request, responder)
      case .failure(let error): responder.respond(error.response)
      }
      return
    }
    switch WebSocketUpgrade.validate(request.head) {
    case .failure(let error):
      responder.respond(error.response)
    case .success(let accept):
      switch route.shouldAccept(request) {
      case .reject(let response):
        responder.respond(response)
      case .accept(let extra):
        var headers = extra
        headers.add(name: "Upgrade", value: "websocket")
        headers.add(name: "Connection", value: "Upgrade")
        headers.add(name: "Sec-WebSocket-Accept", value: accept)
        upgrade = (request, route)
        responder.slot.closesConnection = false
        responder.slot.switchesProtocols = true
        responder.respond(HTTPResponse(status: .switchingProtocols, headers: headers))
      }
    }
  }

  /// Answers a request that could not be parsed, after the responses already owed, and closes.
  private func refuse(_ error: HTTPResponseError) {
    server.onEvent?(.badRequest(error.status, error.message))
    acceptingRequests = false
    unparsed = ByteBuffer(capacity: 0)
    let responder = makeResponder(nil)
    responder.slot.closesConnection = true
    responder.respond(error.response)
  }

  private func makeResponder(_ head: HTTPRequestHead?) -> HTTPResponder {
    let slot = ResponseSlot()
    inFlight.append(slot)
    return HTTPResponder(connection: self, request: head, slot: slot)
  }

  private func stopAcceptingAfter(_ slot: ResponseSlot) {
    slot.closesConnection = true
    acceptingRequests = false
    unparsed = ByteBuffer(capacity: 0)
  }

  func serverIsClosing() {
    acceptingRequests = false
    unparsed = ByteBuffer(capacity: 0)
    if pendingCount == 0 {
      closeNow()
    } else if let last = inFlight.last {
      last.closesConnection = true
    }
  }

  // MARK: Writing responses in order

  /// Writes what the responders at the front of the queue have ready. Called when any responder produced output.
  func pump() {
    guard !closed else { return }
    while inFlightHead < inFlight.count {
      let front = inFlight[inFlightHead]
      if let bytes = front.takeOutput() { stream.write(bytes) }
      guard front.finished else { break }
      inFlightHead += 1
      if front.switchesProtocols {
        handOverToWebSocket()
        return
      }
      if front.closesConnection {
        finishAndClose()
        return
      }
    }
    if inFlightHead == inFlight.count {
      inFlight.removeAll(keepingCapacity: true)
      inFlightHead = 0
    }
    if !acceptingRequests && pendingCount == 0 && upgrade == nil {
      finishAndClose()
      return
    }
    parseUnparsed()
    pauseReadingIfNeeded()
    updateTimer()
  }

  private func drained() {
    guard !closed else { return }
    parseUnparsed()
    pauseReadingIfNeeded()
    updateTimer()
    // Streamed answers waiting for room (`HTTPResponder.whenDrained`), each once.
    for slot in inFlight[inFlightHead...] {
      guard !closed else { return }
      if let body = slot.onDrain {
        slot.onDrain = nil
        body()
      }
    }
  }

  var queuedBytes: Int { stream.queuedBytes }

  /// Writes the responses queued so far now, not at the end of the loop turn (`HTTPResponder.flush`).
  func flushNow() { stream.flushNow() }

  func recordResponse(_ status: HTTPStatus) { server.recordResponse(status) }

  // MARK: Timers

  private func updateTimer() {
    guard !closed else { return }
    let mode: TimerMode
    if decoder.isMidRequest && unparsed.isEmpty {
      // Reading a request. (Not while bytes wait in `unparsed`: then the server is the one not reading.)
      mode = .reading
    } else if pendingCount == 0 && acceptingRequests && unparsed.isEmpty && stream.queuedBytes == 0 {
      // Nothing asked, nothing owed, nothing to write. While an answer is being written the connection is not
      // idle, however long a slow reader takes: `writeStallTimeout` bounds one that reads nothing.
      mode = .idle
    } else {
      mode = .none
    }
    // Idle again after activity (a request answered within the callback that read it: the mode never left
    // .idle) starts the idle time again; otherwise a busy keep-alive connection was closed idleTimeout after it
    // opened. Every call here follows activity on the connection. Likewise a new request begun while the last
    // one was being read gets a deadline of its own: pipelined requests must not share one.
    let newRequest = mode == .reading && decoder.requestsBegun != timedRequest
    guard mode != timerMode || mode == .idle || newRequest else { return }
    timerMode = mode
    timedRequest = decoder.requestsBegun
    switch mode {
    case .none:
      timer.stop()
    case .idle:
      timer.start(after: configuration.idleTimeout) { [unowned self] in self.closeNow() }
    case .reading:
      // One call per callback: the call may close the connection and release it.
      timer.start(after: configuration.requestReadTimeout) { [unowned self] in self.readTimedOut() }
    }
  }

  private func readTimedOut() {
    timerMode = .none
    refuse(HTTPResponseError(.requestTimeout, "request not received in time"))
    updateTimer()
  }

  // MARK: Closing

  private func handOverToWebSocket() {
    guard let (request, route) = upgrade else { return }
    detach()
    server.connectionUpgraded(stream, peer: peer)
    let socket = WebSocket(
      stream: stream, role: .server, configuration: route.sharedConfiguration, request: request,
      leftover: upgradeLeftover, heartbeat: server.heartbeat(for: route.configuration))
    upgradeLeftover = .empty
    route.onOpen(socket)
    socket.start()
  }

  /// Sends what is queued, then closes (lingering, so the peer reads the last response). The linger starts once
  /// everything is written; a peer that stops reading meanwhile is dropped after `writeStallTimeout`.
  private func finishAndClose() {
    guard !closed else { return }
    detach()
    stream.closeGracefully(linger: configuration.lingerTimeout)
  }

  /// The stream was closed behind our back (the loop closing every handle at shutdown): forget the server, or
  /// the two keep each other alive.
  func streamClosed() {
    if !closed { detach() }
  }

  private func closeNow() {
    guard !closed else { return }
    detach()
    stream.close()
  }

  /// Forgets the stream's callbacks and the timer, and tells the server we are gone.
  private func detach() {
    closed = true
    acceptingRequests = false
    timer.close()
    stream.onRead = nil
    stream.onEnd = nil
    stream.onError = nil
    stream.onDrain = nil
    stream.onWriteStall = nil
    // A drain callback holds its responder, which holds its slot: never called now, it must not stay.
    for slot in inFlight { slot.onDrain = nil }
    inFlight = []
    inFlightHead = 0
    server.connectionDidClose(self)
  }
}
