import EventLoop
import LoadCore
import Web

/// What a density run (B3) needs of the system under test; the generator (`DensityRun`) is the same for both.
///
/// Threading: the run's loop only.
protocol DensityTarget: AnyObject {
  /// "pagesync" or "redis", for the report.
  var label: String { get }
  /// Creates the pool's pages (pagesync) and opens the writers.
  func prepare(_ done: @escaping (Result<Void, LoadError>) -> Void)
  /// Opens device `device`'s connection (not subscribed yet); `onEntry` gets each notified (pool page, token).
  func connect(
    device: Int, onEntry: @escaping (Int, UInt64) -> Void, _ done: @escaping (Result<Void, LoadError>) -> Void
  )
  /// Builds device `device`'s subscription request for `pages` ahead, so that a timed bulk subscribe does not
  /// time its encoding.
  func prepareSubscribe(device: Int, pages: [Int])
  /// Sends the prepared request; `done` gets the subscriptions the target confirmed.
  func subscribe(device: Int, _ done: @escaping (Result<Int, LoadError>) -> Void)
  /// Changes (publishes to) pool page `page` as batch `batch`; `done` gets the token devices will see for it.
  func publish(batch: Int, page: Int, _ done: @escaping (Result<UInt64?, LoadError>) -> Void)
  var bytesSent: Int { get }
  var bytesReceived: Int { get }
  func closeAll()
}

/// B3 against the broker: a device is a `/v1/stream` subscribing its set in one frame; a change is a one-mutation
/// batch (`set_property`, a property per writer connection, as B1).
final class PagesyncDensity: DensityTarget {
  let label = "pagesync"
  private let loop: Loop
  private let endpoint: BrokerEndpoint
  private let pages: RunPages
  private let writers: BrokerWriterPool
  private let writerCount: Int
  private let nonce: String
  private var devices: [DeviceStream?]
  private var messages: [String]

  init(loop: Loop, endpoint: BrokerEndpoint, layout: DensityLayout, writers: Int, nonce: String) {
    self.loop = loop
    self.endpoint = endpoint
    pages = RunPages(prefix: "load-b3-\(nonce)", count: layout.pool)
    self.writers = BrokerWriterPool(endpoint: endpoint)
    writerCount = writers
    self.nonce = nonce
    devices = Array(repeating: nil, count: layout.devices)
    messages = Array(repeating: "", count: layout.devices)
  }

  func prepare(_ done: @escaping (Result<Void, LoadError>) -> Void) {
    writers.open(
      loop: loop, count: writerCount, clientPrefix: "load-\(nonce)-b3", creating: pages, title: "D"
    ) {
      done($0.map { _ in () })
    }
  }

  func connect(
    device: Int, onEntry: @escaping (Int, UInt64) -> Void, _ done: @escaping (Result<Void, LoadError>) -> Void
  ) {
    let pages = pages
    let stream = DeviceStream(
      reporting: .entries { id, time in
        if let page = pages.index(of: id) { onEntry(page, time) }
      })
    devices[device] = stream
    stream.connect(loop: loop, endpoint: endpoint, done)
  }

  func prepareSubscribe(device: Int, pages: [Int]) {
    messages[device] = DeviceStream.subscribeMessage(pages.map(self.pages.id))
  }

  func subscribe(device: Int, _ done: @escaping (Result<Int, LoadError>) -> Void) {
    guard let stream = devices[device] else { return done(.failure(.connectFailed("not connected"))) }
    let message = messages[device]
    messages[device] = ""
    stream.subscribe(message: message, done)
  }

  func publish(batch: Int, page: Int, _ done: @escaping (Result<UInt64?, LoadError>) -> Void) {
    let id = pages.id(page)
    writers.update(page: id, batch: batch) { result in done(result.map { $0.pages[id] }) }
  }

  var bytesSent: Int { writers.bytesSent + devices.reduce(0) { $0 + ($1?.bytesSent ?? 0) } }
  var bytesReceived: Int { writers.bytesReceived + devices.reduce(0) { $0 + ($1?.bytesReceived ?? 0) } }

  func closeAll() {
    writers.close()
    for device in devices { device?.drop() }
  }
}

/// B3 against redis-server: a device is one connection that SUBSCRIBEs its channels in one command; a change is a
/// PUBLISH of the same `changed` text the broker sends, the batch number as its time.
final class RedisDensity: DensityTarget {
  let label = "redis"
  private let loop: Loop
  private let address: SocketAddress
  private let tls: TLSClientContext?
  private let pages: RunPages
  private let writerCount: Int
  private var publishers: [RedisConnection] = []
  private var devices: [RedisConnection?]
  private var commands: [[String]]

  init(loop: Loop, address: SocketAddress, tls: TLSClientContext?, layout: DensityLayout, writers: Int) {
    self.loop = loop
    self.address = address
    self.tls = tls
    pages = RunPages(prefix: "load-b3", count: layout.pool)
    writerCount = writers
    devices = Array(repeating: nil, count: layout.devices)
    commands = Array(repeating: [], count: layout.devices)
  }

  func prepare(_ done: @escaping (Result<Void, LoadError>) -> Void) {
    RedisConnection.connect(
      loop: loop, to: address, tls: tls, count: writerCount, each: { [self] in publishers.append($0) },
      then: done)
  }

  func connect(
    device: Int, onEntry: @escaping (Int, UInt64) -> Void, _ done: @escaping (Result<Void, LoadError>) -> Void
  ) {
    let pages = pages
    RedisConnection.connect(loop: loop, to: address, tls: tls) { [self] result in
      switch result {
      case .failure(let error): done(.failure(error))
      case .success(let connection):
        devices[device] = connection
        connection.onPush = { _, payload in
          guard let entries = ChangedFrame.parse(utf8: payload) else { return }
          for entry in entries {
            if let page = pages.index(of: entry.id) { onEntry(page, entry.time) }
          }
        }
        done(.success(()))
      }
    }
  }

  func prepareSubscribe(device: Int, pages: [Int]) {
    commands[device] = ["SUBSCRIBE"] + pages.map(self.pages.id)
  }

  func subscribe(device: Int, _ done: @escaping (Result<Int, LoadError>) -> Void) {
    guard let connection = devices[device] else { return done(.failure(.connectFailed("not connected"))) }
    let command = commands[device]
    commands[device] = []
    connection.send(command, replies: command.count - 1) { result in
      done(result.map { _ in command.count - 1 })
    }
  }

  func publish(batch: Int, page: Int, _ done: @escaping (Result<UInt64?, LoadError>) -> Void) {
    guard let publisher = publishers.min(by: { $0.pendingReplies < $1.pendingReplies }) else {
      return done(.failure(.connectFailed("no redis publisher")))
    }
    let token = UInt64(batch + 1)
    let channel = pages.id(page)
    let message = ChangedFrame.encode(pages: [(id: channel, time: token)])
    publisher.send(["PUBLISH", channel, message]) { reply in done(reply.map { _ in token }) }
  }

  var bytesSent: Int { (publishers + devices.compactMap { $0 }).reduce(0) { $0 + $1.bytesSent } }
  var bytesReceived: Int { (publishers + devices.compactMap { $0 }).reduce(0) { $0 + $1.bytesReceived } }

  func closeAll() {
    for connection in publishers + devices.compactMap({ $0 }) { connection.close() }
  }
}
