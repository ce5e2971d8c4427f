import DaemonCore
import DaemonCoreTestKit
import EventLoopTestKit
import SyncModel
import Testing

/// The wiring's clock, advanced by hand.
final class ManualClock: @unchecked Sendable {
  var now: UInt64 = 0
}

/// A sync state machine driven as a trace: each step sets the clock, feeds one event and checks the actions.
struct SyncTrace {
  let clock = ManualClock()
  var machine: SyncStateMachine<SplitMix64>
  /// The same generator as the machine's, to compute the reconnect delays it must draw.
  var expectedRandom: SplitMix64
  let heartbeat: UInt64 = 10_000

  init(pages: [String], seed: UInt64 = 1, maxPagesPerFetch: Int = 100, resetAfter: UInt64 = 30_000) {
    let clock = clock
    machine = SyncStateMachine(
      offlinePages: Set(pages.map(id)),
      backoff: ReconnectBackoff(base: 500, cap: 8_000, resetAfter: resetAfter),
      heartbeatInterval: heartbeat, maxPagesPerFetch: maxPagesPerFetch, random: SplitMix64(seed: seed),
      clock: { clock.now })
    expectedRandom = SplitMix64(seed: seed)
  }

  /// The delay the machine must draw next, if its bound is `bound`.
  mutating func delay(bound: UInt64) -> UInt64 {
    let delay = UInt64.random(in: 0...bound, using: &expectedRandom)
    #expect(delay <= bound)
    return delay
  }

  mutating func step(
    at time: UInt64, _ event: SyncEvent, _ expected: [SyncAction],
    sourceLocation: SourceLocation = #_sourceLocation
  ) {
    clock.now = time
    let actions = machine.handle(event)
    #expect(actions == expected, "at \(time), \(event)", sourceLocation: sourceLocation)
  }

  /// Start, connect and subscribe at `time`, answer the catch-up with nothing changed: live.
  mutating func goLive(at time: UInt64, extra: [SyncAction] = []) {
    step(at: time, .start(now: time), [.openConnection])
    connectToLive(at: time, extra: extra)
  }

  /// From `connecting`: opened, subscribed, nothing changed: live.
  mutating func connectToLive(at time: UInt64, extra: [SyncAction] = []) {
    step(at: time, .connectionOpened(now: time), [.subscribe(pages: machine.offlinePages.sorted())])
    step(at: time, .subscribed, [.sendCatchUp])
    step(
      at: time, .catchUpAnswered(changed: [:], gone: [], epochChanged: false),
      [.markSynced(time), .scheduleTimer(at: time + heartbeat)] + extra)
    #expect(machine.state == .live)
  }
}

@Suite struct SyncStateMachineTests {
  @Test func failedConnectsBackOffWithDoublingBoundsThenSubscribeComesBeforeCatchUp() {
    var trace = SyncTrace(pages: ["b", "a", "c"], seed: 42)
    trace.step(at: 0, .start(now: 0), [.openConnection])
    #expect(trace.machine.state == .connecting)
    var now: UInt64 = 100
    for bound: UInt64 in [500, 1_000, 2_000, 4_000, 8_000, 8_000] {
      let due = now + trace.delay(bound: bound)
      trace.step(at: now, .connectionFailed(now: now, reason: "refused"), [.scheduleTimer(at: due)])
      #expect(trace.machine.state == .disconnected && !trace.machine.isConnected)
      if due > now { trace.step(at: due - 1, .timerFired(now: due - 1), []) }
      trace.step(at: due, .timerFired(now: due), [.openConnection])
      now = due + 50
    }
    trace.step(at: now, .connectionOpened(now: now), [.subscribe(pages: [id("a"), id("b"), id("c")])])
    #expect(trace.machine.state == .subscribing && trace.machine.isConnected)
    // No catch-up before `subscribed`, whatever else happens meanwhile.
    trace.step(at: now, .catchUpAnswered(changed: [id("a"): 3], gone: [], epochChanged: false), [])
    trace.step(at: now, .mutationsQueued, [])
    trace.step(at: now + 5, .subscribed, [.sendCatchUp])
    trace.step(at: now + 5, .subscribed, [])
    #expect(trace.machine.state == .catchingUp)
    trace.step(
      at: now + 9, .catchUpAnswered(changed: [:], gone: [], epochChanged: false),
      [.markSynced(now + 9), .scheduleTimer(at: now + 9 + trace.heartbeat), .push])
  }

