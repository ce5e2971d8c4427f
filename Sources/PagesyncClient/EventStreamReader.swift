import ByteBuffers
import EventLoop
import Web

/// The reader of one `events()` iterator: a libuv loop on a thread of its own that holds the `GET /v1/events`
/// connection, parses the stream, hands typed events to the buffer, and reconnects as `EventStreamSession`
/// decides, resuming with `Last-Event-ID`.
///
/// Lifecycle: made on the consumer's thread (the loop too, which is allowed before it first runs); `run` on the
/// new thread until stopped: by the consumer (cancelled task, dropped iterator; through the buffer's stop hook)
/// or by a failure the session gives up on. Its loop is then closed and the thread ends.
///
/// Threading: everything but `init` and the hooks' `loop.execute` runs on the loop thread.
final class EventStreamReader: @unchecked Sendable {
  // @unchecked: all mutable state belongs to the loop thread; other threads only call `loop.execute`.
  private let socketPath: String
  private let options: EventStreamOptions
  private let buffer: EventStreamBuffer
  private let loop: Loop
  private var session: EventStreamSession
  private var parser: ServerSentEventParser
  private var random = SystemRandomNumberGenerator()
  private var timer: LoopTimer?
  private var connection: HTTPClientConnection?
  /// Counts connections, so that a callback of an earlier one is told from the current one's.
  private var generation = 0
  /// The refusal being read: its status and (the start of) its body.
  private var refusal: (status: Int, body: [UInt8])?
  /// Whether the request under way goes without `Last-Event-ID` (no numbered event was received yet).
  private var withoutResumePoint = true
  private var stopped = false

  /// The most bytes of a refusal's body read for its message.
  private static let maxRefusalBytes = 16 * 1024

  init(socketPath: String, options: EventStreamOptions, buffer: EventStreamBuffer) throws(PagesyncClientError)
  {
    self.socketPath = socketPath
    self.options = options
    self.buffer = buffer
    session = EventStreamSession(
      socketPath: socketPath, waitForDaemon: options.waitForDaemon, maxRetryDelay: options.maxRetryDelay)
    parser = ServerSentEventParser(
      lastEventID: options.lastEventID.map(String.init) ?? "", maxEventBytes: options.maxEventBytes)
    do {
      loop = try Loop()
    } catch {
      throw .unreachable(socket: socketPath, reason: "cannot start an event loop: \(error.message)")
    }
  }

  /// Runs the reader to its end on the calling thread (a thread of its own).
  func run() {
    // The loop must wait for the consumer even when nothing is active: a paused connection reads nothing.
    loop.keepsRunningWhenIdle = true
    timer = LoopTimer(loop: loop)
    buffer.setHooks(
      stop: { [loop, self] in loop.execute { self.stop() } },
      resume: { [loop, self] in loop.execute { self.connection?.resumeReading() } })
    perform(session.start())
    loop.run()
    buffer.readerEnded()
    try? loop.close()
  }

  // MARK: Actions

  private func perform(_ action: EventStreamSession.Action) {
    guard !stopped else { return }
    switch action {
    case .none: break
    case .connect: connect()
    case .wait(let milliseconds):
      timer?.start(after: milliseconds) { [unowned self] in self.perform(self.session.timerFired()) }
    case .fail(let error):
      buffer.finish(error)
      stop()
    }
  }

  private func connect() {
    generation += 1
    let current = generation
    refusal = nil
    parser.reset()
    var configuration = HTTPClientConfiguration()
    configuration.responseTimeout = options.answerTimeout
    configuration.streamIdleTimeout = options.idleTimeout
    HTTPClientConnection.connect(loop: loop, to: .unix(path: socketPath), configuration: configuration) {
      [self] result in
      guard current == generation, !stopped else {
        if case .success(let connection) = result { connection.close() }
        return
      }
      switch result {
      case .failure(let error):
        let reason = if case .connectFailed(let loopError) = error { loopError.message } else { "\(error)" }
        perform(session.connectFailed(reason: reason, using: &random))
      case .success(let connection):
        self.connection = connection
        connection.stream(request()) { [self] part in
          guard current == generation, !stopped else { return }
          received(part)
        }
      }
    }
  }

