import EventLoop
import LoadCore
import Web

/// The broker's own figures, one reading of `GET /metrics` (docs/operations.md, "Metrics").
struct BrokerMetrics {
  /// The Prometheus text exposition as served.
  let text: String

  /// The value of sample `name` (a metric without labels).
  func value(of name: String) -> Double? { PrometheusText.value(of: name, in: text) }

  /// Subscriptions the broker holds, over all device streams.
  var subscriptions: Int? { value(of: "pagesync_broker_subscriptions").map { Int($0) } }
  /// Device streams open.
  var deviceStreams: Int? { value(of: "pagesync_broker_device_streams").map { Int($0) } }
  /// Notifications folded into a pending one since the broker started.
  var notificationsCoalesced: Double? { value(of: "pagesync_broker_notifications_coalesced_total") }
}

/// Reads the broker's `/metrics` on an HTTP connection of its own, kept open between readings: a run that counts
/// the broker's descriptors or connections (B6, B7) sees the same one throughout instead of one more per reading.
///
/// The connection is opened by the first `read`, or ahead by `open`: B7 opens it before its first descriptor
/// count, so that the count does not grow by one after it, and B4 before its devices connect. If the broker
/// closed it, a reading opens a new one (once) and counts it in `reconnects`: a broker used to close a
/// keep-alive connection 60 s after it opened, even while requests kept coming, and a soak is longer than that.
///
/// Threading: the run's loop only.
final class BrokerMetricsReader {
  private let loop: Loop
  private let endpoint: BrokerEndpoint
  private var connection: HTTPClientConnection?
  private var readings = 0
  private var closed = false
  /// Connections opened again because the broker had closed the kept one.
  private(set) var reconnects = 0

  init(loop: Loop, endpoint: BrokerEndpoint) {
    self.loop = loop
    self.endpoint = endpoint
  }

  /// Whether a reading is under way (a sampler skips a turn rather than queue readings).
  var isReading: Bool { readings > 0 }

  /// Opens the kept connection now.
  func open(_ done: @escaping (Result<Void, LoadError>) -> Void) {
    connect { done($0.map { _ in () }) }
  }

  /// One reading on the kept connection (opened first if need be).
  func read(_ done: @escaping (Result<BrokerMetrics, LoadError>) -> Void) {
    readings += 1
    let finish = { [self] (result: Result<BrokerMetrics, LoadError>) in
      readings -= 1
      done(result)
    }
    guard let connection else { return connectAndGet(finish) }
    get(connection) { [self] result in
      guard case .failure = result, !connection.isOpen, !closed else { return finish(result) }
      reconnects += 1
      connectAndGet(finish)
    }
  }

  /// Reads every `interval` ms until a reading satisfies `condition` or `deadline` (`HostProcess.now()`) passed;
  /// `done` gets that last reading, or the first failure.
  func poll(
    every interval: UInt64, until condition: @escaping (BrokerMetrics) -> Bool, deadline: UInt64,
    _ done: @escaping (Result<BrokerMetrics, LoadError>) -> Void
  ) {
    read { [self] result in
      guard case .success(let figures) = result, !condition(figures), HostProcess.now() < deadline else {
        return done(result)
      }
      let timer = LoopTimer(loop: loop)
      timer.start(after: interval) {
        timer.close()
        self.poll(every: interval, until: condition, deadline: deadline, done)
      }
    }
  }

  private func connectAndGet(_ done: @escaping (Result<BrokerMetrics, LoadError>) -> Void) {
    connect { [self] result in
      switch result {
      case .failure(let error): done(.failure(error))
      case .success(let connection): get(connection, done)
      }
    }
  }

  private func connect(_ done: @escaping (Result<HTTPClientConnection, LoadError>) -> Void) {
    endpoint.connectHTTP(loop: loop) { [self] result in
      switch result {
      case .failure(let error):
        done(.failure(.connectFailed("metrics: \(error)")))
      case .success(let connection):
        // Closed meanwhile (the run ended): the new connection must not outlive the run.
        guard !closed else {
          connection.close()
          return done(.failure(.connectFailed("metrics: the reader is closed")))
        }
        self.connection = connection
        done(.success(connection))
      }
    }
  }

  private func get(
    _ connection: HTTPClientConnection, _ done: @escaping (Result<BrokerMetrics, LoadError>) -> Void
  ) {
    connection.send(.GET, "/metrics") { result in
      switch result {
      case .failure(let error): done(.failure(.setupFailed("GET /metrics: \(error)")))
      case .success(let response):
        guard response.head.status.code == 200 else {
          return done(.failure(.setupFailed("GET /metrics: \(response.head.status.code)")))
        }
        done(.success(BrokerMetrics(text: String(decoding: response.body.readableBytesArray, as: UTF8.self))))
      }
    }
  }

  func close() {
    closed = true
    connection?.close()
    connection = nil
  }
}
