import DaemonCore
import EventLoopTestKit
import SyncModel
import Testing

/// The failover between the brokers of `[broker] url`, as traces of (time, event) → (broker, delay bound).
@Suite struct BrokerFailoverTests {
  /// The delay `random` draws for `bound`, as the failover must.
  static func expectedDelay(_ bound: UInt64, _ random: inout SplitMix64) -> UInt64 {
    UInt64.random(in: 0...bound, using: &random)
  }

  @Test func failedAttemptsWalkTheListInOrderAndEachWholeRoundDoublesTheBound() {
    var failover = BrokerFailover(
      brokerCount: 3, backoff: ReconnectBackoff(base: 500, cap: 8_000, resetAfter: 30_000))
    var random = SplitMix64(seed: 5)
    var expected = SplitMix64(seed: 5)
    var now: UInt64 = 0
    // Nothing answers: 0, 1, 2 (round 1, bound 500), 0, 1, 2 (round 2, bound 1000), 0 … (bound 2000).
    var trace: [(broker: Int, bound: UInt64)] = []
    for _ in 0..<8 {
      let tried = failover.current
      let bound = failover.backoff.currentBound
      let delay = failover.lost(at: now, using: &random)
      #expect(delay == Self.expectedDelay(bound, &expected))
      #expect(delay <= bound)
      trace.append((tried, bound))
      now += delay + 1
    }
    #expect(trace.map(\.broker) == [0, 1, 2, 0, 1, 2, 0, 1])
    #expect(trace.map(\.bound) == [500, 500, 500, 1_000, 1_000, 1_000, 2_000, 2_000])
    #expect(failover.current == 2)
  }

  @Test func aConnectionSticksAndALossMovesOnToTheNextBrokerNotBackToTheFirst() {
    var failover = BrokerFailover(
      brokerCount: 3, backoff: ReconnectBackoff(base: 500, cap: 8_000, resetAfter: 30_000))
    var random = SplitMix64(seed: 9)
    // Broker 0 refuses; broker 1 answers at t=400 and stays up for an hour.
    _ = failover.lost(at: 0, using: &random)
    #expect(failover.current == 1)
    failover.connected(at: 400)
    #expect(failover.current == 1 && failover.failedInRound == 0)
    // Lost at t=3,600,400: the next is broker 2 (not 0, the list's first), at the base bound (it lasted).
    let bound = failover.backoff.currentBound
    let delay = failover.lost(at: 3_600_400, using: &random)
    #expect(bound == 500 && delay <= 500)
    #expect(failover.current == 2)
    // Broker 2 answers and is lost again after 2 s (too short to reset): broker 0 next, still round one.
    failover.connected(at: 3_601_000)
    _ = failover.lost(at: 3_603_000, using: &random)
    #expect(failover.current == 0 && failover.backoff.attempt == 0 && failover.failedInRound == 1)
  }

  @Test func aFullRoundOfFailuresAfterALossBacksOffFurtherAndALongConnectionResetsIt() {
    var failover = BrokerFailover(
      brokerCount: 2, backoff: ReconnectBackoff(base: 100, cap: 1_000, resetAfter: 10_000))
    var random = SplitMix64(seed: 2)
    failover.connected(at: 0)
    // Lost at t=20 s (lasted: bound 100); broker 1 fails too: the round (lost one included) is over.
    _ = failover.lost(at: 20_000, using: &random)
    #expect(failover.backoff.currentBound == 100)
    _ = failover.lost(at: 20_100, using: &random)
    #expect(failover.backoff.attempt == 1 && failover.backoff.currentBound == 200)
    // Rounds keep doubling up to the cap.
    for _ in 0..<10 { _ = failover.lost(at: 21_000, using: &random) }
    #expect(failover.backoff.currentBound == 1_000)
    // Broker 0 answers and holds for 10 s: the next loss is back at the base.
    failover.connected(at: 30_000)
    _ = failover.lost(at: 40_000, using: &random)
    #expect(failover.backoff.attempt == 0 && failover.backoff.currentBound == 100)
    #expect(failover.current == 1)
  }

