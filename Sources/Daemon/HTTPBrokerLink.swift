import ByteBuffers
import EventLoop
import FoundationEssentials
import StrictJSON
import SyncModel
import SyncProtocol
import Web

/// The JSON body of an error answer (docs/protocol.md: `{"error": STATUS, "message": "..."}`).
struct ErrorBody: Codable {
  var message: String
}

/// The daemon's connections to the broker: the device stream (one WebSocket per `openStream`) and one keep-alive
/// HTTP connection for requests (batches, catch-up, fetches, read-through), opened on demand and reopened after a
/// loss. JSON in, JSON out; every answer and frame read with `StrictJSONDecoder`. Loop thread only.
final class HTTPBrokerLink: BrokerLink {
  let loop: Loop
  let url: HTTPURL
  /// `Authorization: Bearer …`, or nothing when the broker has no tokens.
  private var authorization: HTTPHeaders
  private var configuration: HTTPClientConfiguration
  private let json = JSONBodies()
  /// Reads every answer: a broker (or anyone on the path of plain HTTP) must not be able to stop the daemon
  /// with one, as `JSONDecoder` can be made to trap (docs/threat-model.md).
  private let decoder = StrictJSONDecoder()
  private var connection: HTTPClientConnection?
  var onClock: ((HLCTimestamp) -> Void)?
  /// Requests waiting for the HTTP connection to open.
  private var waitingForConnection: [(Result<HTTPClientConnection, HTTPClientError>) -> Void] = []
  /// Bytes of the HTTP connections already closed.
  private var closedBytes = (received: 0, sent: 0)

  var requestBytes: (received: Int, sent: Int) {
    guard let connection, connection.isOpen else { return closedBytes }
    return (closedBytes.received + connection.bytesReceived, closedBytes.sent + connection.bytesSent)
  }

  /// `caFile`: for an `https://` URL, the CA certificates to trust instead of the system's (a file that cannot
  /// be read is an error here, at start).
  init(loop: Loop, url: HTTPURL, token: String, timeoutMillis: UInt64, caFile: String? = nil) throws {
    self.loop = loop
    self.url = url
    authorization = HTTPHeaders()
    configuration = HTTPClientConfiguration()
    if url.isSecure { configuration.tls = try TLSClientContext(caFile: caFile) }
    update(token: token, timeoutMillis: timeoutMillis)
  }

  /// Requests sent from now on carry the token; the timeout applies to connections opened from now on. The open
  /// stream keeps the grant it was opened with until it is reopened.
  func update(token: String, timeoutMillis: UInt64) {
    var headers = HTTPHeaders()
    if !token.isEmpty { headers.add(name: "Authorization", value: "Bearer \(token)") }
    authorization = headers
    configuration.responseTimeout = timeoutMillis
  }

  /// The request target for `path` (`/v1/...`) under the URL's base path.
  func target(_ path: String) -> String {
    let base = url.target.hasSuffix("/") ? String(url.target.dropLast()) : url.target
    return base + path
  }

  // MARK: Typed calls

  func catchUp(
    _ request: BrokerProtocol.CatchUpRequest,
    completion: @escaping (Result<BrokerProtocol.CatchUpResponse, BrokerLinkError>) -> Void
  ) {
    send(.POST, "/v1/catchup", body: request, completion: completion)
  }

  func fetch(
    _ request: BrokerProtocol.FetchRequest,
    completion: @escaping (Result<BrokerProtocol.FetchResponse, BrokerLinkError>) -> Void
  ) {
    send(.POST, "/v1/fetch", body: request, completion: completion)
  }

  func push(_ batch: MutationBatch, completion: @escaping (Result<BatchOutcome, BrokerLinkError>) -> Void) {
    send(.POST, "/v1/batch", body: batch, completion: completion)
  }

  func page(_ page: EntityID, completion: @escaping (Result<PageSnapshot, BrokerLinkError>) -> Void) {
    send(.GET, "/v1/pages/\(page)", body: String?.none, completion: completion)
  }

  // MARK: Requests

  /// Sends `body` as JSON with `method` to `path` and decodes the answer as `Answer`.
  private func send<Answer: Decodable>(
    _ method: HTTPMethod, _ path: String, body: (some Encodable)?,
    completion: @escaping (Result<Answer, BrokerLinkError>) -> Void
  ) {
    var headers = authorization
    var bytes = ByteBuffer(capacity: 0)
    if let body {
      guard let data = try? json.encoder.encode(body) else {
        completion(.failure(.invalidAnswer("the request could not be encoded")))
        return
      }
      bytes = ByteBuffer(bytes: data)
      headers.add(name: "Content-Type", value: "application/json")
    }
    let request = HTTPRequest(
      head: HTTPRequestHead(method: method, target: target(path), headers: headers), body: bytes)
    withConnection { result in
      switch result {
      case .failure(let error):
        completion(.failure(.unreachable(error.description)))
      case .success(let connection):
        connection.send(request) { [weak self] result in
          guard let self else { return }
          completion(interpret(result))
        }
      }
    }
  }

