import DaemonCore
import DaemonCoreTestKit
import EventLoopTestKit
import SyncModel
import Testing

/// A scripted wiring: answers the machine's actions in a random order, with random failures, pokes, edits and
/// offline set changes, and checks the invariants after every step.
private struct RandomWiring {
  let clock = ManualClock()
  var machine: SyncStateMachine<SplitMix64>
  var random: SplitMix64
  let universe = (0..<12).map { id("p\($0)") }
  let maxPagesPerFetch = 3

  // What the wiring has under way.
  var connecting = false
  var open = false
  var timerAt: UInt64?
  var subscribesOutstanding = 0
  var subscribedOnThisConnection = false
  var catchUpOutstanding = false
  var fetchInFlight: [EntityID: UInt64]?
  var refetchAllInFlight = false
  var pushesInFlight = 0
  var stopped = false

  /// Poked offline pages not yet fetched to at least their poked time, and those whose last fetch failed since.
  var owed: [EntityID: UInt64] = [:]
  var owedFailed: Set<EntityID> = []
  /// Pages a `refetch` asked for that no fetch asked for since (one out before it does not count), those in the
  /// fetch out now, and those whose fetch failed since.
  var refetchOwed: Set<EntityID> = []
  var refetchInFlight: Set<EntityID> = []
  var refetchFailed: Set<EntityID> = []

  // Sync requests: asked, with a check out, answered (each exactly once).
  var lastSyncID: UInt64 = 0
  var syncsRequested: Set<SyncRequestID> = []
  var checksOut: Set<SyncRequestID> = []
  var syncsAnswered: Set<SyncRequestID> = []
  /// The event being handled, for the checks of the answers it may bring.
  var currentEvent: SyncEvent?

  init(seed: UInt64) {
    random = SplitMix64(seed: seed)
    let clock = clock
    machine = SyncStateMachine(
      offlinePages: Set((0..<8).map { id("p\($0)") }),
      backoff: ReconnectBackoff(base: 100, cap: 5_000, resetAfter: 20_000), heartbeatInterval: 15_000,
      maxPagesPerFetch: maxPagesPerFetch, random: SplitMix64(seed: seed &+ 1), clock: { clock.now })
  }

  mutating func chance(_ percent: UInt64) -> Bool { UInt64.random(in: 0..<100, using: &random) < percent }
  mutating func somePages() -> [EntityID] { universe.filter { _ in chance(25) } }

  /// One random event the wiring could deliver now.
  mutating func nextEvent() -> SyncEvent {
    clock.now += UInt64.random(in: 0...3_000, using: &random)
    let now = clock.now
    var candidates: [SyncEvent] = [
      .poked(page: universe.randomElement(using: &random)!, lastUpdatedTime: now), .mutationsQueued,
    ]
    if chance(5) { candidates.append(.offlineSetChanged(added: somePages(), removed: somePages())) }
    if chance(5) { candidates.append(.reconnectNow) }
    if chance(10) {
      var pages: [EntityID: UInt64] = [:]
      for page in somePages() { pages[page] = UInt64.random(in: 0...now, using: &random) }
      candidates.append(.refetch(pages: pages))
    }
    if chance(5) {
      lastSyncID += 1
      candidates.append(.syncRequested(SyncRequestID(lastSyncID)))
    }
    if chance(5),
      let asked = syncsRequested.sorted(by: { $0.rawValue < $1.rawValue }).randomElement(using: &random)
    {
      candidates.append(.syncTimedOut(asked))
    }
    // A check is not tied to the connection: its answer may come whenever (even after its request was answered).
    if let check = checksOut.sorted(by: { $0.rawValue < $1.rawValue }).randomElement(using: &random) {
      var changed: [EntityID: UInt64] = [:]
      for page in somePages() { changed[page] = UInt64.random(in: 0...now, using: &random) }
      candidates += [.syncCheckAnswered(check, changed: changed), .syncCheckFailed(check, .broker("down"))]
    }
    if let due = timerAt {
      clock.now = max(now, due)
      candidates.append(.timerFired(now: clock.now))
    }
    if connecting {
      candidates += [.connectionOpened(now: clock.now), .connectionFailed(now: clock.now, reason: "refused")]
    }
    if open {
      if chance(10) { candidates.append(.connectionClosed(now: clock.now, reason: "lost")) }
      if subscribesOutstanding > 0 { candidates.append(.subscribed) }
      if catchUpOutstanding {
        var changed: [EntityID: UInt64] = [:]
        for page in somePages() { changed[page] = UInt64.random(in: 0...now, using: &random) }
        let gone = chance(10) ? [universe.randomElement(using: &random)!] : []
        candidates.append(.catchUpAnswered(changed: changed, gone: gone, epochChanged: chance(10)))
      }
      if let batch = fetchInFlight {
        // Sorted: the draws must not depend on the process's hash seed, so a seed replays.
        let failed = batch.keys.sorted().filter { _ in chance(10) }
        candidates.append(
          .fetched(pages: batch.keys.sorted().filter { !failed.contains($0) }, failed: failed))
      }
      if pushesInFlight > 0 {
        candidates += [.pushAnswered(moreQueued: chance(50)), .pushFailed(retryable: chance(70))]
      }
    }
    return candidates.randomElement(using: &random)!
  }

