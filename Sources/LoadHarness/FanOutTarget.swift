import EventLoop
import LoadCore
import Web

/// What a fan-out run needs of the system under test; the generator (`FanOutRun`) is the same for all.
///
/// Threading: the run's loop only.
protocol FanOutTarget: AnyObject {
  /// "pagesync" or "redis", for the report.
  var label: String { get }
  /// How the target's notifications relate to batches.
  var mode: DeliveryLedger.Mode { get }
  /// Channels (pages) the run spreads over: B1 one, B2 one per subscriber.
  var channels: Int { get }
  /// Creates what the run writes to, and opens the writers.
  func prepare(_ done: @escaping (Result<Void, LoadError>) -> Void)
  /// Opens the subscribers, on whichever reader thread's loop reads them (`ReaderPool`).
  var subscriberSource: any FanOutSubscriberSource { get }
  /// Sends batch `batch` (one update of `channel`; batch numbers never repeat within a run); `done` gets the token
  /// subscribers will see for it (nil: the batch changed nothing), once the target acknowledged it.
  func publish(batch: Int, channel: Int, _ done: @escaping (Result<UInt64?, LoadError>) -> Void)
  /// Bytes the harness wrote and read on the writers' connections (the readers count the subscribers').
  var bytesSent: Int { get }
  var bytesReceived: Int { get }
  func closeAll()
}

/// B1, B2 and B5 against the broker: pages, device streams subscribed to one each, one-mutation batches.
final class PagesyncFanOut: FanOutTarget {
  let label = "pagesync"
  let mode = DeliveryLedger.Mode.coalescing
  let endpoint: BrokerEndpoint
  private let loop: Loop
  let pages: [String]
  private let writers: BrokerWriterPool
  private let writerCount: Int
  private let nonce: String

  init(loop: Loop, endpoint: BrokerEndpoint, pages: [String], writers: Int, nonce: String) {
    self.loop = loop
    self.endpoint = endpoint
    self.pages = pages
    self.writers = BrokerWriterPool(endpoint: endpoint)
    writerCount = writers
    self.nonce = nonce
  }

  var channels: Int { pages.count }

  func prepare(_ done: @escaping (Result<Void, LoadError>) -> Void) {
    writers.open(loop: loop, count: writerCount, clientPrefix: "load-\(nonce)-w") { [self] result in
      guard case .success = result else { return done(result) }
      // A page may exist from an earlier run on the same broker: `already_exists` is fine.
      let creates = pages.map {
        MutationFields.createPage(page: $0, time: writers.nextTime(), title: "fan-out")
      }
      BatchChunks.send(creates, chunk: 1000, through: writers) { result in done(result.map { _ in () }) }
    }
  }

  var subscriberSource: any FanOutSubscriberSource { PagesyncSubscribers(endpoint: endpoint, pages: pages) }

  /// One `set_property` per batch, of a property of the writer connection's own (`BrokerWriterPool.update`).
  func publish(batch: Int, channel: Int, _ done: @escaping (Result<UInt64?, LoadError>) -> Void) {
    let page = pages[channel]
    writers.update(page: page, batch: batch) { result in done(result.map { $0.pages[page] ?? $0.sequence }) }
  }

  var bytesSent: Int { writers.bytesSent }
  var bytesReceived: Int { writers.bytesReceived }

  func closeAll() { writers.close() }
}

/// B1 and B2 against redis-server: SUBSCRIBE on one connection per subscriber to its channel (a page), PUBLISH of
/// the same `changed` text the broker would send, the batch number as its time.
final class RedisFanOut: FanOutTarget {
  let label = "redis"
  let mode = DeliveryLedger.Mode.everyMessage
  private let loop: Loop
  private let address: SocketAddress
  private let tls: TLSClientContext?
  private let names: [String]
  private let writerCount: Int
  private var publishers: [RedisConnection] = []

  init(loop: Loop, address: SocketAddress, tls: TLSClientContext?, channels: [String], writers: Int) {
    self.loop = loop
    self.address = address
    self.tls = tls
    names = channels
    writerCount = writers
  }

  var channels: Int { names.count }

  func prepare(_ done: @escaping (Result<Void, LoadError>) -> Void) {
    RedisConnection.connect(
      loop: loop, to: address, tls: tls, count: writerCount, each: { [self] in publishers.append($0) },
      then: done)
  }

  var subscriberSource: any FanOutSubscriberSource {
    RedisSubscribers(address: address, tls: tls, channels: names)
  }

  func publish(batch: Int, channel: Int, _ done: @escaping (Result<UInt64?, LoadError>) -> Void) {
    let channel = names[channel]
    guard let publisher = publishers.min(by: { $0.pendingReplies < $1.pendingReplies }) else {
      return done(.failure(.connectFailed("no redis publisher")))
    }
    let token = UInt64(batch + 1)
    let message = ChangedFrame.encode(pages: [(id: channel, time: token)])
    publisher.send(["PUBLISH", channel, message]) { reply in done(reply.map { _ in token }) }
  }

  var bytesSent: Int { publishers.reduce(0) { $0 + $1.bytesSent } }
  var bytesReceived: Int { publishers.reduce(0) { $0 + $1.bytesReceived } }

  func closeAll() {
    for connection in publishers { connection.close() }
  }
}

/// The broker's subscribers: a device stream each, subscribed to its page, reporting the page's time in each
/// `changed` message.
struct PagesyncSubscribers: FanOutSubscriberSource {
  let endpoint: BrokerEndpoint
  let pages: [String]

  func open(
    loop: Loop, channel: Int, onToken: @escaping (UInt64) -> Void,
    _ done: @escaping (Result<FanOutSubscriber, LoadError>) -> Void
  ) {
    let page = pages[channel]
    let device = DeviceStream(reporting: .time(of: page, onToken))
    device.open(loop: loop, endpoint: endpoint, pages: [page]) { result in
      switch result {
      case .success: done(.success(device))
      case .failure(let error):
        device.drop()
        done(.failure(error))
      }
    }
  }
}

extension DeviceStream: FanOutSubscriber {
  var fileDescriptor: Int32? { socket?.fileDescriptor }
  func close() { drop() }
}

/// redis-server's subscribers: a connection each, SUBSCRIBEd to its channel, reporting the time in each message.
struct RedisSubscribers: FanOutSubscriberSource {
  let address: SocketAddress
  let tls: TLSClientContext?
  let channels: [String]

  func open(
    loop: Loop, channel: Int, onToken: @escaping (UInt64) -> Void,
    _ done: @escaping (Result<FanOutSubscriber, LoadError>) -> Void
  ) {
    let channel = channels[channel]
    RedisConnection.connect(loop: loop, to: address, tls: tls) { result in
      switch result {
      case .failure(let error): done(.failure(error))
      case .success(let connection):
        connection.onPush = { _, payload in
          if let time = ChangedFrame.time(of: channel, inUTF8: payload) { onToken(time) }
        }
        connection.send(["SUBSCRIBE", channel]) { reply in
          switch reply {
          case .success: done(.success(connection))
          case .failure(let error):
            connection.close()
            done(.failure(error))
          }
        }
      }
    }
  }
}

extension RedisConnection: FanOutSubscriber {}
