import DaemonCore
import DaemonCoreTestKit
import SyncModel
import Testing

private let s1 = SyncRequestID(1)
private let s2 = SyncRequestID(2)

/// `pagesync sync` as events of the machine: reconnect at once, an extra catch-up check once settled, what it
/// found fetched, one answer per request.
@Suite struct SyncStateMachineSyncRequestTests {
  @Test func aSyncWhileDisconnectedReconnectsChecksOnceSettledAndAnswersAfterFetchingWhatTheCheckFound() {
    var trace = SyncTrace(pages: ["a", "b"], seed: 4)
    trace.step(at: 0, .start(now: 0), [.openConnection])
    let due = 1 + trace.delay(bound: 500)
    trace.step(at: 1, .connectionFailed(now: 1, reason: "refused"), [.scheduleTimer(at: due)])
    // No waiting out the backoff.
    trace.step(at: 2, .syncRequested(s1), [.cancelTimer, .openConnection])
    trace.step(at: 3, .connectionOpened(now: 3), [.subscribe(pages: [id("a"), id("b")])])
    trace.step(at: 4, .subscribed, [.sendCatchUp])
    // The connection's own catch-up and fetch come first: no check while anything is under way.
    trace.step(
      at: 5, .catchUpAnswered(changed: [id("a"): 3], gone: [], epochChanged: false),
      [.fetch(pages: [id("a"): 3])])
    #expect(trace.machine.waitingSyncRequests == [s1])
    trace.step(
      at: 6, .fetched(pages: [id("a")], failed: []),
      [.markSynced(6), .scheduleTimer(at: 6 + trace.heartbeat), .checkForChanges(s1)])
    // What the check found is fetched (offline pages only) before the answer.
    trace.step(
      at: 7, .syncCheckAnswered(s1, changed: [id("b"): 4, id("a"): 5, id("stranger"): 9]),
      [.fetch(pages: [id("a"): 5, id("b"): 4])])
    trace.step(
      at: 8, .fetched(pages: [id("a"), id("b")], failed: []), [.markSynced(8), .answerSync(s1, .synced)])
    #expect(trace.machine.waitingSyncRequests.isEmpty)
  }

  @Test func aSyncWhileLiveAndSettledChecksAtOnceAndAnswersWhenTheCheckFindsNothing() {
    var trace = SyncTrace(pages: ["a"])
    trace.goLive(at: 0)
    trace.step(at: 1, .syncRequested(s1), [.checkForChanges(s1)])
    // A second request for the same id is the same request.
    trace.step(at: 1, .syncRequested(s1), [])
    trace.step(at: 2, .syncCheckAnswered(s1, changed: [:]), [.answerSync(s1, .synced)])
  }

  @Test func aSyncThatCannotConnectIsAnsweredUnreachable() {
    var trace = SyncTrace(pages: ["a"], seed: 2)
    trace.step(at: 0, .start(now: 0), [.openConnection])
    // While connecting it waits for the attempt.
    trace.step(at: 0, .syncRequested(s1), [])
    let due = 1 + trace.delay(bound: 500)
    trace.step(
      at: 1, .connectionFailed(now: 1, reason: "refused"),
      [.scheduleTimer(at: due), .answerSync(s1, .unreachable)])
    // Requested while disconnected: one attempt at once; its failure answers.
    trace.step(at: 2, .syncRequested(s2), [.cancelTimer, .openConnection])
    let again = 3 + trace.delay(bound: 1_000)
    trace.step(
      at: 3, .connectionFailed(now: 3, reason: "refused"),
      [.scheduleTimer(at: again), .answerSync(s2, .unreachable)])
  }

  @Test func aSyncWaitsForThePushInFlightAndFailsWhenItIsDeferred() {
    var trace = SyncTrace(pages: ["a"])
    trace.goLive(at: 0)
    trace.step(at: 1, .mutationsQueued, [.push])
    trace.step(at: 2, .syncRequested(s1), [])
    trace.step(at: 3, .pushAnswered(moreQueued: true), [.push])
    trace.step(at: 4, .pushFailed(retryable: true), [.answerSync(s1, .pushFailed)])
    // Once the deferred push went through at the heartbeat, a new sync checks as usual.
    trace.step(at: 5, .syncRequested(s2), [.answerSync(s2, .pushFailed)])
    trace.step(at: 10_000, .timerFired(now: 10_000), [.scheduleTimer(at: 20_000), .push])
    trace.step(at: 10_001, .pushAnswered(moreQueued: false), [])
    trace.step(at: 10_002, .syncRequested(SyncRequestID(3)), [.checkForChanges(SyncRequestID(3))])
  }

