import DaemonCore
import DaemonCoreTestKit
import DaemonStore
import SyncModel
import SyncProtocol

/// Broker answers built from values, as the broker would send them.
enum Broker {
  static let epoch = "e1"

  /// A whole page (`full: true`): a page, or a database with `rows` in view and inline `databases`.
  static func page(
    _ page: String, time: UInt64, title: String = "", kind: String = "page", rows: [String]? = nil,
    databases: [String] = [], parent: String? = nil
  ) -> PageDelta {
    let snapshot = PageSnapshot(
      id: id(page), workspace: id("default"), kind: kind, parent: parent.map(id), title: title,
      deleted: false,
      properties: [:], blocks: [], databases: databases.map(id), view: kind == "database" ? ViewState() : nil,
      rows: kind == "database" ? (rows ?? []).map(id) : nil, lastUpdatedTime: time)
    return PageDelta(
      id: id(page), since: 0, lastUpdatedTime: time, full: true, page: snapshot, properties: [:], blocks: [])
  }

  static func database(_ database: String, time: UInt64, rows: [String]) -> PageDelta {
    page(database, time: time, kind: "database", rows: rows)
  }

  static func caughtUp(
    changed: [String: UInt64] = [:], gone: [String] = [], epoch: String = epoch, epochChanged: Bool = false
  ) -> BrokerProtocol.CatchUpResponse {
    BrokerProtocol.CatchUpResponse(
      epoch: epoch, epochChanged: epochChanged, sequence: changed.values.max() ?? 0,
      changed: Dictionary(uniqueKeysWithValues: changed.map { (id($0.key), $0.value) }), gone: gone.map(id))
  }

  static func fetched(_ deltas: [PageDelta], gone: [String] = [], epoch: String = epoch, next: String? = nil)
    -> BrokerProtocol.FetchResponse
  {
    BrokerProtocol.FetchResponse(epoch: epoch, deltas: deltas, gone: gone.map(id), nextCursor: next.map(id))
  }

  /// The answer to `batch`: each mutation applied, but those named in `rejected` (with that reason).
  static func outcome(
    of batch: MutationBatch, rejected: [UInt64: RejectionReason] = [:], pages: [String: UInt64] = [:]
  ) -> BatchOutcome {
    let results = batch.mutations.map { mutation in
      MutationResult(
        mutationId: mutation.id, page: mutation.page,
        status: rejected[mutation.id] == nil ? .applied : .rejected,
        reason: rejected[mutation.id])
    }
    return BatchOutcome(
      results: results, pages: Dictionary(uniqueKeysWithValues: pages.map { (id($0.key), $0.value) }),
      sequence: pages.values.max(), lastMutationId: batch.mutations.last?.id ?? 0, epoch: epoch)
  }

  static func changed(_ pages: [String: UInt64]) -> BrokerProtocol.ServerMessage {
    .changed(BrokerProtocol.Changed(pages: pages))
  }
}

/// Makes each page an offline origin (`toggled`), as the offline set would write it.
func toggleOffline(_ store: LocalStore, _ pages: [String]) throws {
  let rows = pages.map { OfflineAction(origin: id($0), from: nil, impacted: id($0), type: .toggled) }
  try store.applyForestChange(
    ForestChange(insertedActions: rows, addedPages: pages.map { id($0) }), recentOrder: [])
}

/// Stores whole pages as downloaded at their times, and the epoch they come from.
func storePages(_ store: LocalStore, _ deltas: [PageDelta]) throws {
  for case let error? in try store.applyDeltas(deltas) { throw error }
  try store.setEpoch(Broker.epoch)
}
