import EventLoop
import SyncModel
import SyncProtocol
import Web

/// The daemon's link to the brokers of `[broker] url`: one `HTTPBrokerLink` per URL (each with its own request
/// connection, and its own TLS session verified against that URL's host), of which one is selected. Every request
/// (batches, catch-up, fetches, read-through) and every stream goes to the selected broker; the driver selects the
/// one `BrokerFailover` chose before opening each stream, so requests go to the broker the stream is on. Loop
/// thread only.
final class FailoverBrokerLink: BrokerLink {
  private let links: [HTTPBrokerLink]
  /// The broker requests and streams go to: its index in `links`.
  private(set) var selected = 0

  var onClock: ((HLCTimestamp) -> Void)? {
    didSet { for link in links { link.onClock = onClock } }
  }

  /// One link per URL (`urls` not empty); `caFile` as for `HTTPBrokerLink` (used by the `https://` ones).
  init(loop: Loop, urls: [HTTPURL], token: String, timeoutMillis: UInt64, caFile: String? = nil) throws {
    precondition(!urls.isEmpty, "the link needs a broker URL")
    links = try urls.map {
      try HTTPBrokerLink(loop: loop, url: $0, token: token, timeoutMillis: timeoutMillis, caFile: caFile)
    }
  }

  var brokerCount: Int { links.count }

  /// The URL of the selected broker.
  var url: HTTPURL { links[selected].url }

  func select(broker index: Int) {
    precondition(links.indices.contains(index), "no broker \(index) in the list")
    guard index != selected else { return }
    // The keep-alive connection to the broker left behind: its answers belong to a connection already given up.
    links[selected].close()
    selected = index
  }

  var requestBytes: (received: Int, sent: Int) {
    links.reduce((0, 0)) { total, link in
      (total.0 + link.requestBytes.received, total.1 + link.requestBytes.sent)
    }
  }

  func catchUp(
    _ request: BrokerProtocol.CatchUpRequest,
    completion: @escaping (Result<BrokerProtocol.CatchUpResponse, BrokerLinkError>) -> Void
  ) {
    links[selected].catchUp(request, completion: completion)
  }

  func fetch(
    _ request: BrokerProtocol.FetchRequest,
    completion: @escaping (Result<BrokerProtocol.FetchResponse, BrokerLinkError>) -> Void
  ) {
    links[selected].fetch(request, completion: completion)
  }

  func push(_ batch: MutationBatch, completion: @escaping (Result<BatchOutcome, BrokerLinkError>) -> Void) {
    links[selected].push(batch, completion: completion)
  }

  func page(_ page: EntityID, completion: @escaping (Result<PageSnapshot, BrokerLinkError>) -> Void) {
    links[selected].page(page, completion: completion)
  }

  func openStream(
    pingInterval: UInt64, maxMessageSize: Int,
    completion: @escaping (Result<any BrokerStream, BrokerLinkError>) -> Void
  ) {
    links[selected].openStream(
      pingInterval: pingInterval, maxMessageSize: maxMessageSize, completion: completion)
  }

  func update(token: String, timeoutMillis: UInt64) {
    for link in links { link.update(token: token, timeoutMillis: timeoutMillis) }
  }

  func close() {
    for link in links { link.close() }
  }
}
