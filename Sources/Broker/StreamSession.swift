import BrokerCore
import BrokerStore
import FoundationEssentials
import StrictJSON
import SyncModel
import SyncProtocol
import Web

/// One device's `/v1/stream` WebSocket. Its subscriptions and pending notifications are the broker's `FanOut`'s,
/// under `id`.
///
/// Pending notifications are coalesced per page (a page waits at most once, with its newest time), and written
/// out only while the socket has less than `pendingBytesPerConnection` queued: a slow reader's notifications pile
/// up as at most one entry per subscribed page, not as bytes, and it is never dropped for being slow.
///
/// Threading: the broker's loop thread.
final class StreamSession {
  /// Its subscriber id in the fan-out (reused once the stream closed).
  let id: SubscriberID
  /// Its number for logs (never reused).
  let connection: UInt64
  let socket: WebSocket
  /// Replaced when a reload changes what the device's token may see (`BrokerServer.reload`).
  var grant: Grant
  unowned let broker: BrokerServer
  /// Set once the broker forgot it (its id may then stand for another stream).
  var isClosed = false

  init(id: SubscriberID, connection: UInt64, socket: WebSocket, grant: Grant, broker: BrokerServer) {
    self.id = id
    self.connection = connection
    self.socket = socket
    self.grant = grant
    self.broker = broker
    socket.onText = { [unowned self] text in self.received(text) }
    socket.onBinary = { [unowned self] _ in self.fail(4400, "frames are JSON text") }
    socket.onDrain = { [unowned self] in if !self.isClosed { self.broker.flush(self) } }
    socket.onClose = { [unowned self] info in self.broker.closeSession(self, info) }
  }

  private func received(_ text: String) {
    waitingFrames.append(text)
    processFrames()
  }

  /// Frames wait here, as text, while a `subscribe` waits for the store (its own, or another device's that the
  /// broker is reading for), so that a device's frames take effect, and are answered, in the order it sent them.
  /// Reading pauses meanwhile, which bounds the queue to what one read delivered.
  private var waitingFrames: [String] = []
  private var waitingForStore = false
  private var processing = false

  private func processFrames() {
    guard !processing else { return }
    processing = true
    defer { processing = false }
    while !waitingForStore && !waitingFrames.isEmpty {
      if broker.pageWorkspaces.isReading {
        waitingForStore = true
        broker.pageWorkspaces.whenIdle { [weak self] in self?.storeIsIdle() }
        break
      }
      handle(waitingFrames.removeFirst())
    }
    if waitingForStore { socket.pauseReading() }
  }

  private func storeIsIdle() {
    guard socket.isOpen else { return }
    waitingForStore = false
    socket.resumeReading()
    processFrames()
  }

  private func handle(_ text: String) {
    if let keys = knownPagesToSubscribe(text) {
      subscribe(.inIndex(keys), valid: [], denied: [])
      return
    }
    let message: BrokerProtocol.ClientMessage
    do throws(JSONReadError) {
      // The strict reader (StrictJSON): a subscribe may carry thousands of ids.
      message = try JSONReader.decode(BrokerProtocol.ClientMessage.self, from: text)
    } catch {
      fail(4400, "invalid message: \(error)")
      return
    }
    switch message.op {
    case "subscribe": subscribe(message.pages ?? [])
    case "unsubscribe": unsubscribe(message.pages ?? [])
    default: fail(4400, "unknown op \"\(message.op.prefix(40))\": expected subscribe or unsubscribe")
    }
  }

  /// The keys of a `subscribe` frame's pages, read straight against the channel index (no string made per id),
  /// if the index knows every one of them with its workspace: a device that comes back subscribes again to a
  /// thousand pages others follow (B3, B4 in docs/benchmarks.md). Nil for anything else (another op, a page the
  /// index does not know, an escaped id, an error): `handle` then decodes the frame as usual.
  private func knownPagesToSubscribe(_ text: String) -> [PageKey]? {
    var text = text
    return text.withUTF8 { bytes in
      broker.withChannels { channels in
        try? JSONReader.read(bytes) { reader throws(JSONReadError) -> [PageKey]? in
          var isSubscribe: Bool?
          var keys: [PageKey]?
          var members = try reader.beginObject()
          while let key = try reader.nextKey(&members) {
            if key.matches("op") && isSubscribe == nil {
              isSubscribe = try reader.readString { $0.elementsEqual("subscribe".utf8) }
              guard isSubscribe == true else { return nil }
            } else if key.matches("pages") && keys == nil {
              guard try !reader.readNull() else { return nil }
              var read: [PageKey] = []
              var elements = try reader.beginArray()
              while try reader.nextElement(&elements) {
                let known = try reader.readString { id -> PageKey? in
                  guard let key = channels.existingKey(utf8: id), channels.workspace(of: key) != nil else {
                    return nil
                  }
                  return key
                }
                guard let known else { return nil }
                read.append(known)
              }
              keys = read
            } else {
              try reader.skipValue()
            }
          }
          return isSubscribe == true ? keys : nil
        }
      }
    }
  }