  @Test func aConnectionTheDaemonDroppedForItsOwnReasonsComesBackToTheSameBroker() {
    var failover = BrokerFailover(
      brokerCount: 2, backoff: ReconnectBackoff(base: 500, cap: 8_000, resetAfter: 30_000))
    var random = SplitMix64(seed: 3)
    _ = failover.lost(at: 0, using: &random)
    failover.connected(at: 100)
    #expect(failover.current == 1)
    // A new token: the daemon reconnects, to broker 1 again; the delay is counted as any failure's.
    let delay = failover.lost(at: 200, using: &random, moveOn: false)
    #expect(delay <= 500 && failover.current == 1 && failover.failedInRound == 1)
  }

  @Test func oneBrokerIsExactlyTheSingleBrokerBackoff() {
    var failover = BrokerFailover(
      brokerCount: 1, backoff: ReconnectBackoff(base: 500, cap: 8_000, resetAfter: 30_000))
    var backoff = ReconnectBackoff(base: 500, cap: 8_000, resetAfter: 30_000)
    var random = SplitMix64(seed: 13)
    var reference = SplitMix64(seed: 13)
    for step in 0..<12 {
      let now = UInt64(step) * 1_000
      if step == 6 {
        failover.connected(at: now - 900)
        backoff.connected(at: now - 900)
      }
      backoff.disconnected(at: now)
      #expect(failover.lost(at: now, using: &random) == backoff.nextDelay(using: &reference))
      #expect(failover.current == 0)
      #expect(failover.backoff == backoff)
    }
  }

  @Test func devicesThatLoseABrokerTogetherSpreadOverTheWholeWindow() {
    // A thousand devices on broker 0 of three, lost at the same instant: each goes to broker 1 after a delay
    // uniform in 0…500 ms, none at once together (full jitter).
    var random = SplitMix64(seed: 21)
    var delays: [UInt64] = []
    for _ in 0..<1_000 {
      var failover = BrokerFailover(
        brokerCount: 3, backoff: ReconnectBackoff(base: 500, cap: 60_000, resetAfter: 30_000))
      failover.connected(at: 0)
      delays.append(failover.lost(at: 60_000, using: &random))
      #expect(failover.current == 1)
    }
    #expect(delays.allSatisfy { $0 <= 500 })
    #expect(delays.min()! < 10 && delays.max()! > 490)
    #expect(Set(delays).count > 350)
  }

  @Test func theSyncMachineTriesTheNextBrokerAfterAFailureAndStaysOnTheOneItReached() {
    let clock = ManualClock()
    var machine = SyncStateMachine(
      offlinePages: [], backoff: ReconnectBackoff(base: 500, cap: 8_000, resetAfter: 30_000),
      heartbeatInterval: 10_000, maxPagesPerFetch: 10, random: SplitMix64(seed: 4), clock: { clock.now },
      brokerCount: 2)
    var expected = SplitMix64(seed: 4)
    #expect(machine.handle(.start(now: 0)) == [.openConnection])
    #expect(machine.broker == 0)
    // The first broker is down at start: the second, after a delay within the base bound.
    let due = Self.expectedDelay(500, &expected)
    #expect(machine.handle(.connectionFailed(now: 0, reason: "refused")) == [.scheduleTimer(at: due)])
    #expect(machine.broker == 1)
    #expect(machine.handle(.timerFired(now: due)) == [.openConnection])
    #expect(machine.handle(.connectionOpened(now: due)) == [.subscribe(pages: [])])
    #expect(machine.broker == 1)
    // Lost: back to broker 0 (the next, round-robin), same bound: one failure is not a whole round.
    let lost = due + 1_000
    let again = lost + Self.expectedDelay(500, &expected)
    #expect(machine.handle(.connectionClosed(now: lost, reason: "1006")) == [.scheduleTimer(at: again)])
    #expect(machine.broker == 0)
    #expect(machine.backoff.attempt == 0)
  }
}
