import ByteBuffers
import EventLoop
import Foundation
import Web

/// Where the broker is and who the harness is to it.
public struct BrokerEndpoint: Sendable {
  /// Opens a device stream (`/v1/stream`, the token as `access_token`), as every simulated device does.
  func openStream(loop: Loop, _ done: @escaping (Result<WebSocket, LoadError>) -> Void) {
    let target = token.map { "/v1/stream?access_token=" + $0 } ?? "/v1/stream"
    WebSocketClient.connect(
      loop: loop, to: streamAddress ?? address, target: target, handshakeTimeout: 30_000, tls: tls
    ) {
      result in
      done(result.mapError { .connectFailed("device stream: \($0)") })
    }
  }

  /// Opens an HTTP connection to the broker (TLS when `tls` is set).
  func connectHTTP(
    loop: Loop, _ completion: @escaping (Result<HTTPClientConnection, HTTPClientError>) -> Void
  ) {
    var configuration = HTTPClientConfiguration()
    configuration.tls = tls
    HTTPClientConnection.connect(loop: loop, to: address, configuration: configuration, completion)
  }

  public var address: SocketAddress
  /// Where device streams connect when not `address` (a cluster run: streams on another broker than writers).
  public var streamAddress: SocketAddress?
  /// The bearer token; nil for a loopback broker without tokens (user `local`, workspace `default`).
  public var token: String?
  public var workspace: String
  /// TLS (`--tls`, or an `https://` broker): every stream and HTTP connection verifies the broker against it.
  public var tls: TLSClientContext?

  public init(address: SocketAddress, token: String?, workspace: String, tls: TLSClientContext? = nil) {
    self.address = address
    self.token = token
    self.workspace = workspace
    self.tls = tls
  }

  var headers: HTTPHeaders {
    var headers: HTTPHeaders = ["Content-Type": "application/json"]
    if let token { headers.add(name: "Authorization", value: "Bearer " + token) }
    return headers
  }

  /// Sends a JSON `body` to `target` on `connection`; completes with the parsed JSON object or why not.
  func post(
    _ connection: HTTPClientConnection, _ target: String, body: String,
    _ completion: @escaping (Result<[String: Any], LoadError>) -> Void
  ) {
    connection.send(.POST, target, headers: headers, body: ByteBuffer(string: body)) { result in
      switch result {
      case .failure(let error): completion(.failure(.setupFailed("POST \(target): \(error)")))
      case .success(let response):
        let bytes = response.body.readableBytesArray
        guard response.head.status.code == 200 else {
          let text = String(decoding: bytes.prefix(300), as: UTF8.self)
          completion(.failure(.setupFailed("POST \(target): \(response.head.status.code) \(text)")))
          return
        }
        guard let object = try? JSONSerialization.jsonObject(with: Data(bytes)) as? [String: Any] else {
          completion(.failure(.setupFailed("POST \(target): the answer is not a JSON object")))
          return
        }
        completion(.success(object))
      }
    }
  }
}

/// One mutation of a batch, as its JSON fields without `id` (the writer numbers them):
/// `"page":"p","time":"...","type":"set_title","title":"t"`.
struct MutationFields {
  var json: String

