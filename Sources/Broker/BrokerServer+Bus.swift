import BrokerCore
import EventLoop
import FoundationEssentials
import SyncModel

// The bus between brokers (docs/architecture.md, "The bus"): this broker's commits go out after its own devices
// are queued theirs; other brokers' commits come in and reach this broker's devices only (never back to the bus).

extension BrokerServer {
  func startBus() {
    bus.start(
      onChange: { [unowned self] change in self.busDelivered(change) },
      onCatchUp: { [unowned self] reason in self.catchUpAllDevices(because: reason) })
  }

  /// A committed batch's pages, one message per workspace.
  func publishToBus(_ pages: [EntityID: UInt64], workspaces: [EntityID: EntityID], sequence: UInt64) {
    var byWorkspace: [String: [BusChange.Page]] = [:]
    for (page, time) in pages {
      guard let workspace = workspaces[page] else { continue }
      byWorkspace[workspace.rawValue, default: []].append(
        BusChange.Page(id: page.rawValue, lastUpdated: time))
    }
    let clock = clock.last.description
    for (workspace, pages) in byWorkspace {
      bus.publish(sequence: sequence, clock: clock, workspace: workspace, pages: pages)
    }
  }

  /// Another broker's commit: to this broker's subscribers of its pages, unless the index already holds as new a
  /// time (a catch-up got there first).
  func busDelivered(_ change: BusChange) {
    // The other broker's clock, merged into this one's (the `Pagesync-Clock` of this broker's answers), but only
    // within `[limits] clock_ahead_seconds` of this broker's wall clock: the bound the store puts on mutation
    // times, so a message cannot push the clock further than a mutation could.
    let now = UInt64(Date().timeIntervalSince1970 * 1000)
    if let remote = try? HLCTimestamp(parsing: change.clock),
      remote.millis <= now + UInt64(configuration.limits.clockAheadSeconds) * 1000
    {
      _ = clock.observe(remote, physicalMillis: now)
    }
    withFanOut { fanOut in
      for page in change.pages {
        if let key = fanOut.index.existingKey(for: page.id), let facts = fanOut.index.facts(of: key),
          facts.lastUpdated >= page.lastUpdated
        {
          continue
        }
        fanOut.publish(pageID: page.id, workspace: change.workspace, lastUpdated: page.lastUpdated)
      }
    }
    publishedSequence = max(publishedSequence, change.sequence)
    if fanOut.hasDirtySubscribers { flushWakeup?.signal() }
  }

  /// Makes every device of this broker catch up: reads the time of every page some device follows from the store
  /// and publishes each one newer than the index holds (ordinary `changed` frames).
  ///
  /// One at a time, and at most one a second (`catchUpInterval`): asked again while one runs or waits, another
  /// runs after it (the first may have read before what prompted the second), however many asked. Each is a read
  /// of every followed page on the writer thread (10,000 pages: 8–12 ms), and a broker whose Redis keeps
  /// overflowing sends a `resync` at each drain: without the interval, the other brokers' writers would do little
  /// else. A failed read is tried again a second later (the devices' own catch-ups read the store too).
  func catchUpAllDevices(because reason: String) {
    guard !busCatchUps.running, busCatchUps.later?.isActive != true else {
      busCatchUps.owed = true
      return
    }
    busCatchUps.running = true
    busCatchUps.owed = false
    busCatchUps.startedAt = loop.now
    var followed = Set<String>()
    for case let session? in sessions where !session.isClosed {
      followed.formUnion(withFanOut { $0.subscribedPageIDs(of: session.id) })
    }
    let pages = followed.compactMap { try? EntityID(validating: $0) }
    logger.info(
      "bus: devices catch up from the store", metadata: ["reason": "\(reason)", "pages": "\(pages.count)"])
    // On the writer thread between groups (what subscribe's lookups do): `workspacesAndTimes` opens its own read
    // transaction, which a reader thread's job, already in one, cannot.
    let box = storeBox
    writer.read(
      on: loop, { _ in pages.isEmpty ? [] : try box.store.workspacesAndTimes(of: pages) },
      completion: { [weak self] result in
        guard let self, !self.stopping else { return }
        self.busCatchUps.running = false
        switch result {
        case .failure(let error):
          self.logger.error("bus: catch-up read failed; retrying in 1 s", metadata: ["error": "\(error)"])
          self.busCatchUps.owed = true
        case .success(let facts):
          self.withFanOut { fanOut in
            for (page, fact) in zip(pages, facts) {
              guard let fact else { continue }
              if let key = fanOut.index.existingKey(for: page.rawValue),
                let known = fanOut.index.facts(of: key),
                known.lastUpdated >= fact.lastUpdated
              {
                continue
              }
              fanOut.publish(
                pageID: page.rawValue, workspace: fact.workspace.rawValue, lastUpdated: fact.lastUpdated)
            }
          }
          if self.fanOut.hasDirtySubscribers { self.flushWakeup?.signal() }
        }
        guard self.busCatchUps.owed else { return }
        let due = self.busCatchUps.startedAt + Self.catchUpInterval
        let timer = self.busCatchUps.later ?? LoopTimer(loop: self.loop)
        timer.keepsLoopAlive = false
        self.busCatchUps.later = timer
        timer.start(after: due > self.loop.now ? due - self.loop.now : 0) { [weak self] in
          self?.catchUpAllDevices(because: "asked again meanwhile")
        }
      })
  }

  /// The least time between two starts of `catchUpAllDevices`, ms.
  static let catchUpInterval: UInt64 = 1000

  /// Brings what `session` holds on the bus to its grant's workspaces (after it opened or its grant changed).
  func holdBusWorkspaces(of session: StreamSession) {
    let now = session.isClosed ? [] : session.grant.workspaceIDs
    guard now != session.busWorkspaces else { return }
    bus.hold(now.subtracting(session.busWorkspaces))
    bus.release(session.busWorkspaces.subtracting(now))
    session.busWorkspaces = now
  }
}
