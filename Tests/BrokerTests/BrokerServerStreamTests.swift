import BrokerCore
import SyncProtocol
import Testing
import Web

@testable import Broker

/// Runs `body` with a fresh broker, then shuts it down (and checks that no handle was left), whatever happened.
func withBroker(
  configure: (inout BrokerConfiguration) -> Void = { _ in }, _ body: (BrokerHarness) throws -> Void
) throws {
  let harness = try BrokerHarness(configure: configure)
  var failure: (any Error)?
  do { try body(harness) } catch { failure = error }
  try harness.shutDown()
  if let failure { throw failure }
}

extension BrokerHarness {
  /// The fan-out's subscriber id of the session behind `socket`.
  func subscriber(of socket: EmbeddedStreamSocket) throws -> SubscriberID {
    try #require(broker.sessions.first { $0?.socket === socket }??.id)
  }

  func subscribe(_ socket: EmbeddedStreamSocket, _ pages: [String]) throws -> Frame {
    let ids = pages.map { "\"\($0)\"" }.joined(separator: ",")
    return try #require(try exchange(socket, #"{"op":"subscribe","pages":[\#(ids)]}"#).first)
  }

  func unsubscribe(_ socket: EmbeddedStreamSocket, _ pages: [String]) throws -> Frame {
    let ids = pages.map { "\"\($0)\"" }.joined(separator: ",")
    return try #require(try exchange(socket, #"{"op":"unsubscribe","pages":[\#(ids)]}"#).first)
  }
}

/// The broker's device streams driven in-process (`BrokerHarness`): what broker_api.py and broker_reload.py
/// check from outside, checked here at the moments that matter, which a client on a socket cannot see.
@Suite struct BrokerServerStreamTests {
  @Test func aBatchIsAnsweredAfterItsCommitAndItsSubscribersHearOfItOnlyAfterThat() throws {
    try withBroker { harness in
      let writer = harness.broker.writer
      let alice = try harness.openStream()
      let subscribed = try harness.subscribe(alice, ["home", "elsewhere"])
      #expect(subscribed.op == "subscribed" && subscribed.added == 2 && subscribed.denied == [])
      // What the store had committed when each notification left, and what had left when the answer came.
      let committedBefore = writer.jobsCommitted
      var committedAtNotification: [Int] = []
      alice.onSend = { _ in committedAtNotification.append(writer.jobsCommitted) }
      let pending = harness.pushBatch(client: "laptop", [.create("home", title: "Home")])
      var framesAtAnswer: Int?
      var committedAtAnswer: Int?
      pending.onResponse = { _ in
        framesAtAnswer = alice.frames.count
        committedAtAnswer = writer.jobsCommitted
      }
      #expect(pending.response == nil, "nothing is answered before the writer thread commits")
      try harness.run(until: { pending.response != nil })
      #expect(pending.response?.status == .ok)
      #expect(committedAtAnswer == committedBefore + 1, "answered once committed")
      #expect(framesAtAnswer == 1, "no notification before the answer")
      try harness.waitForFrames(alice, count: 2)
      let sequence = try #require(try harness.decode(BatchAnswer.self, pending.response!).sequence)
      #expect(try Frame(alice.frames[1]).pages == ["home": sequence], "the changed page at its new time")
      #expect(committedAtNotification == [committedBefore + 1], "every notification left after the commit")
    }
  }

  /// B6 (memory per idle connection): an open stream keeps of its upgrade request only what a reload needs to
  /// authorize it again (the Authorization header, the target), and no array for frames once they are answered.
  /// (That a reload authorizes it from what it kept: `aNarrowedGrantRevokesAtOnceAndARemovedTokenCloses`.)
  @Test func anIdleStreamKeepsOnlyItsCredentialsAndNoFrameQueue() throws {
    try withBroker { harness in
      let alice = try harness.openStream()
      #expect(alice.request?.headers.map(\.name) == ["Authorization"])
      #expect(alice.request?.head.target == "/v1/stream")
      let subscribed = try harness.subscribe(alice, ["home"])
      #expect(subscribed.op == "subscribed" && subscribed.added == 1)
      let session = try #require(harness.broker.sessions.first { $0?.socket === alice } ?? nil)
      #expect(!session.holdsWaitingFrames, "an idle session keeps no array for waiting frames")
    }
  }