  @Test func reconfiguringKeepsTheAttemptCountAndAppliesFromTheNextUse() {
    var trace = SyncTrace(pages: ["a", "b", "c"], seed: 9)
    trace.step(at: 0, .start(now: 0), [.openConnection])
    var now: UInt64 = 10
    for bound: UInt64 in [500, 1_000] {
      let due = now + trace.delay(bound: bound)
      trace.step(at: now, .connectionFailed(now: now, reason: "refused"), [.scheduleTimer(at: due)])
      trace.step(at: due, .timerFired(now: due), [.openConnection])
      now = due + 1
    }
    // A reload lowers the backoff: the third failure's bound is the new base × 2², capped by the new cap.
    trace.machine.reconfigure(
      backoff: ReconnectBackoff(base: 100, cap: 300, resetAfter: 30_000), heartbeatInterval: 4_000,
      maxPagesPerFetch: 2)
    #expect(trace.machine.backoff.attempt == 2)
    let due = now + trace.delay(bound: 300)
    trace.step(at: now, .connectionFailed(now: now, reason: "refused"), [.scheduleTimer(at: due)])
    trace.step(at: due, .timerFired(now: due), [.openConnection])
    // Connected: the new heartbeat interval and fetch size are used.
    let live = due + 1
    trace.step(at: live, .connectionOpened(now: live), [.subscribe(pages: [id("a"), id("b"), id("c")])])
    trace.step(at: live, .subscribed, [.sendCatchUp])
    trace.step(
      at: live,
      .catchUpAnswered(changed: [id("a"): 1, id("b"): 2, id("c"): 3], gone: [], epochChanged: false),
      [.fetch(pages: [id("a"): 1, id("b"): 2])])
    trace.step(at: live + 1, .fetched(pages: [id("a"), id("b")], failed: []), [.fetch(pages: [id("c"): 3])])
    trace.step(
      at: live + 2, .fetched(pages: [id("c")], failed: []),
      [.markSynced(live + 2), .scheduleTimer(at: live + 2 + 4_000)])
  }

  @Test func reconnectNowSkipsTheBackoffOnlyWhileDisconnected() {
    var trace = SyncTrace(pages: ["a"], seed: 7)
    trace.step(at: 0, .reconnectNow, [])
    #expect(trace.machine.state == .idle)
    trace.step(at: 0, .start(now: 0), [.openConnection])
    trace.step(at: 1, .reconnectNow, [])
    let due = 2 + trace.delay(bound: 500)
    trace.step(at: 2, .connectionFailed(now: 2, reason: "refused"), [.scheduleTimer(at: due)])
    trace.step(at: 3, .reconnectNow, [.cancelTimer, .openConnection])
    #expect(trace.machine.state == .connecting)
    // The cancelled reconnect timer is stale if it fires anyway.
    trace.step(at: due + 1, .timerFired(now: due + 1), [])
    trace.connectToLive(at: due + 2)
    trace.step(at: due + 3, .reconnectNow, [])
  }

  @Test func settledOnlyWhenNothingIsFetchingSubscribingOrPushing() {
    var trace = SyncTrace(pages: ["a"])
    #expect(!trace.machine.isSettled)
    trace.goLive(at: 0)
    #expect(trace.machine.isSettled)
    trace.step(at: 1, .poked(page: id("a"), lastUpdatedTime: 3), [.fetch(pages: [id("a"): 3])])
    #expect(!trace.machine.isSettled)
    trace.step(at: 2, .fetched(pages: [id("a")], failed: []), [.markSynced(2)])
    #expect(trace.machine.isSettled)
    trace.step(at: 3, .offlineSetChanged(added: [id("b")], removed: []), [.subscribe(pages: [id("b")])])
    #expect(!trace.machine.isSettled)
    trace.step(at: 4, .subscribed, [.fetch(pages: [id("b"): 0])])
    trace.step(at: 5, .fetched(pages: [id("b")], failed: []), [.markSynced(5)])
    trace.step(at: 6, .mutationsQueued, [.push])
    #expect(!trace.machine.isSettled)
    trace.step(at: 7, .pushFailed(retryable: true), [])
    #expect(!trace.machine.isSettled && trace.machine.isPushDeferred)
    trace.step(at: 10_000, .timerFired(now: 10_000), [.scheduleTimer(at: 20_000), .push])
    trace.step(at: 10_001, .pushAnswered(moreQueued: false), [])
    #expect(trace.machine.isSettled && !trace.machine.isPushDeferred)
  }