  private func request() -> HTTPRequest {
    var headers: HTTPHeaders = ["Accept": "text/event-stream", "Cache-Control": "no-store"]
    withoutResumePoint = parser.lastEventID.isEmpty
    if !withoutResumePoint { headers.add(name: "Last-Event-ID", value: parser.lastEventID) }
    return HTTPRequest(head: HTTPRequestHead(method: .GET, target: "/v1/events", headers: headers))
  }

  // MARK: The answer

  private func received(_ part: Result<HTTPResponsePart, HTTPClientError>) {
    switch part {
    case .success(.head(let head)):
      if head.status.code == 200 {
        let reopened = session.everStreamed
        perform(
          session.answered(
            status: 200, contentType: head.headers["Content-Type"], message: "", using: &random))
        // A stream reopened with nothing to resume from (the one before ended before its first numbered event)
        // cannot say what happened in between, and the daemon cannot either: say it here.
        if reopened && withoutResumePoint && session.state == .streaming {
          if buffer.push([EventStreamReader.unresumableReset]) { connection?.pauseReading() }
        }
      } else {
        refusal = (head.status.code, [])
      }
    case .success(.body(let bytes)):
      if var answer = refusal {
        let room = max(EventStreamReader.maxRefusalBytes - answer.body.count, 0)
        answer.body += bytes.readableBytesArray.prefix(room)
        refusal = answer
      } else {
        parse(bytes)
      }
    case .success(.end):
      closeConnection()
      if let answer = refusal {
        perform(
          session.answered(
            status: answer.status, contentType: nil, message: EventStreamReader.message(answer),
            using: &random))
      } else {
        // The daemon ended the stream: it is stopping. Its next run answers the resume with a reset.
        perform(session.dropped(using: &random))
      }
    case .failure(let error):
      connection = nil
      if case .timedOut = error, session.state == .connecting {
        perform(session.timedOutWaiting(seconds: options.answerTimeout / 1000, using: &random))
      } else {
        perform(session.dropped(using: &random))
      }
    }
  }

  /// Parses a piece of the stream and hands its events over; what came before a broken event still goes to the
  /// app, then the sequence ends with the problem.
  private func parse(_ bytes: ByteBuffer) {
    var events: [ServerSentEvent] = []
    var problem: String?
    bytes.withUnsafeReadableBytes { raw in
      do throws(ServerSentEventParser.ParseError) {
        try parser.parse(raw, into: &events)
      } catch {
        problem = "\(error)"
      }
    }
    if let retry = parser.reconnectionTime { session.reconnectionTimeChanged(retry) }
    var typed: [PagesyncEvent] = []
    for event in events {
      do throws(PagesyncEvent.DecodingFailure) {
        if let known = try PagesyncEvent(event) { typed.append(known) }
      } catch {
        problem = "\(error)"
        break
      }
    }
    let full = buffer.push(typed)
    if let problem {
      closeConnection()
      perform(session.broken("GET /v1/events: \(problem)"))
    } else if full {
      connection?.pauseReading()
    }
  }

  /// The `reset` the reader gives the app itself when it reopens a stream without a resume point.
  static let unresumableReset = PagesyncEvent(
    id: nil,
    change: .reset(.init(reason: EventStreamReader.unresumableReason)),
    json: #"{"type":"reset","reason":"\#(EventStreamReader.unresumableReason)"}"#)

  static let unresumableReason =
    "the stream was reopened before it had carried a numbered event, so it cannot resume: re-read what you show"

  /// The daemon's message in a refusal's JSON body, or its start.
  private static func message(_ answer: (status: Int, body: [UInt8])) -> String {
    if let value = try? JSONValue(parsing: answer.body), let message = value["message"]?.stringValue,
      !message.isEmpty
    {
      return message
    }
    let text = String(String(decoding: answer.body.prefix(200), as: UTF8.self)).replacingControlCharacters()
    return text.isEmpty ? "GET /v1/events was refused" : "GET /v1/events was refused: \(text)"
  }

  // MARK: Ending

  private func closeConnection() {
    let open = connection
    connection = nil
    generation += 1  // what the closing connection still reports is not ours
    open?.close()
  }

  private func stop() {
    guard !stopped else { return }
    stopped = true
    session.stop()
    closeConnection()
    timer?.close()
    timer = nil
    loop.keepsRunningWhenIdle = false
  }
}
