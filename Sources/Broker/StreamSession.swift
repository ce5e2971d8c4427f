import BrokerCore
import BrokerStore
import FoundationEssentials
import StrictJSON
import SyncModel
import SyncProtocol
import Web

/// One device's `/v1/stream` WebSocket: its subscriptions and its queue of pending notifications.
///
/// The queue is coalesced per page (a page waits at most once, with its newest time), and it is written out only
/// while the socket has less than `pendingBytesPerConnection` queued: a slow reader's notifications pile up as at
/// most one entry per subscribed page, not as bytes, and it is never dropped for being slow.
///
/// Threading: the broker's loop thread.
final class StreamSession {
  let id: SubscriberID
  let socket: WebSocket
  /// Replaced when a reload changes what the device's token may see (`BrokerServer.reload`).
  var grant: Grant {
    didSet { visibility = WorkspaceVisibility() }
  }
  private var visibility = WorkspaceVisibility()
  unowned let broker: BrokerServer
  var queue = CoalescingQueue()
  /// Queued for the broker's next flush of dirty sessions (`BrokerServer.publish`).
  var isDirty = false
  private var drainBuffer: [(page: PageKey, lastUpdatedTime: UInt64)] = []

  /// Most pages in one `changed` frame.
  static let pagesPerFrame = 1000

  init(id: SubscriberID, socket: WebSocket, grant: Grant, broker: BrokerServer) {
    self.id = id
    self.socket = socket
    self.grant = grant
    self.broker = broker
    socket.onText = { [unowned self] text in self.received(text) }
    socket.onBinary = { [unowned self] _ in self.fail(4400, "frames are JSON text") }
    socket.onDrain = { [unowned self] in self.flush() }
    socket.onClose = { [unowned self] info in self.broker.closeSession(self, info) }
  }

  /// Whether the grant may see `workspace`, whose number in the channel index is `number`.
  func maySee(_ workspace: EntityID, numbered number: ChannelIndex.WorkspaceNumber) -> Bool {
    visibility.maySee(number, grant) { workspace }
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
      guard let self, self.socket.isOpen else { return }
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
    var denied = denied
    let limit = broker.configuration.limits.subscriptionsPerConnection
    let grant = self.grant
    let subscriber = id
    let (added, total) = broker.withChannels { channels -> (Int, Int) in
      var visibility = self.visibility
      defer { self.visibility = visibility }
      func allowed(_ number: ChannelIndex.WorkspaceNumber) -> Bool {
        visibility.maySee(number, grant) { try? EntityID(validating: channels.workspaceID(number)) }
      }
      var keys: [PageKey] = []
      var learned: [(PageKey, PageFacts)] = []
      var count = channels.subscriptionCount(of: subscriber)
      let pageCount: Int
      switch workspaces {
      case .inIndex(let known): pageCount = known.count
      case .read: pageCount = valid.count
      }
      keys.reserveCapacity(pageCount)
      // If every page could be new and still stay within the limit, no page needs its own check against it.
      let cannotReachLimit = count + pageCount <= limit
      for position in 0..<pageCount {
        // Whether the page may be seen, its key if it has one, and what the store said of it.
        let isAllowed: Bool
        let existing: PageKey?
        var facts: PageFacts?
        switch workspaces {
        case .inIndex(let known):
          existing = known[position]
          isAllowed = channels.workspace(of: known[position]).map(allowed) ?? true
        case .read(let found):
          existing = channels.existingKey(for: valid[position].rawValue)
          facts = found[valid[position]]
          isAllowed = facts.map { grant.workspaces.contains($0.workspace) } ?? true
        }
        let subscribed =
          cannotReachLimit ? false : existing.map { channels.isSubscribed(subscriber, to: $0) } ?? false
        if !isAllowed || (!cannotReachLimit && count >= limit && !subscribed) {
          denied.append(existing.map { channels.pageID(for: $0) } ?? valid[position].rawValue)
        } else {
          let key = existing ?? channels.key(for: valid[position].rawValue)
          if !subscribed { count += 1 }
          keys.append(key)
          if let facts { learned.append((key, facts)) }
        }
      }
      let added = channels.subscribe(subscriber, to: keys)
      for (key, facts) in learned {
        channels.learn(workspace: facts.workspace.rawValue, lastUpdated: facts.lastUpdated, of: key)
      }
      return (added, channels.subscriptionCount(of: subscriber))
    }
    socket.send(text: broker.jsonText(BrokerProtocol.Subscribed(added: added, total: total, denied: denied)))
  }

