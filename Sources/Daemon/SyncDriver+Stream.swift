import DaemonCore
import SyncModel
import SyncProtocol
import Web

/// The device stream: opening it for a connection, subscribing in frames, reading the broker's frames into
/// events, and closing it. Loop thread only.
extension SyncDriver {
  /// Ids per `subscribe` frame: 5,000 ids of up to 64 bytes stay under the broker's default 4 MiB frame limit.
  static let idsPerFrame = 5_000

  func openConnection() {
    counters.connectionAttempts += 1
    generation += 1
    let current = generation
    // The broker the failover chose: the stream and, from now on, every request go there.
    link.select(broker: min(machine.broker, link.brokerCount - 1))
    let url = brokerURL
    record { try store.recordSyncAttempt(nowMillis: WallClock.millis()) }
    link.openStream(
      pingInterval: UInt64(configuration.heartbeatSeconds) * 1000, maxMessageSize: 64 << 20
    ) { [weak self] result in
      guard let self else { return }
      guard current == generation else {
        if case .success(let stream) = result { stream.close(reason: "") }
        return
      }
      switch result {
      case .failure(let error):
        lastError = "\(url): \(error.description)"
        logger.notice("cannot connect to the broker", metadata: ["url": "\(url)", "error": "\(error)"])
        // The upgrade refused 401: the token is stale; the next attempt, after the backoff delay, gets another.
        if case .status(401, let message) = error { tokenRefused("401 \(message)") }
        handle(.connectionFailed(now: loop.now, reason: lastError ?? error.description))
      case .success(let stream):
        opened(stream, generation: current, url: url)
      }
    }
  }

  private func opened(_ stream: any BrokerStream, generation current: Int, url: HTTPURL) {
    self.stream = stream
    subscribeAnswersAwaited = []
    lastError = nil
    tokens.accepted()
    counters.streamsOpened += 1
    stream.onFrame = { [weak self] frame in self?.received(frame, generation: current) }
    stream.onClose = { [weak self, unowned stream] close in
      guard let self else { return }
      closedStreamBytes.received += stream.bytes.received
      closedStreamBytes.sent += stream.bytes.sent
      guard current == generation else { return }
      generation += 1
      self.stream = nil
      lastError = "\(url): the stream closed: \(close)"
      logger.notice("lost the broker stream", metadata: ["url": "\(url)", "reason": "\(close)"])
      // Closed for its token (expired, revoked): the reconnect gets a fresh one.
      if Self.refusesToken(close) { tokenRefused("\(close.code) \(close.reason)") }
      handle(.connectionClosed(now: loop.now, reason: close.description))
    }
    logger.info("connected to the broker", metadata: ["url": "\(url)"])
    handle(.connectionOpened(now: loop.now))
  }

  /// The machine closes the connection (the daemon stops): what its requests answer from now on is not fed back.
  func closeConnection(reason: String) {
    generation += 1
    stream?.close(reason: reason)
    stream = nil
  }

  /// A connection's trouble that the machine must hear as a lost connection: close the stream and report it.
  /// `brokerLost` false: the trouble is not the broker's (a token, the local store): the next connection goes to
  /// the same broker of the list.
  func dropConnection(_ reason: String, generation expected: Int, brokerLost: Bool = true) {
    guard expected == generation else { return }
    lastError = "\(brokerURL): \(reason)"
    logger.warning(
      "dropping the broker connection", metadata: ["url": "\(brokerURL)", "reason": "\(reason)"])
    closeConnection(reason: "")
    handle(.connectionClosed(now: loop.now, reason: reason, brokerLost: brokerLost))
  }

  func subscribe(_ pages: [EntityID]) {
    guard let stream else { return }
    let chunks = Self.chunks(pages)
    subscribeAnswersAwaited.append(chunks.count)
    for chunk in chunks { stream.subscribe(chunk) }
  }

  func unsubscribe(_ pages: [EntityID]) {
    guard let stream else { return }
    for chunk in Self.chunks(pages) { stream.unsubscribe(chunk) }
  }

  /// `pages` in frames of at most `idsPerFrame`; at least one frame, so an empty set is still answered.
  static func chunks(_ pages: [EntityID]) -> [ArraySlice<EntityID>] {
    guard !pages.isEmpty else { return [[]] }
    return stride(from: 0, to: pages.count, by: idsPerFrame).map {
      pages[$0..<min($0 + idsPerFrame, pages.count)]
    }
  }

  private func received(_ frame: BrokerStreamFrame, generation expected: Int) {
    guard expected == generation else { return }
    switch frame {
    case .unreadable(let text):
      logger.warning("an unreadable stream message", metadata: ["message": "\(text)"])
    case .message(.changed(let changed)):
      counters.notificationsReceived += changed.pages.count
      for (name, time) in changed.pages {
        guard let page = try? EntityID(validating: name) else { continue }
        handle(.poked(page: page, lastUpdatedTime: time))
      }
    case .message(.subscribed(let subscribed)):
      if let first = subscribed.denied.first {
        logger.warning(
          "the broker denied subscriptions",
          metadata: ["count": "\(subscribed.denied.count)", "first": "\(first)"])
      }
      guard !subscribeAnswersAwaited.isEmpty else { return }
      subscribeAnswersAwaited[0] -= 1
      if subscribeAnswersAwaited[0] == 0 {
        subscribeAnswersAwaited.removeFirst()
        handle(.subscribed)
      }
    case .message(.unsubscribed): break
    case .message(.revoked(let revoked)):
      // The token may no longer see these pages (a reload on the broker narrowed it): the broker stopped
      // notifying them. Their local copies go and the offline ones are marked missing, as for pages gone at a
      // catch-up; edits still queued for them are kept (and will be refused, then kept as conflicts), and their
      // reasons stay, so access given back brings them again at the next connection.
      let pages = revoked.revokedPages.compactMap { try? EntityID(validating: $0) }
      logger.warning(
        "the broker revoked subscriptions: the token may no longer see these pages",
        metadata: ["count": "\(pages.count)", "first": "\(pages.first?.rawValue ?? "")"])
      pagesGone(pages)
    case .message(.error(let error)):
      logger.warning(
        "the broker reported a stream error",
        metadata: ["code": "\(error.code)", "message": "\(error.message)"])
      // 4500: the broker could not check a subscription (its store was unreachable: PostgreSQL restarting) and
      // subscribed nothing; the pages asked for would never be notified, nor fetched. Drop the connection: the
      // next one (after the usual backoff) subscribes the whole set again and catches up.
      if error.code == BrokerProtocol.StreamErrorCode.subscriptionNotChecked.rawValue {
        dropConnection("the broker could not check a subscription: \(error.message)", generation: expected)
      }
    case .message(.unknown(let op)):
      logger.debug("an unknown stream message", metadata: ["op": "\(op)"])
    }
  }
}
