import Testing

@testable import PagesyncClient

/// The change stream's reconnection decisions as traces: what each event leads to, delays included, with the
/// randomness scripted.
@Suite struct EventStreamSessionTests {
  /// A generator that returns the same word every time: 1 gives each delay's lower bound (half of it),
  /// `UInt64.max` its upper bound. (Not 0: the standard library's bounded draw rejects it, forever.)
  struct FixedRandom: RandomNumberGenerator {
    var value: UInt64
    mutating func next() -> UInt64 { value }
  }

  static func session(waitForDaemon: Bool = false, maxRetryDelay: UInt64 = 30_000) -> EventStreamSession {
    EventStreamSession(socketPath: "s.sock", waitForDaemon: waitForDaemon, maxRetryDelay: maxRetryDelay)
  }

  @Test func aDaemonThatIsNotThereAtTheStartIsReported() {
    var session = Self.session()
    var random = FixedRandom(value: 1)
    #expect(session.start() == .connect)
    #expect(
      session.connectFailed(reason: "no such file or directory", using: &random)
        == .fail(.unreachable(socket: "s.sock", reason: "no such file or directory")))
    #expect(session.state == .failed)
    // Nothing more happens after a failure.
    #expect(session.timerFired() == .none)
  }

  @Test func waitingForTheDaemonBacksOffDoublingUpToTheCap() {
    var session = Self.session(waitForDaemon: true, maxRetryDelay: 10_000)
    var low = FixedRandom(value: 1)
    var high = FixedRandom(value: .max)
    var trace: [EventStreamSession.Action] = [session.start()]
    for attempt in 0..<7 {
      // Alternate the draws: the lower and the upper bound of each delay show in the trace.
      if attempt % 2 == 0 {
        trace.append(session.connectFailed(reason: "refused", using: &low))
      } else {
        trace.append(session.connectFailed(reason: "refused", using: &high))
      }
      trace.append(session.timerFired())
    }
    #expect(
      trace == [
        .connect, .wait(500), .connect, .wait(2000), .connect, .wait(2000), .connect, .wait(8000), .connect,
        .wait(5000), .connect, .wait(10_000), .connect, .wait(5000), .connect,
      ])
  }

  @Test func theDaemonsRetryFieldSetsTheDelayAndAnOpenStreamResetsTheBackoff() {
    var session = Self.session(waitForDaemon: true)
    var random = FixedRandom(value: .max)
    #expect(session.start() == .connect)
    #expect(session.connectFailed(reason: "refused", using: &random) == .wait(1000))
    #expect(session.timerFired() == .connect)
    #expect(session.connectFailed(reason: "refused", using: &random) == .wait(2000))
    #expect(session.timerFired() == .connect)
    #expect(
      session.answered(
        status: 200, contentType: "text/event-stream; charset=utf-8", message: "", using: &random)
        == .none)
    #expect(session.state == .streaming)
    session.reconnectionTimeChanged(300)
    // Dropped: back after the daemon's own reconnection time, not the backoff reached before.
    #expect(session.dropped(using: &random) == .wait(300))
    #expect(session.timerFired() == .connect)
    #expect(session.connectFailed(reason: "refused", using: &random) == .wait(600))
  }

  @Test func onceAStreamWasOpenALostDaemonIsAlwaysWaitedFor() {
    var session = Self.session()
    var random = FixedRandom(value: 1)
    #expect(session.start() == .connect)
    #expect(
      session.answered(status: 200, contentType: "text/event-stream", message: "", using: &random) == .none)
    #expect(session.dropped(using: &random) == .wait(500))
    #expect(session.timerFired() == .connect)
    // The daemon is restarting: its socket is gone for a while.
    #expect(session.connectFailed(reason: "no such file or directory", using: &random) == .wait(1000))
    #expect(session.timerFired() == .connect)
    #expect(session.timedOutWaiting(seconds: 30, using: &random) == .wait(2000))
    #expect(session.timerFired() == .connect)
    // Too many streams just now: another app is restarting too.
    #expect(
      session.answered(status: 503, contentType: nil, message: "too many", using: &random) == .wait(4000))
  }

  @Test func refusalsEndTheStream() {
    var random = FixedRandom(value: 1)
    var first = Self.session()
    _ = first.start()
    // Before any stream: a 503 says the limit is reached, which the app should hear about.
    #expect(
      first.answered(status: 503, contentType: nil, message: "too many event streams", using: &random)
        == .fail(.daemonError(status: 503, message: "too many event streams")))
    var later = Self.session()
    _ = later.start()
    _ = later.answered(status: 200, contentType: "text/event-stream", message: "", using: &random)
    _ = later.dropped(using: &random)
    _ = later.timerFired()
    // Any other refusal ends it even after a stream was open: asking again would get the same.
    #expect(
      later.answered(status: 400, contentType: nil, message: "bad Last-Event-ID", using: &random)
        == .fail(.daemonError(status: 400, message: "bad Last-Event-ID")))
    var wrongType = Self.session()
    _ = wrongType.start()
    #expect(
      wrongType.answered(status: 200, contentType: "application/json", message: "", using: &random)
        == .fail(.invalidAnswer("GET /v1/events answered \"application/json\", not text/event-stream")))
    var noType = Self.session()
    _ = noType.start()
    #expect(
      noType.answered(status: 200, contentType: nil, message: "", using: &random)
        == .fail(.invalidAnswer("GET /v1/events answered no Content-Type, not text/event-stream")))
  }

  @Test func aBrokenStreamIsNotRetried() {
    var session = Self.session(waitForDaemon: true)
    var random = FixedRandom(value: 1)
    _ = session.start()
    _ = session.answered(status: 200, contentType: "TEXT/Event-Stream", message: "", using: &random)
    #expect(session.broken("bad event") == .fail(.invalidAnswer("bad event")))
  }

  @Test func stoppingSilencesEverything() {
    var session = Self.session(waitForDaemon: true)
    var random = FixedRandom(value: 1)
    _ = session.start()
    _ = session.connectFailed(reason: "refused", using: &random)
    session.stop()
    #expect(session.timerFired() == .none)
    #expect(session.dropped(using: &random) == .none)
    #expect(session.connectFailed(reason: "refused", using: &random) == .none)
  }

  @Test func hugeRetryValuesAndManyFailuresNeverOverflow() {
    var session = Self.session(waitForDaemon: true, maxRetryDelay: 60_000)
    var random = FixedRandom(value: .max)
    _ = session.start()
    session.reconnectionTimeChanged(.max)
    for _ in 0..<100 {
      #expect(session.connectFailed(reason: "refused", using: &random) == .wait(60_000))
      _ = session.timerFired()
    }
  }
}