  private func isSubscribed(_ page: EntityID) -> Bool {
    guard let key = broker.channels.existingKey(for: page.rawValue) else { return false }
    return broker.channels.isSubscribed(id, to: key)
  }

  private func unsubscribe(_ pageIDs: [String]) {
    var keys: [PageKey] = []
    for text in pageIDs {
      if let key = broker.channels.existingKey(for: text), broker.channels.isSubscribed(id, to: key) {
        _ = queue.remove(key)
        keys.append(key)
      }
    }
    let removed = broker.channels.unsubscribe(id, from: keys)
    let answer = BrokerProtocol.Unsubscribed(
      removed: removed, total: broker.channels.subscriptionCount(of: id))
    socket.send(text: broker.jsonText(answer))
  }

  /// After the grant was narrowed: drops the subscriptions to pages the grant may no longer see and tells the
  /// device which (`revoked`). Notifications stop at once (`publish` checks the grant); this removes the entries.
  /// If the store cannot say which pages those are, the stream is closed so that the device subscribes again
  /// under its new grant.
  func withdrawInaccessible() {
    let candidates = broker.channels.subscriptions(of: id).compactMap {
      try? EntityID(validating: broker.channels.pageID(for: $0))
    }
    guard !candidates.isEmpty else { return }
    let box = broker.storeBox
    let workspaces = grant.workspaces
    broker.writer.read(
      on: broker.loop,
      { _ -> [EntityID] in try box.store.pagesOutside(workspaces: workspaces, among: candidates) },
      completion: { [weak self] result in
        guard let self, self.socket.isOpen else { return }
        guard case .success(let outside) = result else {
          self.socket.close(code: .policyViolation, reason: "access changed; subscribe again")
          return
        }
        var keys: [PageKey] = []
        var pages: [String] = []
        for page in outside {
          guard let key = self.broker.channels.existingKey(for: page.rawValue),
            self.broker.channels.isSubscribed(self.id, to: key)
          else { continue }
          _ = self.queue.remove(key)
          keys.append(key)
          pages.append(page.rawValue)
        }
        guard !keys.isEmpty else { return }
        _ = self.broker.channels.unsubscribe(self.id, from: keys)
        let answer = BrokerProtocol.Revoked(
          revokedPages: pages, total: self.broker.channels.subscriptionCount(of: self.id))
        self.socket.send(text: self.broker.jsonText(answer))
        self.broker.logger.notice(
          "subscriptions revoked",
          metadata: ["broker.connection.id": "\(self.id.rawValue)", "pages": "\(pages.count)"])
      })
  }

  /// Writes pending notifications while the socket has room, `pagesPerFrame` pages a frame.
  func flush() {
    let limit = broker.configuration.limits.pendingBytesPerConnection
    while !queue.isEmpty && socket.isOpen && socket.queuedBytes < limit {
      drainBuffer.removeAll(keepingCapacity: true)
      _ = queue.drain(max: StreamSession.pagesPerFrame, into: &drainBuffer)
      if drainBuffer.count == 1 {
        socket.send(encodedFrame: broker.changedFrame(drainBuffer[0].page, drainBuffer[0].lastUpdatedTime))
      } else {
        let entries = drainBuffer
        let pages = broker.withChannels { channels in
          var pages: [String: UInt64] = [:]
          for entry in entries { pages[channels.pageID(for: entry.page)] = entry.lastUpdatedTime }
          return pages
        }
        socket.send(text: BrokerProtocol.Changed(pages: pages).jsonText)
      }
      broker.notificationsSent += drainBuffer.count
    }
  }
}