  @Test func catchUpPurgesGoneAndFetchesChangedOfflinePagesInBatches() {
    var trace = SyncTrace(pages: ["a", "b", "c", "d", "e", "x"], maxPagesPerFetch: 2)
    trace.step(at: 0, .start(now: 0), [.openConnection])
    trace.step(at: 1, .connectionOpened(now: 1), [.subscribe(pages: ["a", "b", "c", "d", "e", "x"].map(id))])
    trace.step(at: 2, .subscribed, [.sendCatchUp])
    let changed: [EntityID: UInt64] = [
      id("e"): 5, id("d"): 4, id("c"): 3, id("b"): 2, id("a"): 1, id("stranger"): 9,
    ]
    trace.step(
      at: 3, .catchUpAnswered(changed: changed, gone: [id("x")], epochChanged: false),
      [.purge(pages: [id("x")]), .fetch(pages: [id("a"): 1, id("b"): 2])])
    #expect(trace.machine.state == .fetching)
    trace.step(
      at: 4, .fetched(pages: [id("a"), id("b")], failed: []), [.fetch(pages: [id("c"): 3, id("d"): 4])])
    trace.step(at: 5, .fetched(pages: [id("c"), id("d")], failed: []), [.fetch(pages: [id("e"): 5])])
    trace.step(
      at: 6, .fetched(pages: [id("e")], failed: []),
      [.markSynced(6), .scheduleTimer(at: 6 + trace.heartbeat)])
    #expect(trace.machine.state == .live)
  }

  @Test func aChangedEpochRefetchesEverythingInsteadOfFetchingTheChangedMap() {
    var trace = SyncTrace(pages: ["a", "b"])
    trace.step(at: 0, .start(now: 0), [.openConnection])
    trace.step(at: 1, .connectionOpened(now: 1), [.subscribe(pages: [id("a"), id("b")])])
    trace.step(at: 2, .subscribed, [.sendCatchUp])
    trace.step(
      at: 3, .catchUpAnswered(changed: [id("a"): 7, id("b"): 8], gone: [], epochChanged: true), [.refetchAll])
    // A poke while everything is refetched is fetched after it: its change may be newer.
    trace.step(at: 4, .poked(page: id("a"), lastUpdatedTime: 9), [])
    trace.step(at: 5, .fetched(pages: [id("a"), id("b")], failed: []), [.fetch(pages: [id("a"): 9])])
    trace.step(at: 6, .fetched(pages: [id("a")], failed: []), [.markSynced(6), .scheduleTimer(at: 10_006)])
  }

  @Test func pokesDuringCatchUpAndFetchAreNotLostAndKeepTheNewestTime() {
    var trace = SyncTrace(pages: ["a", "b", "c", "d"], maxPagesPerFetch: 2)
    trace.step(at: 0, .start(now: 0), [.openConnection])
    trace.step(at: 1, .connectionOpened(now: 1), [.subscribe(pages: ["a", "b", "c", "d"].map(id))])
    trace.step(at: 2, .poked(page: id("c"), lastUpdatedTime: 4), [])
    trace.step(at: 2, .subscribed, [.sendCatchUp])
    trace.step(at: 3, .poked(page: id("a"), lastUpdatedTime: 9), [])
    trace.step(at: 3, .poked(page: id("a"), lastUpdatedTime: 5), [])
    trace.step(at: 3, .poked(page: id("nope"), lastUpdatedTime: 5), [])
    trace.step(
      at: 4, .catchUpAnswered(changed: [id("a"): 7, id("b"): 2], gone: [], epochChanged: false),
      [.fetch(pages: [id("a"): 9, id("b"): 2])])
    // In flight: an older or equal poke is covered by the batch; a newer one is fetched after it.
    trace.step(at: 5, .poked(page: id("a"), lastUpdatedTime: 9), [])
    trace.step(at: 5, .poked(page: id("b"), lastUpdatedTime: 3), [])
    trace.step(at: 5, .poked(page: id("d"), lastUpdatedTime: 1), [])
    trace.step(
      at: 6, .fetched(pages: [id("a"), id("b")], failed: []), [.fetch(pages: [id("b"): 3, id("c"): 4])])
    trace.step(at: 7, .fetched(pages: [id("b"), id("c")], failed: []), [.fetch(pages: [id("d"): 1])])
    trace.step(at: 8, .fetched(pages: [id("d")], failed: []), [.markSynced(8), .scheduleTimer(at: 10_008)])
  }

