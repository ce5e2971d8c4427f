import ByteBuffers

/// The answer to one request. Respond exactly once: a whole response with `respond`, or a streamed one with
/// `startStreaming` followed by `writeChunk`s and `finish`.
///
/// A responder may be kept and answered later (after a database commit, say) on the loop thread; the connection
/// writes responses in request order whatever order they complete in. A responder released without an answer
/// answers 500 and closes the connection, so a forgotten request cannot wedge a pipelined connection.
///
/// A *detached* responder (`init(request:onResponse:)`) has no connection: it hands its response to a closure,
/// so that a router's handlers can be driven in-process, without a socket (tests of what sits on a router, in the
/// spirit of swift-nio's `EmbeddedChannel`).
///
/// Threading: loop thread only.
public final class HTTPResponder {
  private weak var connection: HTTPServerConnection?
  /// A detached responder's destination, and what a streamed answer has sent so far.
  private var detached: (onResponse: (HTTPResponse) -> Void, head: HTTPResponseHead?, body: ByteBuffer)?
  let slot: ResponseSlot
  /// The head of the request being answered (nil for a request that could not be parsed).
  public let request: HTTPRequestHead?
  private var state = State.waiting
  private var chunked = false
  private let headOnly: Bool

  private enum State { case waiting, streaming, finished }

  init(connection: HTTPServerConnection?, request: HTTPRequestHead?, slot: ResponseSlot) {
    self.connection = connection
    self.request = request
    self.slot = slot
    headOnly = request?.method == .HEAD
  }

  /// A responder with no connection: the answer to `request` goes to `onResponse`, once, as the handler gave it
  /// (without the `Server`, `Content-Length` and `Connection` headers a connection adds). A streamed answer is
  /// delivered whole by `finish`. Released unanswered, it delivers the 500 a connection would send; released
  /// mid-stream, what was streamed.
  public convenience init(request: HTTPRequestHead, onResponse: @escaping (HTTPResponse) -> Void) {
    self.init(connection: nil, request: request, slot: ResponseSlot())
    detached = (onResponse, nil, ByteBuffer(capacity: 0))
  }

  deinit {
    if let detached, state != .finished {
      let unanswered = HTTPResponseError(.internalServerError, "the handler did not answer").response
      let response = detached.head.map { HTTPResponse(head: $0, body: detached.body) } ?? unanswered
      detached.onResponse(response)
      return
    }
    guard state != .finished, let connection else { return }
    if state == .waiting {
      slot.closesConnection = true
      var head = HTTPResponseError(.internalServerError, "the handler did not answer").response
      connection.recordResponse(head.head.status)
      head.head.headers.replaceOrAdd(name: "Connection", value: "close")
      HTTPEncoder.encodeResponse(head, into: &slot.output)
    }
    // A streamed body cut short cannot be completed: closing tells the client it is truncated.
    slot.closesConnection = true
    slot.finished = true
    connection.pump()
  }

  /// Whether the connection is still there to take an answer.
  public var isConnectionOpen: Bool { connection != nil }

  /// Bytes queued on the connection and not yet taken by the kernel: a streaming writer slows down above a
  /// threshold of its choosing.
  public var queuedBytes: Int { connection?.queuedBytes ?? 0 }

  /// Whether what is written still goes somewhere: the connection is open, or the responder is detached.
  public var isAnswerWanted: Bool { connection != nil || detached != nil }

  /// Calls `body` once the kernel has taken every byte queued on the connection (at once when none is queued, or
  /// for a detached responder): a streamed answer made as the peer reads it holds at most what it last wrote,
  /// not the whole answer in a write queue. Never called if the connection closes first. One at a time: a
  /// second call replaces the first's `body`.
  public func whenDrained(_ body: @escaping () -> Void) {
    guard let connection, connection.queuedBytes > 0 else { return body() }
    slot.onDrain = body
  }

  /// Hands the answers written so far to the kernel now instead of at the end of the loop turn: call it after
  /// `respond` when the handler goes on with work of its own in this turn (the broker's batch answer, then the
  /// batch's notifications to every subscriber), so that the answer does not wait for that work.
  public func flush() { connection?.flushNow() }