  /// B6 (memory per idle connection): a session hears its socket as the socket's delegate, not through closures
  /// set on it, each of which kept a context (holding the session `unowned`) for as long as the stream was open.
  @Test func aSessionIsItsSocketsDelegateAndNoClosureHoldsIt() throws {
    try withBroker { harness in
      let alice = try harness.openStream()
      _ = try harness.subscribe(alice, ["home"])
      let session = try #require(harness.broker.sessions.first { $0?.socket === alice } ?? nil)
      #expect(alice.delegate === session)
      #expect(_getUnownedRetainCount(session) == 1, "a closure holds the session unowned")
      let before = alice.frames.count
      alice.receiveBinary([1])
      try harness.waitForFrames(alice, count: before + 1)
      #expect(
        alice.frames.last?.contains("frames are JSON text") == true, "binary frames still get their error")
      alice.closeFromDevice()
      #expect(session.isClosed && alice.delegate == nil)
      #expect(harness.broker.sessions.allSatisfy { $0 == nil }, "the broker forgot the closed session")
    }
  }

  @Test func subscribersOfAnotherWorkspaceHearNothing() throws {
    try withBroker { harness in
      let alice = try harness.openStream(token: BrokerHarness.alice)
      let bob = try harness.openStream(token: BrokerHarness.bob)
      // Neither page exists yet: both may subscribe to both, and learn of each only in their workspace.
      for socket in [alice, bob] { #expect(try harness.subscribe(socket, ["shared", "bobs"]).added == 2) }
      let shared = try harness.commit(client: "laptop", workspace: "w1", [.create("shared", title: "w1's")])
      try harness.waitForFrames(alice, count: 2)
      // Bob's frame, had there been one, went out in the same flush as Alice's.
      #expect(try alice.changedPages() == ["shared": shared])
      #expect(try bob.changedPages() == [:])
      let bobs = try harness.commit(
        client: "bob-laptop", workspace: "w2", token: BrokerHarness.bob, [.create("bobs", title: "w2's")])
      try harness.waitForFrames(bob, count: 2)
      #expect(try bob.changedPages() == ["bobs": bobs])
      #expect(try alice.changedPages() == ["shared": shared])
      // And now that the page exists, subscribing to it again from the other workspace is denied.
      #expect(try harness.subscribe(bob, ["shared"]).denied == ["shared"])
    }
  }

  @Test func unsubscribingDropsWhatIsPendingForThosePages() throws {
    try withBroker { harness in
      let alice = try harness.openStream()
      _ = try harness.subscribe(alice, ["p1", "p2"])
      // A slow reader: the broker stops writing to it and lets notifications wait in its queue.
      alice.queuedBytes = harness.broker.configuration.limits.pendingBytesPerConnection
      let sequence = try harness.commit(
        client: "laptop", [.create("p1", title: "one"), .create("p2", title: "two")])
      let subscriber = try harness.subscriber(of: alice)
      #expect(harness.broker.fanOut.pendingCount(of: subscriber) == 2)
      #expect(try harness.unsubscribe(alice, ["p1"]) == Frame(op: "unsubscribed", removed: 1, total: 1))
      #expect(harness.broker.fanOut.pendingCount(of: subscriber) == 1)
      let before = alice.frames.count
      alice.drain()
      try harness.waitForFrames(alice, count: before + 1)
      #expect(try Frame(alice.frames[before]).pages == ["p2": sequence], "p1's notification was dropped")
      #expect(harness.broker.fanOut.pendingCount(of: subscriber) == 0)
    }
  }

  @Test func framesWaitWhileTheStoreIsReadAndAreAnsweredInOrder() throws {
    try withBroker { harness in
      try harness.commit(client: "laptop", [.create("a1", title: "1"), .create("a2", title: "2")])
      let alice = try harness.openStream(token: BrokerHarness.alice)
      let bob = try harness.openStream(token: BrokerHarness.bob)
      var order: [String] = []
      alice.onSend = { order.append("alice " + ((try? Frame($0).op) ?? "?")) }
      bob.onSend = { order.append("bob " + ((try? Frame($0).op) ?? "?")) }
      // Nobody follows a1 and a2: Alice's subscribe reads the store, and her next frames wait for it, unread.
      alice.receive(#"{"op":"subscribe","pages":["a1","a2"]}"#)
      #expect(harness.broker.isReadingStore && alice.isReadingPaused)
      alice.receive(#"{"op":"unsubscribe","pages":["a1","a2"]}"#)
      alice.receive(#"{"op":"subscribe","pages":["a2"]}"#)
      // Bob's frame waits too, and then finds the pages in the index: no second read.
      bob.receive(#"{"op":"subscribe","pages":["a1","a2"]}"#)
      #expect(bob.isReadingPaused)
      try harness.run(until: { alice.frames.count == 3 && bob.frames.count == 1 })
      #expect(
        try alice.decodedFrames() == [
          Frame(op: "subscribed", added: 2, total: 2, denied: []),
          Frame(op: "unsubscribed", removed: 2, total: 0),
          Frame(op: "subscribed", added: 1, total: 1, denied: []),
        ])
      #expect(try bob.decodedFrames() == [Frame(op: "subscribed", added: 0, total: 0, denied: ["a1", "a2"])])
      // Bob's waited for Alice's read, then went before her frames that her socket had not read meanwhile.
      #expect(order == ["alice subscribed", "bob subscribed", "alice unsubscribed", "alice subscribed"])
      // Two pages for Alice's first frame, none for Bob's, and a2 again: its channel went with her unsubscribe.
      #expect(harness.broker.pageWorkspaces.pagesRead == 3)
      #expect(!alice.isReadingPaused && !bob.isReadingPaused)
    }
  }

  @Test func aBadFrameGetsTheCataloguedErrorAndTheStreamStays() throws {
    try withBroker { harness in
      let alice = try harness.openStream()
      let invalid = BrokerProtocol.StreamErrorCode.invalidMessage.rawValue
      let notJSON = try harness.exchange(alice, "{not json")
      #expect(notJSON.map(\.op) == ["error"] && notJSON.first?.code == invalid)
      #expect(notJSON.first?.message?.hasPrefix("invalid message: ") == true, "\(notJSON)")
      alice.receiveBinary(Array(#"{"op":"subscribe","pages":[]}"#.utf8))
      try harness.waitForFrames(alice, count: 2)
      #expect(
        try Frame(alice.frames[1]) == Frame(op: "error", code: invalid, message: "frames are JSON text"))
      let unknown = try harness.exchange(alice, #"{"op":"dance"}"#)
      #expect(
        unknown == [
          Frame(
            op: "error", code: invalid, message: #"unknown op "dance": expected subscribe or unsubscribe"#)
        ])
      #expect(try harness.subscribe(alice, ["still-here"]).added == 1)
      let metrics = try harness.request(.GET, "/metrics", token: nil).body.readableString
      #expect(metrics.contains("pagesync_broker_stream_errors_total{code=\"\(invalid)\"} 3"), "\(metrics)")
    }
  }

  @Test func aNarrowedGrantRevokesAtOnceAndARemovedTokenCloses() throws {
    var afterNarrowing = BrokerHarness.tokens
    afterNarrowing[2].workspaces = [id("w1")]
    try withBroker { harness in
      try harness.commit(client: "laptop", workspace: "w1", [.create("notes", title: "n")])
      try harness.commit(
        client: "bob-laptop", workspace: "w2", token: BrokerHarness.bob, [.create("plans", title: "p")])
      let dana = try harness.openStream(token: BrokerHarness.dana)
      #expect(try harness.subscribe(dana, ["notes", "plans"]).added == 2)
      let subscriber = try harness.subscriber(of: dana)
      // A w2 notification waits for Dana's slow socket when the reload takes w2 away.
      dana.queuedBytes = harness.broker.configuration.limits.pendingBytesPerConnection
      try harness.commit(
        client: "bob-laptop", workspace: "w2", token: BrokerHarness.bob, [.setTitle("plans", "p2")])
      #expect(harness.broker.fanOut.pendingCount(of: subscriber) == 1)
      var narrowed = harness.broker.configuration
      narrowed.tokens = afterNarrowing
      harness.broker.reload(narrowed)
      #expect(
        harness.broker.fanOut.pendingCount(of: subscriber) == 0, "dropped at once, before any store read")
      let before = dana.frames.count
      try harness.waitForFrames(dana, count: before + 1)
      #expect(try Frame(dana.frames[before]) == Frame(op: "revoked", total: 1, revokedPages: ["plans"]))
      dana.drain()
      // A change of each page: only the one Dana may still see reaches her (plans first, so that its flush,
      // had it anything for her, came no later than that of notes).
      try harness.commit(
        client: "bob-laptop", workspace: "w2", token: BrokerHarness.bob, [.setTitle("plans", "p3")])
      let notes = try harness.commit(client: "laptop", workspace: "w1", [.setTitle("notes", "n2")])
      try harness.waitForFrames(dana, count: before + 2)
      #expect(try dana.decodedFrames()[(before + 1)...].map(\.pages) == [["notes": notes]])
      // Her token removed altogether: the stream is closed with the catalogued reason, and counted.
      var removed = narrowed
      removed.tokens.remove(at: 2)
      harness.broker.reload(removed)
      let reason = BrokerProtocol.StreamCloseReason.tokenRevoked
      #expect(dana.closedWith?.code.rawValue == reason.code && dana.closedWith?.reason == reason.reason)
      try harness.run(until: { harness.broker.streamCount == 0 })
      let metrics = try harness.request(.GET, "/metrics", token: nil).body.readableString
      #expect(metrics.contains("pagesync_broker_stream_closes_total{code=\"1008\"} 1"), "\(metrics)")
    }
  }

  @Test func aNarrowedStreamHearsNothingUntilItsWithdrawalIsDone() throws {
    var afterNarrowing = BrokerHarness.tokens
    afterNarrowing[2].workspaces = [id("w1")]
    try withBroker { harness in
      try harness.commit(client: "laptop", workspace: "w1", [.create("notes", title: "n")])
      try harness.commit(
        client: "bob-laptop", workspace: "w2", token: BrokerHarness.bob, [.create("plans", title: "p")])
      let dana = try harness.openStream(token: BrokerHarness.dana)
      #expect(try harness.subscribe(dana, ["notes", "plans"]).added == 2)
      dana.queuedBytes = harness.broker.configuration.limits.pendingBytesPerConnection
      let notes = try harness.commit(client: "laptop", workspace: "w1", [.setTitle("notes", "n2")])
      var narrowed = harness.broker.configuration
      narrowed.tokens = afterNarrowing
      harness.broker.reload(narrowed)
      // The socket drains while the store is asked which pages w2 took away: nothing goes out yet (a page of a
      // workspace the index does not number would otherwise slip through), and then the revocation comes first.
      let before = dana.frames.count
      dana.drain()
      #expect(dana.frames.count == before, "notifications wait for the withdrawal")
      try harness.waitForFrames(dana, count: before + 2)
      let frames = try dana.decodedFrames()[before...]
      #expect(frames.map(\.op) == ["revoked", "changed"])
      #expect(frames.last?.pages == ["notes": notes])
    }
  }

  @Test func oneUsersStreamsShareTheSubscriptionsPerUserLimit() throws {
    let perUser: (inout BrokerConfiguration) -> Void = { $0.limits.subscriptionsPerUser = 3 }
    try withBroker(configure: perUser) { harness in
      let laptop = try harness.openStream()
      let phone = try harness.openStream()
      #expect(
        try harness.subscribe(laptop, ["a", "b"]) == Frame(op: "subscribed", added: 2, total: 2, denied: []))
      #expect(
        try harness.subscribe(phone, ["c", "d", "e"])
          == Frame(op: "subscribed", added: 1, total: 1, denied: ["d", "e"]))
      // Another user has a quota of their own.
      let bob = try harness.openStream(token: BrokerHarness.bob)
      #expect(try harness.subscribe(bob, ["x", "y", "z"]).added == 3)
      // What one stream gives back, another may take; a subscription held already does not count twice.
      _ = try harness.unsubscribe(laptop, ["a"])
      #expect(try harness.subscribe(phone, ["c", "d", "e"]).denied == ["e"])
      // A closed stream gives back all of its subscriptions.
      laptop.closeFromDevice()
      try harness.run(until: { harness.broker.subscriptionQuota.count(of: "alice") == 2 })
      #expect(try harness.subscribe(phone, ["e"]).added == 1)
      #expect(harness.broker.subscriptionQuota.count(of: "alice") == 3)
    }
  }

  @Test func shutdownClosesEveryStreamWithTheCataloguedReason() throws {
    let harness = try BrokerHarness()
    let alice = try harness.openStream()
    try harness.shutDown()
    let reason = BrokerProtocol.StreamCloseReason.shuttingDown
    #expect(
      alice.closedWith == WebSocketCloseInfo(code: .goingAway, reason: reason.reason, initiatedByPeer: false))
    #expect(reason.code == WebSocketCloseCode.goingAway.rawValue)
    #expect(harness.broker.streamCount == 0)
  }
}

extension Frame {
  init(
    op: String, pages: [String: UInt64]? = nil, added: Int? = nil, removed: Int? = nil, total: Int? = nil,
    denied: [String]? = nil, revokedPages: [String]? = nil, code: Int? = nil, message: String? = nil
  ) {
    self.op = op
    self.pages = pages
    self.added = added
    self.removed = removed
    self.total = total
    self.denied = denied
    self.revokedPages = revokedPages
    self.code = code
    self.message = message
  }
}
