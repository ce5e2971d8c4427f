/// When the change stream connects, waits and gives up: the decisions of an `events()` sequence's reader,
/// without I/O. Events in, actions out; times and randomness come from the caller, so behaviour is tested as a
/// trace.
///
/// ```
///   start ──▶ connecting ──200 text/event-stream──▶ streaming
///                │   ▲                                  │ dropped, ended, went silent
///                │   └──────── timer ─── waiting ◀──────┘
///                │ unreachable, refused (503), timed out: waiting, with backoff
///                │ ... but before any stream was open (unless waitForDaemon), or any other refusal: failed
///   any ──stop──▶ stopped
/// ```
///
/// Delays: the daemon's reconnection time (its `retry` field; 1000 ms until it sends one) doubled for each
/// attempt that failed since the last open stream, at most `maxRetryDelay`, with equal jitter (between half and
/// all of it), so that the apps of a device do not all come back in the same millisecond after a restart.
struct EventStreamSession: Sendable {
  enum State: Equatable, Sendable {
    case idle
    case connecting
    case streaming
    case waiting
    case failed
    case stopped
  }

  enum Action: Equatable, Sendable {
    /// Open a stream, resuming after `lastEventID` when it is not empty.
    case connect
    /// Wait this many milliseconds, then call `timerFired`.
    case wait(UInt64)
    /// Give up: the sequence ends with this error.
    case fail(PagesyncClientError)
    /// Nothing to do.
    case none
  }

  let socketPath: String
  let waitForDaemon: Bool
  let maxRetryDelay: UInt64
  private(set) var state = State.idle
  /// The daemon's reconnection time, ms (its `retry` field).
  private(set) var retryDelay: UInt64 = 1000
  /// Attempts that failed since a stream last opened.
  private(set) var failures = 0
  /// Whether a stream has opened at all: before that, an unreachable daemon is reported, not waited for.
  private(set) var everStreamed = false

  init(socketPath: String, waitForDaemon: Bool, maxRetryDelay: UInt64) {
    self.socketPath = socketPath
    self.waitForDaemon = waitForDaemon
    self.maxRetryDelay = max(maxRetryDelay, 1)
  }

  mutating func start() -> Action {
    guard state == .idle else { return .none }
    state = .connecting
    return .connect
  }

  /// The daemon's `retry` field.
  mutating func reconnectionTimeChanged(_ milliseconds: UInt64) {
    retryDelay = milliseconds
  }

  /// The socket could not be connected.
  mutating func connectFailed(reason: String, using random: inout some RandomNumberGenerator) -> Action {
    guard state == .connecting else { return .none }
    if !everStreamed && !waitForDaemon { return fail(.unreachable(socket: socketPath, reason: reason)) }
    return retry(using: &random)
  }

  /// The answer's head came: a stream (200, `text/event-stream`) or a refusal (`message` is the daemon's).
  mutating func answered(
    status: Int, contentType: String?, message: String, using random: inout some RandomNumberGenerator
  ) -> Action {
    guard state == .connecting else { return .none }
    if status == 200 {
      guard let contentType, EventStreamSession.isEventStream(contentType) else {
        return fail(
          .invalidAnswer(
            "GET /v1/events answered \(contentType.map { "\"\($0)\"" } ?? "no Content-Type"), "
              + "not text/event-stream"))
      }
      state = .streaming
      failures = 0
      everStreamed = true
      return .none
    }
    // Too many streams may be a passing thing once a stream was open (an app restarting); before, say so.
    if status == 503 && everStreamed { return retry(using: &random) }
    return fail(.daemonError(status: status, message: message))
  }

  /// No answer in time (`timedOutWaiting`), or the open stream ended, broke or went silent.
  mutating func dropped(using random: inout some RandomNumberGenerator) -> Action {
    switch state {
    case .connecting, .streaming: return retry(using: &random)
    default: return .none
    }
  }

  /// No head within the answer timeout: before any stream opened (unless waiting for the daemon), a failure.
  mutating func timedOutWaiting(seconds: UInt64, using random: inout some RandomNumberGenerator) -> Action {
    guard state == .connecting else { return .none }
    if !everStreamed && !waitForDaemon { return fail(.timedOut(socket: socketPath, seconds: seconds)) }
    return retry(using: &random)
  }

  /// What the stream carried is not the contract's (a bad event, one too large): reconnecting would read the
  /// same again.
  mutating func broken(_ what: String) -> Action {
    guard state == .streaming || state == .connecting else { return .none }
    return fail(.invalidAnswer(what))
  }

  mutating func timerFired() -> Action {
    guard state == .waiting else { return .none }
    state = .connecting
    return .connect
  }

  mutating func stop() {
    state = .stopped
  }

  /// The bound of the next delay: the reconnection time doubled per failed attempt, at most `maxRetryDelay`.
  var currentBound: UInt64 {
    let shift = UInt64(min(failures, 63))
    let (scaled, overflow) = max(retryDelay, 1).multipliedReportingOverflow(by: UInt64(1) << shift)
    return overflow ? maxRetryDelay : min(maxRetryDelay, scaled)
  }

  private mutating func retry(using random: inout some RandomNumberGenerator) -> Action {
    let bound = currentBound
    failures += 1
    state = .waiting
    return .wait(bound / 2 + UInt64.random(in: 0...(bound - bound / 2), using: &random))
  }

  private mutating func fail(_ error: PagesyncClientError) -> Action {
    state = .failed
    return .fail(error)
  }

  /// `text/event-stream`, with parameters or not, in any case.
  static func isEventStream(_ contentType: String) -> Bool {
    let media = contentType.split(separator: ";", maxSplits: 1).first ?? ""
    return media.trimmingCharacters(in: " \t").lowercased() == "text/event-stream"
  }
}

extension Substring {
  fileprivate func trimmingCharacters(in set: String) -> Substring {
    var text = self
    while let first = text.first, set.contains(first) { text = text.dropFirst() }
    while let last = text.last, set.contains(last) { text = text.dropLast() }
    return text
  }
}