  /// A `set_title` of `page`.
  static func setTitle(page: String, time: String, title: String) -> MutationFields {
    MutationFields(json: #""page":"\#(page)","time":"\#(time)","type":"set_title","title":"\#(title)""#)
  }

  /// A `set_property` of `page` to a string.
  static func setProperty(page: String, time: String, name: String, value: String) -> MutationFields {
    MutationFields(
      json:
        #""page":"\#(page)","time":"\#(time)","type":"set_property","name":"\#(name)","value":"\#(value)""#)
  }

  /// A top-level `create_page`.
  static func createPage(page: String, time: String, title: String) -> MutationFields {
    MutationFields(
      json: #""page":"\#(page)","time":"\#(time)","type":"create_page","parent":null,"title":"\#(title)""#)
  }
}

/// The answer to a batch: what the harness needs of it.
struct BatchAnswer {
  /// The batch's sequence; nil when it changed nothing.
  var sequence: UInt64?
  /// Each page the batch changed, with its new `lastUpdatedTime`.
  var pages: [String: UInt64]
  /// Mutations the broker rejected.
  var rejected: Int
  /// The store's epoch (for catch-up requests).
  var epoch: String
}

/// HTTP connections that post batches, each as a client of its own: mutation ids must continue from the
/// client's last on the broker, and batches on one keep-alive connection are answered in order, so one id
/// sequence per connection never gaps however many batches are in flight.
///
/// Threading: the run's loop only.
final class BrokerWriterPool {
  let endpoint: BrokerEndpoint
  private var writers: [(connection: HTTPClientConnection, client: String, nextID: Int)] = []
  private var clock = HLCSource()
  /// Batches that failed (transport or status), with the first failure's message.
  private(set) var failures = 0
  private(set) var firstFailure: String?

  init(endpoint: BrokerEndpoint) { self.endpoint = endpoint }

  /// Opens `count` connections, clients `PREFIX-N` (a run nonce keeps re-runs against one broker apart).
  func open(loop: Loop, count: Int, clientPrefix: String, _ done: @escaping (Result<Void, LoadError>) -> Void)
  {
    var remaining = count
    var failed = false
    for index in 0..<count {
      endpoint.connectHTTP(loop: loop) { [self] result in
        guard !failed else { return }
        switch result {
        case .failure(let error):
          failed = true
          done(.failure(.connectFailed("writer \(index): \(error)")))
        case .success(let connection):
          writers.append((connection, "\(clientPrefix)-\(index)", 1))
          remaining -= 1
          if remaining == 0 { done(.success(())) }
        }
      }
    }
  }

  /// A fresh HLC time: the wall clock, and a counter that keeps every time of the run distinct and rising.
  func nextTime() -> String { clock.next() }

  /// Requests in flight on all connections.
  var pending: Int { writers.reduce(0) { $0 + $1.connection.pendingRequests } }

  var bytesSent: Int { writers.reduce(0) { $0 + $1.connection.bytesWritten } }
  var bytesReceived: Int { writers.reduce(0) { $0 + $1.connection.bytesRead } }

  /// The open connection with the fewest requests in flight, nil when every one is closed.
  var leastBusy: Int? {
    writers.indices.filter { writers[$0].connection.isOpen }
      .min { writers[$0].connection.pendingRequests < writers[$1].connection.pendingRequests }
  }

  /// Posts `mutations` as one batch on connection `index` (default: the one with the fewest requests in flight).
  func send(
    _ mutations: [MutationFields], on chosen: Int? = nil,
    _ completion: @escaping (Result<BatchAnswer, LoadError>) -> Void
  ) {
    guard let index = chosen ?? leastBusy, writers.indices.contains(index), writers[index].connection.isOpen
    else {
      completion(.failure(.connectFailed("every writer connection is closed")))
      return
    }
    let first = writers[index].nextID
    writers[index].nextID += mutations.count
    var body = #"{"client":"\#(writers[index].client)","workspace":"\#(endpoint.workspace)","mutations":["#
    for (offset, mutation) in mutations.enumerated() {
      if offset > 0 { body += "," }
      body += #"{"id":\#(first + offset),"# + mutation.json + "}"
    }
    body += "]}"
    endpoint.post(writers[index].connection, "/v1/batch", body: body) { [self] result in
      switch result {
      case .failure(let error):
        failures += 1
        if firstFailure == nil { firstFailure = error.description }
        completion(.failure(error))
      case .success(let object):
        let pages = (object["pages"] as? [String: Any] ?? [:]).compactMapValues {
          ($0 as? NSNumber)?.uint64Value
        }
        let results = object["results"] as? [[String: Any]] ?? []
        let rejected = results.filter { $0["status"] as? String == "rejected" }.count
        completion(
          .success(
            BatchAnswer(
              sequence: (object["sequence"] as? NSNumber)?.uint64Value, pages: pages, rejected: rejected,
              epoch: object["epoch"] as? String ?? "")))
      }
    }
  }

  /// One `set_property` of `page` to `b<batch>` on the connection with the fewest requests in flight, of a
  /// property of that connection's own (`w0`, `w1`, ...). Batches on one connection are applied in order, but not
  /// across connections: with one shared register (the title) a batch overtaken by a newer one from another
  /// connection would lose last-writer-wins, change nothing and notify no one, and the run would count fewer
  /// updates than it sent.
  func update(page: String, batch: Int, _ done: @escaping (Result<BatchAnswer, LoadError>) -> Void) {
    guard let writer = leastBusy else { return done(.failure(.connectFailed("no writer connection"))) }
    let mutation = MutationFields.setProperty(
      page: page, time: nextTime(), name: "w\(writer)", value: "b\(batch)")
    send([mutation], on: writer, done)
  }

  func close() {
    for writer in writers { writer.connection.close() }
  }
}

extension BrokerWriterPool {
  /// Opens `count` writer connections (clients `PREFIX-N`), then creates every page of `pages` titled `title`, in
  /// batches of 1,000; `done` gets each page's time (by index) and the store's epoch. A page that was not created
  /// (it existed already, or was rejected) fails it.
  func open(
    loop: Loop, count: Int, clientPrefix: String, creating pages: RunPages, title: String,
    _ done: @escaping (Result<(times: [UInt64], epoch: String), LoadError>) -> Void
  ) {
    open(loop: loop, count: count, clientPrefix: clientPrefix) { [self] result in
      if case .failure(let error) = result { return done(.failure(error)) }
      let creates = pages.ids.map { MutationFields.createPage(page: $0, time: nextTime(), title: title) }
      BatchChunks.send(creates, chunk: 1000, through: self) { result in
        switch result {
        case .failure(let error): done(.failure(error))
        case .success(let answer):
          guard answer.rejected == 0, answer.pages.count == pages.count else {
            return done(
              .failure(
                .setupFailed(
                  "creating \(pages.count) pages: \(answer.rejected) rejected, \(answer.pages.count) made")))
          }
          done(.success(((0..<pages.count).map { answer.pages[pages.id($0)] ?? 0 }, answer.epoch)))
        }
      }
    }
  }
}

/// Sends many mutations as consecutive batches of at most `chunk` (the broker's `batch_mutations`), all
/// pipelined, and reports once every batch is answered, with each page's new time.
enum BatchChunks {
  static func send(
    _ mutations: [MutationFields], chunk: Int, through writers: BrokerWriterPool,
    _ done: @escaping (Result<BatchAnswer, LoadError>) -> Void
  ) {
    var merged = BatchAnswer(sequence: nil, pages: [:], rejected: 0, epoch: "")
    var remaining = (mutations.count + chunk - 1) / chunk
    var failed = false
    guard remaining > 0 else { return done(.success(merged)) }
    for start in stride(from: 0, to: mutations.count, by: chunk) {
      writers.send(Array(mutations[start..<min(start + chunk, mutations.count)])) { result in
        guard !failed else { return }
        switch result {
        case .failure(let error):
          failed = true
          done(.failure(error))
        case .success(let answer):
          merged.pages.merge(answer.pages) { max($0, $1) }
          merged.rejected += answer.rejected
          merged.sequence = max(merged.sequence ?? 0, answer.sequence ?? 0)
          merged.epoch = answer.epoch
          remaining -= 1
          if remaining == 0 { done(.success(merged)) }
        }
      }
    }
  }
}

/// HLC times for the harness's mutations: `WALLMILLIS:COUNTER` with a counter that never goes back, so a later
/// batch of the run always wins last-writer-wins and so always changes the page.
struct HLCSource {
  private var counter: UInt32 = 0
  private var millis: UInt64 = 0

  mutating func next() -> String {
    millis = max(millis, HostProcess.wallMillis())
    counter &+= 1
    return "\(millis):\(counter)"
  }
}
