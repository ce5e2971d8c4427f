import Backoff
import BrokerCore
import EventLoop
import Logging
import RedisWire

/// The bus through Redis pub/sub: two connections on the broker's loop, one that PUBLISHes this broker's commits
/// and one SUBSCRIBEd to the channels of the workspaces its device streams may see (`BusSubscriptions`) and to
/// `resync`. What decides (connecting, retrying with backoff, when to catch up, when a `resync` is owed) is the
/// `BusLinkStateMachine`'s; this performs it.
///
/// Bounds: what is queued toward Redis on the publishing connection is at most `[bus] buffer_bytes` (a message
/// past it is dropped, logged once per episode, counted, and repaid with a `resync` when there is room); a message
/// read is at most `[bus] message_bytes` (a longer one is a RESP error: the connection is dropped and retried).
///
/// Threading: the broker's loop only.
final class RedisBus: BrokerBus {
  private let loop: Loop
  private let configuration: BusConfiguration
  /// This broker's instance id (its own messages come back on its channels and are ignored).
  let origin: String
  private let epoch: String
  private var logger: Logger
  private var link: BusLinkStateMachine
  private var subscriptions = BusSubscriptions()
  private var publisher: RedisLink?
  private var subscriber: RedisLink?
  /// Subscription confirmations still awaited for the last `subscribeAll`.
  private var awaitedConfirmations = 0
  private var timer: LoopTimer?
  /// Pings both connections every `[bus] ping_interval_ms` while they are open.
  private var pingTimer: LoopTimer?
  /// Pings sent and not answered yet.
  private var pingsAwaited = 0
  /// Bumped at each attempt, so that callbacks of an abandoned attempt do nothing.
  private var attempt = 0
  private var random = SystemRandomNumberGenerator()
  private var onChange: ((BusChange) -> Void)?
  private var onCatchUp: ((String) -> Void)?
  private var overflowing = false
  private var counts = BusFigures()

  init(loop: Loop, configuration: BusConfiguration, origin: String, epoch: String, logger: Logger) {
    self.loop = loop
    self.configuration = configuration
    self.origin = origin
    self.epoch = epoch
    self.logger = logger
    link = BusLinkStateMachine(
      backoff: ReconnectBackoff(
        base: configuration.backoffBase, cap: configuration.backoffCap, resetAfter: configuration.backoffReset
      ))
    counts.kind = "redis"
  }

  // MARK: BrokerBus

  func start(onChange: @escaping (BusChange) -> Void, onCatchUp: @escaping (String) -> Void) {
    self.onChange = onChange
    self.onCatchUp = onCatchUp
    let timer = LoopTimer(loop: loop)
    timer.keepsLoopAlive = false
    self.timer = timer
    let pingTimer = LoopTimer(loop: loop)
    pingTimer.keepsLoopAlive = false
    self.pingTimer = pingTimer
    pingTimer.start(after: configuration.pingInterval, repeatEvery: configuration.pingInterval) {
      [weak self] in
      self?.ping()
    }
    perform(link.start())
  }

  var carriesCommits: Bool { true }

  func publish(sequence: UInt64, clock: String, workspace: String, pages: [BusChange.Page]) {
    guard link.isLive, let publisher else {
      counts.dropped += 1
      link.publishDropped()
      return
    }
    let messages = BusChange.messages(
      origin: origin, epoch: epoch, sequence: sequence, clock: clock, workspace: workspace, pages: pages,
      maxBytes: configuration.messageBytes)
    let channel = BusMessage.channel(ofWorkspace: workspace)
    for message in messages {
      guard publisher.queuedBytes + message.count <= configuration.bufferBytes else {
        counts.dropped += 1
        link.publishDropped()
        if !overflowing {
          overflowing = true
          logger.warning(
            """
            bus: messages dropped, more than [bus] buffer_bytes queued toward redis; devices on other brokers \
            will catch up from the store
            """,
            metadata: ["broker.bus.queued_bytes": "\(publisher.queuedBytes)"])
        }
        continue
      }
      publisher.send(["PUBLISH", channel, String(decoding: message, as: UTF8.self)])
      counts.published += 1
    }
  }

  func hold(_ workspaces: Set<String>) {
    let added = subscriptions.hold(workspaces)
    if isSubscribing { send("SUBSCRIBE", added) }
  }