  /// Feeds one event, performs the actions as the wiring would, and checks the invariants.
  mutating func step(_ event: SyncEvent) {
    let wasStopped = stopped
    record(event)
    let actions = machine.handle(event)
    if wasStopped {
      #expect(actions.isEmpty, "an action after stop: \(event) → \(actions)")
      return
    }
    currentEvent = event
    for action in actions { perform(action) }
    currentEvent = nil
    #expect(pushesInFlight <= 1)
    if machine.state == .live && fetchInFlight == nil {
      let unfetched = Set(owed.keys).subtracting(owedFailed)
      #expect(unfetched.isEmpty, "live and idle with poked pages unfetched: \(unfetched.sorted())")
      let notRefetched = refetchOwed.subtracting(refetchFailed)
      #expect(notRefetched.isEmpty, "live and idle with pages to refetch: \(notRefetched.sorted())")
    }
  }

  /// The wiring's side of an event it delivers.
  mutating func record(_ event: SyncEvent) {
    switch event {
    case .timerFired: timerAt = nil
    case .connectionOpened:
      connecting = false
      open = true
      subscribedOnThisConnection = false
    case .connectionFailed: connecting = false
    case .connectionClosed:
      // The wiring drops every answer the lost connection owed.
      open = false
      subscribesOutstanding = 0
      catchUpOutstanding = false
      fetchInFlight = nil
      pushesInFlight = 0
      refetchOwed.formUnion(refetchInFlight)
      refetchInFlight = []
    case .subscribed:
      subscribesOutstanding -= 1
      subscribedOnThisConnection = true
    case .catchUpAnswered(_, let gone, _):
      catchUpOutstanding = false
      for page in gone {
        owed[page] = nil
        refetchOwed.remove(page)
        refetchFailed.remove(page)
      }
    case .fetched(let pages, let failed):
      let batch = fetchInFlight ?? [:]
      for page in pages where refetchAllInFlight || (owed[page].map { batch[page] ?? 0 >= $0 } ?? false) {
        owed[page] = nil
      }
      owedFailed.formUnion(failed.filter { owed[$0] != nil })
      for page in pages where refetchInFlight.contains(page) { refetchFailed.remove(page) }
      for page in failed where refetchInFlight.contains(page) {
        refetchOwed.insert(page)
        refetchFailed.insert(page)
      }
      refetchInFlight = []
      fetchInFlight = nil
      refetchAllInFlight = false
    case .poked(let page, let time):
      if machine.offlinePages.contains(page) && machine.state != .idle {
        owed[page] = max(owed[page] ?? 0, time)
        owedFailed.remove(page)
        refetchFailed.remove(page)  // a failed page is fetched at once when poked
      }
    case .refetch(let pages):
      for page in pages.keys.sorted() where machine.offlinePages.contains(page) && machine.state != .idle {
        refetchOwed.insert(page)
        refetchFailed.remove(page)
      }
    case .pushAnswered, .pushFailed: pushesInFlight = 0
    case .offlineSetChanged(_, let removed):
      // A page both added and removed leaves the set: removed wins.
      for page in removed {
        owed[page] = nil
        owedFailed.remove(page)
        refetchOwed.remove(page)
        refetchInFlight.remove(page)
        refetchFailed.remove(page)
      }
    case .stop: stopped = true
    case .syncRequested(let request): syncsRequested.insert(request)
    case .syncCheckAnswered(let request, let changed):
      checksOut.remove(request)
      // Fetched as pokes are, if the request still waits for its check.
      guard !syncsAnswered.contains(request), machine.state != .idle else { break }
      for (page, time) in changed where machine.offlinePages.contains(page) {
        owed[page] = max(owed[page] ?? 0, time)
        owedFailed.remove(page)
      }
    case .syncCheckFailed(let request, _): checksOut.remove(request)
    case .start, .mutationsQueued, .reconnectNow, .syncTimedOut: break
    }
  }

