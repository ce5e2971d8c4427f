import BrokerCore
import BrokerStore
import ByteBuffers
import EventLoop
import SyncModel
import SyncProtocol
import Web

#if canImport(Glibc)
  import Glibc
#endif

// Device streams: the server owns the sessions and calls them; a session asks the server only through
// `StreamSessionHost`. What the streams decide (subscriptions, queues, workspaces, who is dirty) is the `FanOut`'s;
// this is the wiring around it: store reads, sockets, frames, logs.

extension BrokerServer {
  // MARK: Notifications

  /// After a commit: every subscriber of a changed page that may see its workspace gets it queued (coalesced),
  /// and the queues are flushed at the end of this loop turn; with a bus, `sequence` (the batch's) goes with the
  /// pages to the other brokers.
  func publish(_ pages: [EntityID: UInt64], workspaces: [EntityID: EntityID], sequence: UInt64? = nil) {
    withFanOut { fanOut in
      for (page, time) in pages {
        guard let workspace = workspaces[page] else { continue }
        fanOut.publish(pageID: page.rawValue, workspace: workspace.rawValue, lastUpdated: time)
      }
    }
    if fanOut.hasDirtySubscribers { flushWakeup?.signal() }
    // Then the other brokers (BrokerServer+Bus.swift); a page other brokers committed comes in through
    // `busDelivered`, never through here, so nothing goes back to the bus.
    if let sequence, bus.carriesCommits { publishToBus(pages, workspaces: workspaces, sequence: sequence) }
  }

  /// Runs `body` on the fan-out in place. Calling its methods through `fanOut` one by one makes a copy of the
  /// channel index each time (a retain of every array); on a per-page path that costs more than the work.
  func withFanOut<Result>(_ body: (inout FanOut) throws -> Result) rethrows -> Result {
    try body(&fanOut)
  }

  /// Runs `body` on the channel index (read only), without copying it.
  func withChannels<Result>(_ body: (ChannelIndex) throws -> Result) rethrows -> Result {
    try withFanOut { try body($0.index) }
  }

  /// Writes what is pending for every session queued something since the last flush (the fan-out's dirty list):
  /// once per loop turn, after the commits' publishes.
  func flushDirtySessions() {
    withFanOut { $0.takeDirty(into: &flushing) }
    for subscriber in flushing {
      if let session = sessions[Int(subscriber.rawValue)] { flush(session) }
    }
  }

  /// Writes a session's pending notifications while its socket has room, `pagesPerFrame` pages a frame.
  func flush(_ session: StreamSession) {
    let socket = session.socket
    let limit = configuration.limits.pendingBytesPerConnection
    // Whether more is pending is learned with each drain, so that a queue written whole (the usual case: this
    // runs for every subscriber of a commit) costs no further round of socket checks and drains.
    guard !session.notificationsHeld else { return }
    var pending = true
    // What the socket could not take waits for its drain callback (and only then is the fan-out asked again).
    defer { session.notificationsWaitForDrain = pending && socket.isOpen }
    while pending && socket.isOpen && socket.queuedBytes < limit {
      drainBuffer.removeAll(keepingCapacity: true)
      let drained = withFanOut { fanOut in
        let drained = fanOut.drain(session.id, max: Self.pagesPerFrame, into: &drainBuffer)
        pending = fanOut.pendingCount(of: session.id) > 0
        return drained
      }
      guard drained > 0 else {
        pending = false
        return
      }
      if drained == 1 {
        // At once: after a one-page commit this is the subscriber's only frame of the turn, and an idle socket
        // then needs no queue (docs/benchmarks.md, "B1 at low rates").
        socket.sendNow(encodedFrame: changedFrame(drainBuffer[0].page, drainBuffer[0].lastUpdatedTime))
      } else {
        let pages = withChannels { channels in
          var pages: [String: UInt64] = [:]
          for entry in drainBuffer { pages[channels.pageID(for: entry.page)] = entry.lastUpdatedTime }
          return pages
        }
        socket.send(text: BrokerProtocol.Changed(pages: pages).jsonText)
      }
      notificationsSent += drained
    }
  }

  /// Most pages in one `changed` frame.
  static let pagesPerFrame = 1000

  /// The `changed` frame of one page, encoded. After a commit that changed one page, every subscriber that was
  /// keeping up gets exactly that frame: it is written once and its bytes shared (server frames are not masked).
  /// A key and a time name one page: the time is the sequence of the batch whose publish queued the entry, when
  /// the key stood for that page, and entries of a page are dropped when it loses its key.
  func changedFrame(_ page: PageKey, _ time: UInt64) -> ByteBuffer {
    if let cached = lastChangedFrame, cached.page == page, cached.time == time { return cached.frame }
    let id = withChannels { $0.pageID(for: page) }
    let frame = WebSocket.encodeServerFrame(text: BrokerProtocol.Changed(pages: [id: time]).jsonText)
    lastChangedFrame = (page, time, frame)
    return frame
  }