  func release(_ workspaces: Set<String>) {
    let removed = subscriptions.release(workspaces)
    if isSubscribing { send("UNSUBSCRIBE", removed) }
  }

  /// Never, even while the link is live: another broker's commit can miss this broker's channel index in two
  /// windows the bus cannot close. A workspace's SUBSCRIBE is confirmed some time after it is sent (a stream that
  /// just opened), and a page a device subscribes is entered with its time as read from the store, so a message
  /// about it that arrives between that read and the entry is dropped (nobody followed the page yet). Either way
  /// the index keeps an older time than the store, and a catch-up answered from it would tell the device nothing
  /// changed. So with a bus every catch-up reads the store (on a reader thread, one snapshot), as before the index
  /// answered them; the bus carries pushes, and a lost push is what the catch-up after each (re)connection covers.
  var indexIsCurrent: Bool { false }

  var figures: BusFigures {
    var figures = counts
    figures.connected = link.isLive
    figures.reconnects = link.reconnects
    figures.channels = subscriptions.workspaceCount + 1
    figures.state =
      switch link.state {
      case .stopped: "stopped"
      case .connecting: "connecting"
      case .subscribing: "subscribing"
      case .live: "live"
      case .waiting: "waiting"
      }
    return figures
  }

  func close() {
    link.stop()
    attempt += 1
    timer?.close()
    timer = nil
    pingTimer?.close()
    pingTimer = nil
    publisher?.close()
    subscriber?.close()
    publisher = nil
    subscriber = nil
  }

  // MARK: Performing the link's actions

  /// Whether SUBSCRIBE/UNSUBSCRIBE go out as streams come and go (else the next `subscribeAll` sends the set).
  private var isSubscribing: Bool { link.state == .subscribing || link.state == .live }

  private func perform(_ action: BusLinkStateMachine.Action) {
    switch action {
    case .none: break
    case .connect: connect()
    case .subscribeAll:
      let channels = subscriptions.channels
      awaitedConfirmations = channels.count
      send("SUBSCRIBE", channels)
    case .catchUp(let publishResync):
      timer?.stop()
      counts.catchUps += 1
      logger.info("bus: live", metadata: ["broker.bus.channels": "\(subscriptions.workspaceCount + 1)"])
      if publishResync { sendResync() }
      onCatchUp?("the bus is live")
    case .publishResync: sendResync()
    case .retry(let delay):
      publisher?.close()
      subscriber?.close()
      publisher = nil
      subscriber = nil
      attempt += 1
      timer?.start(after: delay) { [weak self] in
        guard let self else { return }
        self.perform(self.link.retryDue(at: self.loop.now))
      }
    }
  }

  /// `command` (SUBSCRIBE, UNSUBSCRIBE) of `channels` on the subscribed connection, in commands of at most 1,000
  /// names: a grant of 100,000 workspaces would otherwise be one huge request.
  private func send(_ command: String, _ channels: [String]) {
    var start = 0
    while start < channels.count {
      let end = min(start + 1000, channels.count)
      subscriber?.send([command] + channels[start..<end])
      start = end
    }
  }

  /// A connection that has not answered the last ping by now is lost; else both are pinged again.
  private func ping() {
    guard isSubscribing, let publisher, let subscriber else { return }
    guard pingsAwaited == 0 else {
      failed("redis did not answer PING within [bus] ping_interval_ms (\(configuration.pingInterval) ms)")
      return
    }
    pingsAwaited = 2
    publisher.send(["PING"])
    subscriber.send(["PING"])
  }

  private func sendResync() {
    guard let publisher else { return }
    publisher.send(
      [
        "PUBLISH", BusMessage.resyncChannel,
        String(decoding: BusMessage.resync(origin: origin).encoded, as: UTF8.self),
      ])
    counts.published += 1
  }