  /// Sends `response` with a `Content-Length` body. A second answer is ignored.
  public func respond(_ response: HTTPResponse) {
    guard state == .waiting else { return }
    state = .finished
    var head = prepare(response.head)
    if slot.switchesProtocols {
      HTTPEncoder.encodeResponseHead(head, contentLength: nil, into: &slot.output)
    } else if headOnly {
      if head.headers["Content-Length"] == nil {
        head.headers.add(name: "Content-Length", value: String(response.body.readableBytes))
      }
      HTTPEncoder.encodeResponseHead(head, contentLength: nil, into: &slot.output)
    } else {
      HTTPEncoder.encodeResponse(HTTPResponse(head: head, body: response.body), into: &slot.output)
    }
    slot.finished = true
    connection?.pump()
    if let detached {
      self.detached = nil
      detached.onResponse(HTTPResponse(head: head, body: headOnly ? ByteBuffer(capacity: 0) : response.body))
    }
  }

  /// Sends the head of a response whose body follows in chunks (`Transfer-Encoding: chunked`; for an HTTP/1.0
  /// client the body is delimited by closing the connection instead). `endsWithPeer`: a stream with no end of
  /// its own (Server-Sent Events), closed as soon as the client closes its side rather than at the next write.
  public func startStreaming(_ head: HTTPResponseHead, endsWithPeer: Bool = false) {
    guard state == .waiting else { return }
    state = .streaming
    slot.endsWithPeer = endsWithPeer
    var head = head
    head.headers.remove(name: "Content-Length")
    head.headers.remove(name: "Transfer-Encoding")
    if request?.version == .http1_0 {
      slot.closesConnection = true
    } else if !headOnly {
      chunked = true
      head.headers.add(name: "Transfer-Encoding", value: "chunked")
    }
    let prepared = prepare(head)
    HTTPEncoder.encodeResponseHead(prepared, contentLength: nil, into: &slot.output)
    connection?.pump()
    detached?.head = prepared
  }

  /// Sends one piece of a streamed body. Empty pieces are skipped.
  public func writeChunk(_ data: ByteBuffer) {
    guard state == .streaming, !data.isEmpty, !headOnly else { return }
    if chunked {
      HTTPEncoder.encodeChunk(data, into: &slot.output)
    } else {
      slot.output.append(data)
    }
    connection?.pump()
    detached?.body.append(data)
  }

  /// Ends a streamed body.
  public func finish() {
    guard state == .streaming else { return }
    state = .finished
    if chunked { HTTPEncoder.encodeLastChunk(into: &slot.output) }
    slot.finished = true
    connection?.pump()
    if let detached, let head = detached.head {
      self.detached = nil
      detached.onResponse(HTTPResponse(head: head, body: detached.body))
    }
  }

  /// Adds the connection headers the server owns.
  private func prepare(_ head: HTTPResponseHead) -> HTTPResponseHead {
    var head = head
    head.version = .http1_1
    connection?.recordResponse(head.status)
    if let name = connection?.configuration.serverName, head.headers["Server"] == nil {
      head.headers.add(name: "Server", value: name)
    }
    if slot.switchesProtocols { return head }
    if head.headers.contains(name: "Connection", token: "close") { slot.closesConnection = true }
    if slot.closesConnection {
      head.headers.replaceOrAdd(name: "Connection", value: "close")
    } else if request?.version == .http1_0 {
      head.headers.replaceOrAdd(name: "Connection", value: "keep-alive")
    }
    return head
  }
}

/// A response's place in its connection's queue: what has been produced and not yet written, and what the
/// connection must do after it. The connection holds slots; the handler holds the responder.
final class ResponseSlot {
  var output = ByteBuffer(capacity: 0)
  var finished = false
  var closesConnection = false
  var switchesProtocols = false
  /// A stream to be cut when the client ends its side (`startStreaming(_:endsWithPeer:)`).
  var endsWithPeer = false
  /// What to call once the connection's queued bytes are all written (`HTTPResponder.whenDrained`).
  var onDrain: (() -> Void)?

  /// Output produced since the last call, if any.
  func takeOutput() -> ByteBuffer? {
    guard !output.isEmpty else { return nil }
    let bytes = output
    output = ByteBuffer(capacity: 0)
    return bytes
  }
}