  // MARK: Opening and closing

  /// A stream the route accepted: authorized again from its upgrade request (closed with 1008 if that fails),
  /// then a session of its own.
  func openStream(_ socket: any StreamSocket) {
    guard let request = socket.request, case .success(let grant) = authenticator.authenticate(request.head)
    else {
      let reason = BrokerProtocol.StreamCloseReason.notAuthorized
      socket.onClose = { [metrics] info in metrics.streamClosed(code: info.code.rawValue) }
      socket.close(code: WebSocketCloseCode(reason.code), reason: reason.reason)
      return
    }
    // The request is kept for reloads, which authorize the stream again from it: only what that reads.
    socket.keepRequest(headers: Authenticator.requestHeaders)
    let id = withFanOut { $0.addSubscriber(workspaces: grant.workspaceIDs) }
    let connection = nextConnection
    nextConnection += 1
    let session = StreamSession(
      id: id, connection: connection, socket: socket, grant: grant, host: self, json: json)
    if sessions.count <= Int(id.rawValue) { sessions.append(nil) }
    sessions[Int(id.rawValue)] = session
    scheduleExpiry(of: session)
    holdBusWorkspaces(of: session)
    streamCount += 1
    logger.debug(
      "stream opened", metadata: ["broker.connection.id": "\(connection)", "broker.user": "\(grant.user)"])
  }

  /// Arms (or re-arms, after a reload) the timer that closes `session` with 4401 when its JWT expires: at
  /// `expiresAt`, the second its token stops verifying, so a device that reconnects with the same token is
  /// refused rather than let in again.
  func scheduleExpiry(of session: StreamSession) {
    guard let expiresAt = session.grant.expiresAt else {
      session.expiryTimer?.close()
      session.expiryTimer = nil
      return
    }
    let timer = session.expiryTimer ?? LoopTimer(loop: loop)
    session.expiryTimer = timer
    let delay = max(1, expiresAt * 1000 - Self.wallClockMillis())
    timer.start(after: UInt64(delay)) { [weak self, weak session] in
      guard let self, let session, !session.isClosed else { return }
      // The loop's clock is in whole milliseconds and may run a little ahead of the wall clock's: never close
      // before the token really stops verifying (a reconnect with it would be let in again).
      guard Self.wallClockMillis() >= expiresAt * 1000 else { return self.scheduleExpiry(of: session) }
      session.close(.tokenExpired)
      self.logger.info(
        "stream closed: token expired", metadata: ["broker.connection.id": "\(session.connection)"])
    }
  }

  /// The wall clock in milliseconds since 1970 (a token's `exp` is wall-clock time).
  public static func wallClockMillis() -> Int64 {
    var spec = timespec()
    clock_gettime(CLOCK_REALTIME, &spec)
    return Int64(spec.tv_sec) * 1000 + Int64(spec.tv_nsec) / 1_000_000
  }

  /// After a reload narrowed `session`'s grant: ends the subscriptions to pages it may no longer see and tells
  /// the device which (`revoked`). Notifications of them stopped at once (`FanOut.setWorkspaces`); which pages
  /// those are takes a store read. If the store cannot tell, the stream is closed so that the device subscribes
  /// again under its new grant.
  func withdrawInaccessible(_ session: StreamSession) {
    let candidates = withFanOut { $0.subscribedPageIDs(of: session.id) }.compactMap {
      try? EntityID(validating: $0)
    }
    guard !candidates.isEmpty else { return }
    // Until the store says which pages are out of reach, nothing pending goes out: `setWorkspaces` dropped what
    // the index could place in a workspace, and this holds the rest (pages of workspaces it does not number).
    session.notificationsHeld = true
    let box = storeBox
    let workspaces = session.grant.workspaces
    writer.read(
      on: loop,
      { _ -> [EntityID] in try box.store.pagesOutside(workspaces: workspaces, among: candidates) },
      completion: { [unowned self] result in
        guard !session.isClosed, session.socket.isOpen else { return }
        guard case .success(let outside) = result else {
          session.close(.accessChanged)
          return
        }
        let (pages, total) = withFanOut { fanOut in
          (
            fanOut.unsubscribe(session.id, fromPageIDs: outside.lazy.map(\.rawValue)),
            fanOut.subscriptionCount(of: session.id)
          )
        }
        self.recountSubscriptions(of: session)
        session.notificationsHeld = false
        if !pages.isEmpty {
          session.send(BrokerProtocol.Revoked(revokedPages: pages, total: total))
          logger.notice(
            "subscriptions revoked",
            metadata: ["broker.connection.id": "\(session.connection)", "pages": "\(pages.count)"])
        }
        self.flush(session)
      })
  }