  @Test func aLivePokeFetchesThatPageAndPokesDuringItsFetchCoalesce() {
    var trace = SyncTrace(pages: ["a", "b"])
    trace.goLive(at: 0)
    trace.step(at: 10, .poked(page: id("a"), lastUpdatedTime: 10), [.fetch(pages: [id("a"): 10])])
    trace.step(at: 11, .poked(page: id("a"), lastUpdatedTime: 11), [])
    trace.step(at: 12, .poked(page: id("a"), lastUpdatedTime: 12), [])
    trace.step(at: 12, .poked(page: id("b"), lastUpdatedTime: 4), [])
    trace.step(at: 12, .poked(page: id("elsewhere"), lastUpdatedTime: 4), [])
    trace.step(at: 13, .fetched(pages: [id("a")], failed: []), [.fetch(pages: [id("a"): 12, id("b"): 4])])
    trace.step(at: 14, .fetched(pages: [id("a"), id("b")], failed: []), [.markSynced(14)])
    #expect(trace.machine.state == .live)
  }

  @Test func aRefetchIsFetchedAgainAfterAFetchOfThatPageAlreadyOut() {
    var trace = SyncTrace(pages: ["a", "b"])
    trace.goLive(at: 0)
    trace.step(at: 10, .poked(page: id("a"), lastUpdatedTime: 10), [.fetch(pages: [id("a"): 10])])
    // A poke as new as the fetch out is coalesced into it; a refetch is not: that fetch was asked for before.
    trace.step(at: 11, .poked(page: id("a"), lastUpdatedTime: 10), [])
    trace.step(at: 11, .refetch(pages: [id("a"): 10, id("elsewhere"): 10]), [])
    trace.step(at: 12, .fetched(pages: [id("a")], failed: []), [.fetch(pages: [id("a"): 10])])
    // A poke of the refetch's time during it is coalesced.
    trace.step(at: 12, .poked(page: id("a"), lastUpdatedTime: 10), [])
    trace.step(at: 13, .fetched(pages: [id("a")], failed: []), [.markSynced(13)])
    // With nothing out, at once.
    trace.step(at: 14, .refetch(pages: [id("b"): 14]), [.fetch(pages: [id("b"): 14])])
    #expect(trace.machine.state == .live)
  }

  @Test func pushesWaitForLiveAndOnlyOneIsEverInFlight() {
    var trace = SyncTrace(pages: ["a"])
    trace.step(at: 0, .mutationsQueued, [])
    trace.goLive(at: 0, extra: [.push])
    trace.step(at: 1, .mutationsQueued, [])
    trace.step(at: 2, .pushAnswered(moreQueued: true), [.push])
    trace.step(at: 3, .mutationsQueued, [])
    trace.step(at: 4, .pushAnswered(moreQueued: false), [])
    trace.step(at: 5, .pushAnswered(moreQueued: true), [])  // nothing in flight: a stray answer
    trace.step(at: 6, .mutationsQueued, [.push])
    trace.step(at: 7, .pushFailed(retryable: false), [])
    trace.step(at: 8, .mutationsQueued, [.push])
    trace.step(at: 9, .pushAnswered(moreQueued: false), [])
  }

  @Test func aRetryableFailedPushIsSentAgainAtTheNextHeartbeatNotOnEachEdit() {
    var trace = SyncTrace(pages: ["a"])
    trace.goLive(at: 0)
    trace.step(at: 1, .mutationsQueued, [.push])
    trace.step(at: 2, .pushFailed(retryable: true), [])
    trace.step(at: 3, .mutationsQueued, [])
    trace.step(at: 10_000, .timerFired(now: 10_000), [.scheduleTimer(at: 20_000), .push])
    trace.step(at: 10_001, .pushFailed(retryable: true), [])
    // Or after a reconnect, once live, whichever comes first.
    let due = 10_002 + trace.delay(bound: 500)
    trace.step(at: 10_002, .connectionClosed(now: 10_002, reason: "lost"), [.scheduleTimer(at: due)])
    trace.step(at: due, .timerFired(now: due), [.openConnection])
    trace.connectToLive(at: due, extra: [.push])
  }