  @Test func pagesTheCheckFoundThatCannotBeFetchedFailTheSync() {
    var trace = SyncTrace(pages: ["a", "b"])
    trace.goLive(at: 0)
    trace.step(at: 1, .syncRequested(s1), [.checkForChanges(s1)])
    trace.step(at: 2, .syncCheckAnswered(s1, changed: [id("a"): 5]), [.fetch(pages: [id("a"): 5])])
    trace.step(at: 3, .fetched(pages: [], failed: [id("a")]), [.answerSync(s1, .pagesNotFetched(1))])
  }

  @Test func aFailedCheckAnswersAtOnceAndLateAnswersOfAnsweredRequestsChangeNothing() {
    var trace = SyncTrace(pages: ["a"])
    trace.goLive(at: 0)
    trace.step(at: 1, .syncRequested(s1), [.checkForChanges(s1)])
    trace.step(
      at: 2, .syncCheckFailed(s1, .broker("catch-up failed")),
      [.answerSync(s1, .checkFailed(.broker("catch-up failed")))])
    // The check's answer after all, a second failure, a timeout: the request is gone.
    trace.step(at: 3, .syncCheckAnswered(s1, changed: [id("a"): 9]), [])
    trace.step(at: 3, .syncCheckFailed(s1, .localStore("x")), [])
    trace.step(at: 3, .syncTimedOut(s1), [])
    // A check failure for a request that is not checking is not its answer either.
    trace.step(at: 4, .mutationsQueued, [.push])
    trace.step(at: 5, .syncRequested(s2), [])
    trace.step(at: 6, .syncCheckFailed(s2, .broker("stray")), [])
    trace.step(at: 7, .pushAnswered(moreQueued: false), [.checkForChanges(s2)])
  }

  @Test func aTimedOutSyncIsAnsweredOnceAndNotAgainWhenTheConnectionFails() {
    var trace = SyncTrace(pages: ["a"], seed: 8)
    trace.step(at: 0, .start(now: 0), [.openConnection])
    trace.step(at: 1, .syncRequested(s1), [])
    trace.step(at: 2, .syncTimedOut(s1), [.answerSync(s1, .timedOut)])
    trace.step(at: 2, .syncTimedOut(s1), [])
    let due = 3 + trace.delay(bound: 500)
    trace.step(at: 3, .connectionFailed(now: 3, reason: "refused"), [.scheduleTimer(at: due)])
  }

  @Test func aConnectionLostDuringTheCheckIsJudgedWhenTheCheckAnswersAndItsPagesAreFetchedLater() {
    var trace = SyncTrace(pages: ["a"], seed: 6)
    trace.goLive(at: 0)
    trace.step(at: 1, .syncRequested(s1), [.checkForChanges(s1)])
    let due = 2 + trace.delay(bound: 500)
    trace.step(at: 2, .connectionClosed(now: 2, reason: "lost"), [.scheduleTimer(at: due)])
    trace.step(at: 3, .syncCheckAnswered(s1, changed: [id("a"): 5]), [.answerSync(s1, .unreachable)])
    trace.step(at: due, .timerFired(now: due), [.openConnection])
    trace.step(at: due, .connectionOpened(now: due), [.subscribe(pages: [id("a")])])
    trace.step(at: due, .subscribed, [.sendCatchUp])
    trace.step(
      at: due, .catchUpAnswered(changed: [:], gone: [], epochChanged: false), [.fetch(pages: [id("a"): 5])])
  }

  @Test func syncsRequestedTogetherAreEachCheckedAndAnsweredAndStopAnswersTheRest() {
    var trace = SyncTrace(pages: ["a"])
    trace.goLive(at: 0)
    trace.step(at: 1, .poked(page: id("a"), lastUpdatedTime: 2), [.fetch(pages: [id("a"): 2])])
    trace.step(at: 1, .syncRequested(s1), [])
    trace.step(at: 1, .syncRequested(s2), [])
    trace.step(
      at: 2, .fetched(pages: [id("a")], failed: []),
      [.markSynced(2), .checkForChanges(s1), .checkForChanges(s2)])
    trace.step(at: 3, .syncCheckAnswered(s2, changed: [:]), [.answerSync(s2, .synced)])
    trace.step(at: 4, .stop, [.closeConnection, .cancelTimer, .answerSync(s1, .stopped)])
    trace.step(at: 5, .syncCheckAnswered(s1, changed: [:]), [])
    trace.step(at: 5, .syncRequested(SyncRequestID(3)), [])
  }

  @Test func aSyncBeforeStartWaitsForTheFirstConnection() {
    var trace = SyncTrace(pages: ["a"])
    trace.step(at: 0, .syncRequested(s1), [])
    #expect(trace.machine.state == .idle)
    trace.step(at: 1, .start(now: 1), [.openConnection])
    trace.connectToLive(at: 2, extra: [.checkForChanges(s1)])
  }
}