  /// Sends an error message; the connection stays open.
  private func fail(_ code: Int, _ message: String) {
    socket.send(text: broker.jsonText(BrokerProtocol.StreamError(code: code, message: message)))
  }

  /// Subscribes to pages the device may see: ids of another workspace's pages are denied (pages that do not exist
  /// yet are accepted, and notified only once they exist in one of the device's workspaces). The answer goes out
  /// after the subscriptions are in place, so a catch-up sent after it cannot miss a change.
  private func subscribe(_ pageIDs: [String]) {
    var denied: [String] = []
    var valid: [EntityID] = []
    for text in pageIDs {
      if let id = try? EntityID(validating: text) {
        valid.append(id)
      } else {
        denied.append(String(text.prefix(80)))
      }
    }
    waitingForStore = true
    var answeredAtOnce = true
    broker.pageWorkspaces.lookUp(valid) { [weak self] result in
      guard let self, !self.isClosed, self.socket.isOpen else { return }
      self.waitingForStore = false
      switch result {
      case .success(let workspaces): self.subscribe(workspaces, valid: valid, denied: denied)
      case .failure: self.fail(4500, "the subscription could not be checked; try again")
      }
      if !answeredAtOnce {
        self.socket.resumeReading()
        self.processFrames()
      }
    }
    answeredAtOnce = false
  }

  /// Subscribes to the pages (their keys if the index knows them all, else `valid` and what the store read of
  /// them) but for those that exist outside the grant's workspaces.
  private func subscribe(_ workspaces: PageWorkspaceLookup.Answer, valid: [EntityID], denied: [String]) {
    let limit = broker.configuration.limits.subscriptionsPerConnection
    let subscriber = id
    let outcome = broker.withFanOut { fanOut in
      switch workspaces {
      case .inIndex(let keys):
        return fanOut.subscribe(subscriber, knownPages: keys, limit: limit)
      case .read(let found):
        let pages = valid.map { page in
          let facts = found[page]
          return FanOut.StorePage(
            id: page.rawValue, workspace: facts?.workspace.rawValue, lastUpdated: facts?.lastUpdated ?? 0)
        }
        return fanOut.subscribe(subscriber, storePages: pages, limit: limit)
      }
    }
    let answer = BrokerProtocol.Subscribed(
      added: outcome.added, total: outcome.total, denied: denied + outcome.denied)
    socket.send(text: broker.jsonText(answer))
  }

  private func unsubscribe(_ pageIDs: [String]) {
    let subscriber = id
    let (removed, total) = broker.withFanOut { fanOut in
      (fanOut.unsubscribe(subscriber, fromPageIDs: pageIDs).count, fanOut.subscriptionCount(of: subscriber))
    }
    socket.send(text: broker.jsonText(BrokerProtocol.Unsubscribed(removed: removed, total: total)))
  }

  /// After the grant was narrowed: drops the subscriptions to pages the grant may no longer see and tells the
  /// device which (`revoked`). Notifications stopped at once (the fan-out's workspaces were replaced); this ends
  /// the subscriptions. If the store cannot say which pages those are, the stream is closed so that the device
  /// subscribes again under its new grant.
  func withdrawInaccessible() {
    let candidates = broker.withFanOut { $0.subscribedPageIDs(of: id) }.compactMap {
      try? EntityID(validating: $0)
    }
    guard !candidates.isEmpty else { return }
    let box = broker.storeBox
    let workspaces = grant.workspaces
    broker.writer.read(
      on: broker.loop,
      { _ -> [EntityID] in try box.store.pagesOutside(workspaces: workspaces, among: candidates) },
      completion: { [weak self] result in
        guard let self, !self.isClosed, self.socket.isOpen else { return }
        guard case .success(let outside) = result else {
          self.socket.close(code: .policyViolation, reason: "access changed; subscribe again")
          return
        }
        let subscriber = self.id
        let (pages, total) = self.broker.withFanOut { fanOut in
          (
            fanOut.unsubscribe(subscriber, fromPageIDs: outside.lazy.map(\.rawValue)),
            fanOut.subscriptionCount(of: subscriber)
          )
        }
        guard !pages.isEmpty else { return }
        let answer = BrokerProtocol.Revoked(revokedPages: pages, total: total)
        self.socket.send(text: self.broker.jsonText(answer))
        self.broker.logger.notice(
          "subscriptions revoked",
          metadata: ["broker.connection.id": "\(self.connection)", "pages": "\(pages.count)"])
      })
  }
}