  @Test func aLostConnectionLeavesThePushUnansweredAndResubscribesTheWholeSet() {
    var trace = SyncTrace(pages: ["a", "b"], seed: 9)
    trace.goLive(at: 0)
    trace.step(at: 1, .mutationsQueued, [.push])
    trace.step(at: 2, .poked(page: id("a"), lastUpdatedTime: 2), [.fetch(pages: [id("a"): 2])])
    let due = 3 + trace.delay(bound: 500)
    trace.step(at: 3, .connectionClosed(now: 3, reason: "lost"), [.scheduleTimer(at: due)])
    #expect(!trace.machine.isConnected)
    // Answers of the lost connection, and edits meanwhile, start nothing.
    trace.step(at: 4, .pushAnswered(moreQueued: false), [])
    trace.step(at: 4, .fetched(pages: [id("a")], failed: []), [])
    trace.step(at: 4, .mutationsQueued, [])
    trace.step(at: 4, .offlineSetChanged(added: [id("c")], removed: [id("b")]), [])
    trace.step(at: due, .timerFired(now: due), [.openConnection])
    trace.step(at: due, .connectionOpened(now: due), [.subscribe(pages: [id("a"), id("c")])])
    trace.step(at: due, .subscribed, [.sendCatchUp])
    // The unanswered fetch is fetched again after the catch-up's pages, then the unanswered push goes.
    trace.step(
      at: due, .catchUpAnswered(changed: [:], gone: [], epochChanged: false), [.fetch(pages: [id("a"): 2])])
    trace.step(
      at: due + 1, .fetched(pages: [id("a")], failed: []),
      [.markSynced(due + 1), .scheduleTimer(at: due + 1 + trace.heartbeat), .push])
  }

  @Test(arguments: [SyncState.subscribing, .catchingUp, .fetching, .live])
  func aConnectionClosedInAnyConnectedStateSchedulesAReconnect(in target: SyncState) {
    var trace = SyncTrace(pages: ["a"], seed: 5)
    trace.step(at: 0, .start(now: 0), [.openConnection])
    let steps: [(SyncEvent, SyncState)] = [
      (.connectionOpened(now: 0), .subscribing), (.subscribed, .catchingUp),
      (.catchUpAnswered(changed: [id("a"): 1], gone: [], epochChanged: false), .fetching),
      (.fetched(pages: [id("a")], failed: []), .live),
    ]
    for (event, state) in steps where trace.machine.state != target {
      _ = trace.machine.handle(event)
      #expect(trace.machine.state == state)
    }
    let due = 1_000 + trace.delay(bound: 500)
    trace.step(at: 1_000, .connectionClosed(now: 1_000, reason: "lost"), [.scheduleTimer(at: due)])
    #expect(trace.machine.state == .disconnected)
    trace.step(at: due, .timerFired(now: due), [.openConnection])
    trace.step(at: due, .connectionOpened(now: due), [.subscribe(pages: [id("a")])])
  }

  @Test func aConnectionThatLastedResetsTheBackoffAndAShortOneDoesNot() {
    var trace = SyncTrace(pages: ["a"], seed: 3, resetAfter: 30_000)
    trace.step(at: 0, .start(now: 0), [.openConnection])
    var now: UInt64 = 0
    for bound: UInt64 in [500, 1_000, 2_000] {
      let due = now + trace.delay(bound: bound)
      trace.step(at: now, .connectionFailed(now: now, reason: "refused"), [.scheduleTimer(at: due)])
      trace.step(at: due, .timerFired(now: due), [.openConnection])
      now = due
    }
    // Up 29.999 s: too short, the bound keeps doubling.
    trace.connectToLive(at: now)
    var due = now + 29_999 + trace.delay(bound: 4_000)
    trace.step(
      at: now + 29_999, .connectionClosed(now: now + 29_999, reason: "lost"), [.scheduleTimer(at: due)])
    trace.step(at: due, .timerFired(now: due), [.openConnection])
    now = due
    // Up 30 s: reset, the next delay is drawn from 0...base again.
    trace.connectToLive(at: now)
    due = now + 30_000 + trace.delay(bound: 500)
    trace.step(
      at: now + 30_000, .connectionClosed(now: now + 30_000, reason: "lost"), [.scheduleTimer(at: due)])
    #expect(trace.machine.backoff.attempt == 1)
  }

  @Test func anIdleLiveDaemonSchedulesNothingButItsHeartbeat() {
    var trace = SyncTrace(pages: ["a", "b"])
    trace.goLive(at: 0)
    var actions: [SyncAction] = []
    var now: UInt64 = 0
    for _ in 0..<100 {
      now += trace.heartbeat
      trace.clock.now = now
      actions += trace.machine.handle(.timerFired(now: now))
    }
    let heartbeats = (1...100).map { SyncAction.scheduleTimer(at: UInt64($0 + 1) * trace.heartbeat) }
    #expect(actions == heartbeats)
  }