  private func connect() {
    attempt += 1
    pingsAwaited = 0
    let current = attempt
    var opened: [RedisLink] = []
    // Opening and subscribing must finish within `connect_timeout_ms`.
    timer?.start(after: configuration.connectTimeout) { [weak self] in
      guard let self, current == self.attempt else { return }
      for link in opened { link.close() }
      self.failed("connecting to redis timed out ([bus] connect_timeout_ms)")
    }
    for role in 0..<2 {
      RedisLink.connect(loop: loop, to: configuration.address, maxMessageBytes: configuration.messageBytes) {
        [weak self] result in
        guard let self, current == self.attempt else {
          if case .success(let link) = result { link.close() }
          return
        }
        switch result {
        case .failure(let error):
          for link in opened { link.close() }
          self.failed("cannot connect to redis at \(self.configuration.address): \(error)")
        case .success(let link):
          opened.append(link)
          link.onFailure = { [weak self] reason in
            guard let self, current == self.attempt else { return }
            self.failed(reason)
          }
          if role == 0 {
            self.publisher = link
            link.onReply = { [weak self] reply in self?.publisherReplied(reply) }
            link.onDrain = { [weak self] in self?.publisherDrained() }
          } else {
            self.subscriber = link
            link.onReply = { [weak self] reply in self?.subscriberReplied(reply) }
            link.onMessage = { [weak self] channel, payload in self?.received(channel, payload) }
          }
          if self.publisher != nil && self.subscriber != nil {
            self.perform(self.link.connected(at: self.loop.now))
          }
        }
      }
    }
  }

  private func failed(_ reason: String) {
    let lostWrites = (publisher?.queuedBytes ?? 0) > 0
    let wasLive = link.isLive
    let action = link.failed(at: loop.now, lostWrites: lostWrites, using: &random)
    guard action != .none else { return }
    if wasLive {
      logger.error("bus: lost redis; retrying", metadata: ["reason": "\(reason)"])
    } else {
      logger.warning("bus: redis unreachable; retrying", metadata: ["reason": "\(reason)"])
    }
    perform(action)
  }

  private func publisherReplied(_ reply: RESPValue) {
    if reply == .simple("PONG") {
      pingsAwaited = max(0, pingsAwaited - 1)
    } else if case .error(let message) = reply {
      logger.error("bus: redis refused a PUBLISH", metadata: ["reason": "\(message)"])
      counts.dropped += 1
      link.publishDropped()
    }
  }

  private func publisherDrained() {
    guard overflowing else { return }
    overflowing = false
    logger.notice("bus: the buffer toward redis drained; asking other brokers to catch up")
    perform(link.publishRoom())
  }

  private func subscriberReplied(_ reply: RESPValue) {
    guard case .array(let parts?) = reply, let first = parts.first, case .bulk(let kind?) = first else {
      if case .error(let message) = reply { failed("redis refused a SUBSCRIBE: \(message)") }
      return
    }
    if kind.elementsEqual("pong".utf8) {
      pingsAwaited = max(0, pingsAwaited - 1)
    } else if kind.elementsEqual("subscribe".utf8), awaitedConfirmations > 0 {
      awaitedConfirmations -= 1
      if awaitedConfirmations == 0 { perform(link.subscribed()) }
    }
  }

  private func received(_ channel: UnsafeRawBufferPointer, _ payload: UnsafeRawBufferPointer) {
    counts.received += 1
    let message: BusMessage
    do {
      message = try BusMessage.decode(Array(payload), maxBytes: configuration.messageBytes)
    } catch {
      counts.refused += 1
      // At most one line a second, however much garbage arrives.
      if loop.now >= nextRefusalLog {
        nextRefusalLog = loop.now + 1000
        logger.warning(
          "bus: message refused",
          metadata: [
            "reason": "\(error)",
            "broker.bus.channel": "\(String(decoding: channel.prefix(80), as: UTF8.self))",
          ])
      }
      return
    }
    switch message {
    case .resync(let from):
      guard from != origin else { return }
      counts.catchUps += 1
      onCatchUp?("broker \(from) lost bus messages")
    case .changed(let change):
      guard change.origin != origin else { return }
      guard change.epoch == epoch else {
        counts.refused += 1
        if loop.now >= nextRefusalLog {
          nextRefusalLog = loop.now + 1000
          logger.warning(
            "bus: message of another store's epoch ignored (is every broker on the same store?)",
            metadata: ["broker.bus.epoch": "\(change.epoch)", "broker.bus.origin": "\(change.origin)"])
        }
        return
      }
      onChange?(change)
    }
  }

  private var nextRefusalLog: UInt64 = 0
}
