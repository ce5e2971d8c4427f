import Backoff
import EventLoopTestKit
import Testing

@testable import BrokerCore

@Suite struct BusLinkStateMachineTests {
  func machine() -> BusLinkStateMachine {
    BusLinkStateMachine(backoff: ReconnectBackoff(base: 100, cap: 800, resetAfter: 10_000))
  }

  @Test func aLiveLinkCatchesUpEachTimeItBecomesLiveTheFirstIncluded() {
    var link = machine()
    var random = SplitMix64(seed: 1)
    #expect(link.start() == .connect)
    #expect(link.connected(at: 0) == .subscribeAll)
    #expect(!link.isLive)
    #expect(link.subscribed() == .catchUp(publishResync: false))
    #expect(link.isLive && link.reconnects == 0)
    // Lost: nothing is trusted from the bus until it is live again.
    guard case .retry(let delay) = link.failed(at: 500, lostWrites: false, using: &random) else {
      Issue.record("no retry")
      return
    }
    #expect(delay <= 100)
    #expect(!link.isLive)
    #expect(link.retryDue(at: 500 + delay) == .connect)
    #expect(link.connected(at: 700) == .subscribeAll)
    // A live link that was lost may have lost what it had written: a resync is owed.
    #expect(link.subscribed() == .catchUp(publishResync: true))
    #expect(link.reconnects == 1)
  }

  @Test func retriesBackOffUpToTheCapAndResetAfterALongConnection() {
    var link = machine()
    var random = SplitMix64(seed: 2)
    _ = link.start()
    var now: UInt64 = 0
    var delays: [UInt64] = []
    // A trace of failed attempts: each waits at most base × 2^attempt, at most the cap.
    for _ in 0..<6 {
      guard case .retry(let delay) = link.failed(at: now, lostWrites: false, using: &random) else {
        Issue.record("no retry")
        return
      }
      delays.append(delay)
      #expect(link.state == .waiting(until: now + delay))
      // Early timers do nothing.
      if delay > 0 { #expect(link.retryDue(at: now + delay - 1) == .none) }
      now += delay
      #expect(link.retryDue(at: now) == .connect)
    }
    for (index, delay) in delays.enumerated() { #expect(delay <= min(800, 100 << UInt64(index))) }
    // Connected for longer than resetAfter: the next delay is back under the base.
    #expect(link.connected(at: now) == .subscribeAll)
    #expect(link.subscribed() == .catchUp(publishResync: false))
    guard case .retry(let delay) = link.failed(at: now + 10_000, lostWrites: false, using: &random) else {
      Issue.record("no retry")
      return
    }
    #expect(delay <= 100)
  }

  @Test func aMessageDroppedWhileLiveIsRepaidWithOneResyncWhenThereIsRoom() {
    var link = machine()
    _ = link.start()
    _ = link.connected(at: 0)
    _ = link.subscribed()
    #expect(link.publishRoom() == .none)
    link.publishDropped()
    link.publishDropped()
    #expect(link.publishRoom() == .publishResync)
    #expect(link.publishRoom() == .none)
  }

  @Test func aMessageDroppedWhileDownIsRepaidWhenLive() {
    var link = machine()
    var random = SplitMix64(seed: 3)
    _ = link.start()
    _ = link.failed(at: 0, lostWrites: false, using: &random)
    link.publishDropped()
    // Not live: no room to repay yet.
    #expect(link.publishRoom() == .none)
    _ = link.retryDue(at: 1_000)
    _ = link.connected(at: 1_000)
    #expect(link.subscribed() == .catchUp(publishResync: true))
    #expect(link.reconnects == 0)
  }

  @Test func eventsOutOfStateDoNothing() {
    var link = machine()
    var random = SplitMix64(seed: 4)
    #expect(link.connected(at: 0) == .none)
    #expect(link.subscribed() == .none)
    #expect(link.failed(at: 0, lostWrites: true, using: &random) == .none)
    #expect(link.retryDue(at: 0) == .none)
    _ = link.start()
    #expect(link.start() == .none)
    #expect(link.subscribed() == .none)
    _ = link.failed(at: 0, lostWrites: false, using: &random)
    // A second failure report of the same loss (both connections fail) schedules one retry.
    #expect(link.failed(at: 0, lostWrites: false, using: &random) == .none)
    link.stop()
    #expect(link.retryDue(at: 100_000) == .none)
  }
}