  @Test func aFailedFetchWithholdsMarkSyncedAndIsFetchedAgainAtTheHeartbeat() {
    var trace = SyncTrace(pages: ["a", "b"])
    trace.step(at: 0, .start(now: 0), [.openConnection])
    trace.step(at: 0, .connectionOpened(now: 0), [.subscribe(pages: [id("a"), id("b")])])
    trace.step(at: 0, .subscribed, [.sendCatchUp])
    trace.step(
      at: 1, .catchUpAnswered(changed: [id("a"): 3, id("b"): 4], gone: [], epochChanged: false),
      [.fetch(pages: [id("a"): 3, id("b"): 4])])
    trace.step(at: 2, .fetched(pages: [id("a")], failed: [id("b")]), [.scheduleTimer(at: 10_002)])
    trace.step(
      at: 10_002, .timerFired(now: 10_002), [.scheduleTimer(at: 20_002), .fetch(pages: [id("b"): 4])])
    trace.step(at: 10_003, .fetched(pages: [id("b")], failed: []), [.markSynced(10_003)])
  }

  @Test func aPokeForAPageWhoseFetchFailedFetchesItNowAndItsSuccessClearsTheFailure() {
    var trace = SyncTrace(pages: ["a"])
    trace.goLive(at: 0)
    trace.step(at: 1, .poked(page: id("a"), lastUpdatedTime: 3), [.fetch(pages: [id("a"): 3])])
    trace.step(at: 2, .fetched(pages: [], failed: [id("a")]), [])
    #expect(trace.machine.failedPages == [id("a")])
    // An older time (a sync's check, say) still asks for at least the newest time known.
    trace.step(at: 3, .poked(page: id("a"), lastUpdatedTime: 2), [.fetch(pages: [id("a"): 3])])
    trace.step(at: 4, .fetched(pages: [id("a")], failed: []), [.markSynced(4)])
    #expect(trace.machine.failedPages.isEmpty)
  }

  @Test func offlineSetChangesWhileLiveSubscribeTheDifferenceAndFetchAddedPagesOnceSubscribed() {
    var trace = SyncTrace(pages: ["a", "b"])
    trace.goLive(at: 0)
    trace.step(
      at: 1, .offlineSetChanged(added: [id("d"), id("c"), id("a")], removed: [id("b"), id("zz")]),
      [.subscribe(pages: [id("c"), id("d")]), .unsubscribe(pages: [id("b")])])
    trace.step(at: 1, .poked(page: id("b"), lastUpdatedTime: 5), [])
    trace.step(at: 2, .subscribed, [.fetch(pages: [id("c"): 0, id("d"): 0])])
    trace.step(at: 3, .fetched(pages: [id("c"), id("d")], failed: []), [.markSynced(3)])
    #expect(trace.machine.offlinePages == Set([id("a"), id("c"), id("d")]))
  }

  @Test func stopClosesCancelsAndThenNothingHappensWhateverComes() {
    var trace = SyncTrace(pages: ["a"])
    trace.goLive(at: 0)
    trace.step(at: 1, .stop, [.closeConnection, .cancelTimer])
    #expect(trace.machine.state == .stopped)
    let events: [SyncEvent] = [
      .start(now: 2), .timerFired(now: 10_000), .connectionOpened(now: 2),
      .connectionFailed(now: 2, reason: "x"),
      .connectionClosed(now: 2, reason: "x"), .subscribed,
      .catchUpAnswered(changed: [id("a"): 1], gone: [id("a")], epochChanged: true),
      .fetched(pages: [id("a")], failed: []), .poked(page: id("a"), lastUpdatedTime: 3), .mutationsQueued,
      .pushAnswered(moreQueued: true), .pushFailed(retryable: true),
      .offlineSetChanged(added: [id("b")], removed: [id("a")]), .stop,
    ]
    for event in events { trace.step(at: 20_000, event, []) }
    // Stopped while disconnected: only the reconnect timer to cancel.
    var other = SyncTrace(pages: ["a"])
    other.step(at: 0, .start(now: 0), [.openConnection])
    let due = other.delay(bound: 500)
    other.step(at: 0, .connectionFailed(now: 0, reason: "refused"), [.scheduleTimer(at: due)])
    other.step(at: 1, .stop, [.cancelTimer])
  }
}