  mutating func perform(_ action: SyncAction) {
    switch action {
    case .openConnection:
      #expect(!open && !connecting)
      connecting = true
    case .closeConnection: #expect(stopped)
    case .scheduleTimer(let at):
      #expect(at >= clock.now)
      timerAt = at
    case .cancelTimer: timerAt = nil
    case .subscribe(let pages):
      #expect(open && machine.isConnected)
      if !subscribedOnThisConnection && subscribesOutstanding == 0 {
        #expect(
          pages == machine.offlinePages.sorted(), "the first subscribe of a connection is the whole set")
      }
      subscribesOutstanding += 1
    case .unsubscribe: #expect(open && machine.isConnected)
    case .sendCatchUp:
      #expect(open && subscribedOnThisConnection, "catch-up before the whole set was subscribed")
      catchUpOutstanding = true
    case .fetch(let pages):
      #expect(open && machine.isConnected && fetchInFlight == nil)
      #expect(!pages.isEmpty && pages.count <= maxPagesPerFetch)
      #expect(pages.keys.allSatisfy(machine.offlinePages.contains))
      fetchInFlight = pages
      refetchInFlight = refetchOwed.intersection(pages.keys)
      refetchOwed.subtract(refetchInFlight)
    case .refetchAll:
      #expect(open && machine.isConnected && fetchInFlight == nil)
      fetchInFlight = Dictionary(uniqueKeysWithValues: machine.offlinePages.map { ($0, 0) })
      refetchAllInFlight = true
      refetchInFlight = refetchOwed.intersection(machine.offlinePages)
      refetchOwed.subtract(refetchInFlight)
    case .push:
      #expect(open && machine.state == .live && pushesInFlight == 0, "a push while not live or one in flight")
      pushesInFlight += 1
    case .markSynced, .purge: break
    case .checkForChanges(let request):
      #expect(
        syncsRequested.contains(request) && !syncsAnswered.contains(request) && !checksOut.contains(request))
      #expect(machine.isSettled, "a check before everything known was done")
      checksOut.insert(request)
    case .answerSync(let request, let outcome):
      #expect(syncsRequested.contains(request), "an answer to a sync never requested")
      #expect(syncsAnswered.insert(request).inserted, "a sync answered twice: \(request)")
      checkAnswer(outcome)
    }
  }

  /// Each outcome holds only in its own situation.
  func checkAnswer(_ outcome: SyncOutcome) {
    switch outcome {
    case .synced:
      #expect(machine.isSettled && machine.failedPages.isEmpty, "synced while \(machine.state)")
    case .unreachable: #expect(machine.state == .disconnected)
    case .pushFailed: #expect(machine.isPushDeferred)
    case .pagesNotFetched(let count):
      #expect(count > 0 && count == machine.failedPages.count && machine.isSettled)
    case .checkFailed:
      guard case .syncCheckFailed = currentEvent else {
        Issue.record("checkFailed after \(String(describing: currentEvent))")
        return
      }
    case .timedOut:
      guard case .syncTimedOut = currentEvent else {
        Issue.record("timedOut after \(String(describing: currentEvent))")
        return
      }
    case .stopped: #expect(currentEvent == .stop)
    }
  }
}

@Suite struct SyncStateMachineRandomTests {
  @Test(arguments: [1, 2, 3, 2_024] as [UInt64])
  func invariantsHoldOverThousandsOfRandomEventsAndPokedPagesAreFetchedOnceLive(seed: UInt64) {
    var wiring = RandomWiring(seed: seed)
    wiring.step(.start(now: 0))
    for _ in 0..<3_000 { wiring.step(wiring.nextEvent()) }
    // Quiesce: a reliable broker from now on; every poked offline page must get fetched.
    var steps = 0
    while steps < 1_000
      && !(wiring.machine.state == .live && wiring.fetchInFlight == nil && wiring.owed.isEmpty
        && wiring.checksOut.isEmpty && wiring.pushesInFlight == 0)
    {
      steps += 1
      if let check = wiring.checksOut.min(by: { $0.rawValue < $1.rawValue }) {
        wiring.step(.syncCheckAnswered(check, changed: [:]))
      } else if let batch = wiring.fetchInFlight {
        wiring.step(.fetched(pages: batch.keys.sorted(), failed: []))
      } else if wiring.connecting {
        wiring.step(.connectionOpened(now: wiring.clock.now))
      } else if wiring.subscribesOutstanding > 0 {
        wiring.step(.subscribed)
      } else if wiring.catchUpOutstanding {
        wiring.step(.catchUpAnswered(changed: [:], gone: [], epochChanged: false))
      } else if wiring.pushesInFlight > 0 {
        wiring.step(.pushAnswered(moreQueued: false))
      } else if let due = wiring.timerAt {
        wiring.clock.now = max(wiring.clock.now, due)
        wiring.step(.timerFired(now: wiring.clock.now))
      } else {
        break
      }
    }
    #expect(wiring.machine.state == .live)
    #expect(wiring.owed.isEmpty, "poked pages never fetched: \(wiring.owed.keys.sorted())")
    // Every sync asked for was answered, once.
    #expect(wiring.syncsRequested.count > 10 && wiring.syncsAnswered == wiring.syncsRequested)
    #expect(wiring.machine.waitingSyncRequests.isEmpty)
    // Stopped: nothing more, whatever comes.
    wiring.step(.stop)
    #expect(wiring.machine.state == .stopped)
    for _ in 0..<500 { wiring.step(wiring.nextEvent()) }
  }
}