  private func interpret<Answer: Decodable>(
    _ result: Result<HTTPResponse, HTTPClientError>
  ) -> Result<Answer, BrokerLinkError> {
    switch result {
    case .failure(let error):
      return .failure(.unreachable(error.description))
    case .success(let response):
      if let text = response.head.headers["Pagesync-Clock"], let time = try? HLCTimestamp(parsing: text) {
        onClock?(time)
      }
      return Self.decodeAnswer(
        status: response.head.status.code, body: response.body.readableBytesArray, as: Answer.self,
        with: decoder)
    }
  }

  /// What an answer of `status` with `body` means: the decoded `Answer` (2xx), the broker's error message
  /// (`ErrorBody`, or the body as text), or `invalidAnswer` when a 2xx body is not strict JSON of `Answer` or
  /// holds an integer above 2^63-1 (`BrokerNumbers`). Decoded with the strict decoder: no answer can make the
  /// daemon trap.
  static func decodeAnswer<Answer: Decodable>(
    status: Int, body: [UInt8], as type: Answer.Type, with decoder: StrictJSONDecoder = StrictJSONDecoder()
  ) -> Result<Answer, BrokerLinkError> {
    guard (200..<300).contains(status) else {
      let message =
        (try? decoder.decode(ErrorBody.self, from: body))?.message ?? String(decoding: body, as: UTF8.self)
      return .failure(.status(status, message))
    }
    do {
      let answer = try decoder.decode(type, from: body)
      if let checked = answer as? any BrokerNumbersChecked, let problem = checked.numberOutOfRange {
        return .failure(.invalidAnswer(problem))
      }
      return .success(answer)
    } catch let error as DecodingError {
      return .failure(.invalidAnswer(JSONBodies.describe(error)))
    } catch {
      return .failure(.invalidAnswer("\(error)"))
    }
  }

  private func withConnection(_ body: @escaping (Result<HTTPClientConnection, HTTPClientError>) -> Void) {
    if let connection, connection.isOpen {
      body(.success(connection))
      return
    }
    connection = nil
    waitingForConnection.append(body)
    guard waitingForConnection.count == 1 else { return }
    HTTPClientConnection.connect(loop: loop, to: url.address, configuration: configuration) {
      [weak self] result in
      guard let self else {
        if case .success(let connection) = result { connection.close() }
        return
      }
      if case .success(let connection) = result {
        self.connection = connection
        connection.onClose = { [weak self, unowned connection] in
          self?.closedBytes.received += connection.bytesReceived
          self?.closedBytes.sent += connection.bytesSent
        }
      }
      let waiting = self.waitingForConnection
      self.waitingForConnection = []
      for body in waiting { body(result) }
    }
  }

  // MARK: The device stream

  func openStream(
    pingInterval: UInt64, maxMessageSize: Int,
    completion: @escaping (Result<any BrokerStream, BrokerLinkError>) -> Void
  ) {
    var configuration = WebSocketConfiguration()
    configuration.pingInterval = pingInterval
    configuration.pongTimeout = pingInterval
    configuration.maxMessageSize = maxMessageSize
    configuration.maxFramePayload = maxMessageSize
    WebSocketClient.connect(
      loop: loop, to: url.address, target: target("/v1/stream"), headers: authorization,
      configuration: configuration, handshakeTimeout: self.configuration.responseTimeout,
      tls: self.configuration.tls
    ) { result in
      switch result {
      case .success(let socket): completion(.success(WebSocketBrokerStream(socket)))
      case .failure(.upgradeRefused(let response)):
        let message = response.body.readableString
        completion(
          .failure(.status(response.head.status.code, message.isEmpty ? "upgrade refused" : message)))
      case .failure(let error): completion(.failure(.unreachable(error.description)))
      }
    }
  }

  func close() {
    connection?.close()
    connection = nil
  }
}

/// The device stream over a `WebSocket`: frames read as `BrokerProtocol.ServerMessage` with the strict decoder,
/// messages written as `BrokerProtocol.ClientMessage`.
///
/// Ownership: the socket's callbacks hold the stream until the socket reports its close (and drops them), so a
/// stream its owner let go of still reports `onClose`. Loop thread only.
final class WebSocketBrokerStream: BrokerStream {
  private let socket: WebSocket
  var onFrame: ((BrokerStreamFrame) -> Void)?
  var onClose: ((BrokerStreamClose) -> Void)?

  init(_ socket: WebSocket) {
    self.socket = socket
    socket.onText = { [self] text in onFrame?(BrokerStreamFrame(text: text)) }
    socket.onClose = { [self] info in
      let callback = onClose
      onFrame = nil
      onClose = nil
      callback?(
        BrokerStreamClose(code: info.code.rawValue, reason: info.reason, byBroker: info.initiatedByPeer))
    }
  }

  var bytes: (received: Int, sent: Int) { (socket.bytesReceived, socket.bytesSent) }

  func subscribe(_ pages: some Collection<EntityID>) {
    send(BrokerProtocol.ClientMessage(op: "subscribe", pages: pages.map(\.rawValue)))
  }

  func unsubscribe(_ pages: some Collection<EntityID>) {
    send(BrokerProtocol.ClientMessage(op: "unsubscribe", pages: pages.map(\.rawValue)))
  }

  private func send(_ message: BrokerProtocol.ClientMessage) {
    // Written directly (`jsonText`): a reconnect sends every offline page's id, 5,000 a frame.
    socket.send(text: message.jsonText)
  }

  func close(reason: String) {
    socket.close(code: .goingAway, reason: reason)
  }
}
