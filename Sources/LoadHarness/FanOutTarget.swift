import EventLoop
import LoadCore

/// What a fan-out run needs of the system under test; the generator (`FanOutRun`) is the same for all.
///
/// Threading: the run's loop only.
protocol FanOutTarget: AnyObject {
  /// "pagesync" or "redis", for the report.
  var label: String { get }
  /// How the target's notifications relate to batches.
  var mode: DeliveryLedger.Mode { get }
  /// Creates what the run writes to, and opens the writers.
  func prepare(_ done: @escaping (Result<Void, LoadError>) -> Void)
  /// Opens subscriber `index`; `onToken` gets each notification's token; `done` once it is subscribed.
  func subscribe(
    index: Int, onToken: @escaping (UInt64) -> Void, _ done: @escaping (Result<Void, LoadError>) -> Void)
  /// Sends batch `batch` (one update of the page); `done` gets the token subscribers will see for it (nil: the
  /// batch changed nothing), once the target acknowledged it.
  func publish(batch: Int, _ done: @escaping (Result<UInt64?, LoadError>) -> Void)
  /// Bytes the harness wrote and read on every connection to the target.
  var bytesSent: Int { get }
  var bytesReceived: Int { get }
  func closeAll()
}

/// B1 against the broker: one page, device streams subscribed to it, one-mutation batches.
final class PagesyncFanOut: FanOutTarget {
  let label = "pagesync"
  let mode = DeliveryLedger.Mode.coalescing
  private let loop: Loop
  private let endpoint: BrokerEndpoint
  private let page: String
  private let writers: BrokerWriterPool
  private let writerCount: Int
  private let nonce: String
  private var devices: [DeviceStream] = []

  init(loop: Loop, endpoint: BrokerEndpoint, page: String, writers: Int, nonce: String) {
    self.loop = loop
    self.endpoint = endpoint
    self.page = page
    self.writers = BrokerWriterPool(endpoint: endpoint)
    writerCount = writers
    self.nonce = nonce
  }

  func prepare(_ done: @escaping (Result<Void, LoadError>) -> Void) {
    writers.open(loop: loop, count: writerCount, clientPrefix: "load-\(nonce)-w") { [self] result in
      guard case .success = result else { return done(result) }
      // The page may exist from an earlier run on the same broker: `already_exists` is fine.
      writers.send([.createPage(page: page, time: writers.nextTime(), title: "B1")]) { result in
        done(result.map { _ in () })
      }
    }
  }

  func subscribe(
    index: Int, onToken: @escaping (UInt64) -> Void, _ done: @escaping (Result<Void, LoadError>) -> Void
  ) {
    let device = DeviceStream()
    devices.append(device)
    device.open(loop: loop, endpoint: endpoint, pages: [page], watched: page, onTime: onToken, done)
  }

  /// One `set_property` per batch, of a property of the writer connection's own (`w0`, `w1`, ...). Batches on
  /// one connection are applied in order, but not across connections: with one shared register (the title) a
  /// batch overtaken by a newer one from another connection would lose last-writer-wins, change nothing and
  /// notify no one, and the run would count fewer updates than it sent.
  func publish(batch: Int, _ done: @escaping (Result<UInt64?, LoadError>) -> Void) {
    guard let writer = writers.leastBusy else {
      return done(.failure(.connectFailed("no writer connection")))
    }
    let mutation = MutationFields.setProperty(
      page: page, time: writers.nextTime(), name: "w\(writer)", value: "b\(batch)")
    writers.send([mutation], on: writer) { result in
      done(result.map { $0.pages[self.page] ?? $0.sequence })
    }
  }

  var bytesSent: Int { writers.bytesSent + devices.reduce(0) { $0 + $1.bytesSent } }
  var bytesReceived: Int { writers.bytesReceived + devices.reduce(0) { $0 + $1.bytesReceived } }

  func closeAll() {
    writers.close()
    for device in devices { device.close() }
  }
}

/// B1 against redis-server: SUBSCRIBE on N connections to one channel, PUBLISH of the same `changed` text the
/// broker would send, the batch number as its time.
final class RedisFanOut: FanOutTarget {
  let label = "redis"
  let mode = DeliveryLedger.Mode.everyMessage
  private let loop: Loop
  private let address: SocketAddress
  private let channel: String
  private let writerCount: Int
  private var publishers: [RedisConnection] = []
  private var subscribers: [RedisConnection] = []

  init(loop: Loop, address: SocketAddress, channel: String, writers: Int) {
    self.loop = loop
    self.address = address
    self.channel = channel
    writerCount = writers
  }

  func prepare(_ done: @escaping (Result<Void, LoadError>) -> Void) {
    var remaining = writerCount
    var failed = false
    for _ in 0..<writerCount {
      RedisConnection.connect(loop: loop, to: address) { [self] result in
        guard !failed else { return }
        switch result {
        case .failure(let error):
          failed = true
          done(.failure(error))
        case .success(let connection):
          publishers.append(connection)
          remaining -= 1
          if remaining == 0 { done(.success(())) }
        }
      }
    }
  }

  func subscribe(
    index: Int, onToken: @escaping (UInt64) -> Void, _ done: @escaping (Result<Void, LoadError>) -> Void
  ) {
    let channel = channel
    RedisConnection.connect(loop: loop, to: address) { [self] result in
      switch result {
      case .failure(let error): done(.failure(error))
      case .success(let connection):
        subscribers.append(connection)
        connection.onPush = { _, payload in
          if let time = ChangedFrame.time(of: channel, in: String(decoding: payload, as: UTF8.self)) {
            onToken(time)
          }
        }
        connection.send(["SUBSCRIBE", channel]) { reply in done(reply.map { _ in () }) }
      }
    }
  }

  func publish(batch: Int, _ done: @escaping (Result<UInt64?, LoadError>) -> Void) {
    guard let publisher = publishers.min(by: { $0.pendingReplies < $1.pendingReplies }) else {
      return done(.failure(.connectFailed("no redis publisher")))
    }
    let token = UInt64(batch + 1)
    let message = ChangedFrame.encode(pages: [(id: channel, time: token)])
    publisher.send(["PUBLISH", channel, message]) { reply in done(reply.map { _ in token }) }
  }

  var bytesSent: Int { (publishers + subscribers).reduce(0) { $0 + $1.bytesSent } }
  var bytesReceived: Int { (publishers + subscribers).reduce(0) { $0 + $1.bytesReceived } }

  func closeAll() {
    for connection in publishers + subscribers { connection.close() }
  }
}