  /// Records a session's subscription count in the per-user quota (after anything that changed it).
  func recountSubscriptions(of session: StreamSession) {
    let count = session.isClosed ? 0 : withFanOut { $0.subscriptionCount(of: session.id) }
    subscriptionQuota.record(user: session.quotaUser, from: session.countedSubscriptions, to: count)
    session.countedSubscriptions = count
  }

  /// The subscriptions `session` may hold after its next subscribe: its own limit, or less if its user's other
  /// streams hold most of the user's.
  func subscriptionLimit(of session: StreamSession) -> Int {
    subscriptionQuota.limit(
      for: session.quotaUser, holding: session.countedSubscriptions,
      perConnection: configuration.limits.subscriptionsPerConnection,
      perUser: configuration.limits.subscriptionsPerUser)
  }
}

extension BrokerServer: StreamSessionHost {
  var isReadingStore: Bool { pageWorkspaces.isReading }

  func whenStoreIdle(_ body: @escaping () -> Void) { pageWorkspaces.whenIdle(body) }

  func subscribeKnownPages(of frame: String, for session: StreamSession) -> BrokerProtocol.Subscribed? {
    let limit = subscriptionLimit(of: session)
    let outcome = withFanOut { fanOut -> FanOut.Subscription? in
      guard let keys = IndexedSubscribe.keys(of: frame, fanOut.index) else { return nil }
      return fanOut.subscribe(session.id, knownPages: keys, limit: limit)
    }
    if outcome != nil { recountSubscriptions(of: session) }
    return outcome.map { BrokerProtocol.Subscribed(added: $0.added, total: $0.total, denied: $0.denied) }
  }

  func subscribe(
    _ pages: [EntityID], denied: [String], for session: StreamSession,
    completion: @escaping (Result<BrokerProtocol.Subscribed, any Error>) -> Void
  ) {
    pageWorkspaces.lookUp(pages) { [unowned self] result in
      guard !session.isClosed else { return }
      let limit = subscriptionLimit(of: session)
      defer { recountSubscriptions(of: session) }
      completion(
        result.map { workspaces in
          let outcome = withFanOut { fanOut in
            switch workspaces {
            case .inIndex(let keys):
              return fanOut.subscribe(session.id, knownPages: keys, limit: limit)
            case .read(let found):
              let read = zip(pages, found).map { page, facts in
                FanOut.StorePage(
                  id: page.rawValue, workspace: facts?.workspace.rawValue,
                  lastUpdated: facts?.lastUpdated ?? 0)
              }
              return fanOut.subscribe(session.id, storePages: read, limit: limit)
            }
          }
          return BrokerProtocol.Subscribed(
            added: outcome.added, total: outcome.total, denied: denied + outcome.denied)
        })
    }
  }

  func unsubscribe(_ pageIDs: [String], for session: StreamSession) -> BrokerProtocol.Unsubscribed {
    defer { recountSubscriptions(of: session) }
    return withFanOut { fanOut in
      BrokerProtocol.Unsubscribed(
        removed: fanOut.unsubscribe(session.id, fromPageIDs: pageIDs).count,
        total: fanOut.subscriptionCount(of: session.id))
    }
  }

  func flushNotifications(to session: StreamSession) { flush(session) }

  func session(_ session: StreamSession, sent error: BrokerProtocol.StreamErrorCode) {
    metrics.streamErrorSent(error)
  }

  func sessionClosed(_ session: StreamSession, _ info: WebSocketCloseInfo) {
    session.expiryTimer?.close()
    session.expiryTimer = nil
    let removed = withFanOut { $0.removeSubscriber(session.id) }
    bus.release(session.busWorkspaces)
    session.busWorkspaces = []
    subscriptionQuota.record(user: session.quotaUser, from: session.countedSubscriptions, to: 0)
    session.countedSubscriptions = 0
    sessions[Int(session.id.rawValue)] = nil
    streamCount -= 1
    metrics.streamClosed(code: info.code.rawValue)
    logger.debug(
      "stream closed",
      metadata: [
        "broker.connection.id": "\(session.connection)", "broker.close": "\(info)",
        "broker.subscriptions": "\(removed)",
      ])
  }
}
