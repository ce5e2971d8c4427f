import ByteBuffers
import EventLoop

/// Why a client request or WebSocket handshake failed.
public enum HTTPClientError: Error, Sendable, CustomStringConvertible {
  /// The connection could not be made.
  case connectFailed(LoopError)
  /// The connection closed (or failed) before the response was complete.
  case connectionClosed(String)
  /// The server's bytes are not valid HTTP.
  case invalidResponse(HTTPParseError)
  /// No complete response within the configured time.
  case timedOut
  /// The server answered an upgrade request with something other than 101.
  case upgradeRefused(HTTPResponse)
  /// The server's 101 response was not a valid WebSocket handshake.
  case handshakeFailed(String)

  public var description: String {
    switch self {
    case .connectFailed(let error): "connect failed: \(error)"
    case .connectionClosed(let why): "connection closed: \(why)"
    case .invalidResponse(let error): "invalid response: \(error)"
    case .timedOut: "timed out waiting for the response"
    case .upgradeRefused(let response):
      "upgrade refused: \(response.head.status) \(response.body.readableString)"
    case .handshakeFailed(let why): "WebSocket handshake failed: \(why)"
    }
  }
}

/// Settings of an `HTTPClientConnection`. Times are in milliseconds.
public struct HTTPClientConfiguration: Sendable {
  /// Limits on the responses accepted.
  public var limits = HTTPParserLimits(maxHeaderBytes: 64 * 1024, maxBodyBytes: 64 << 20)
  /// How long to wait for each response, counted from when it became the one awaited.
  public var responseTimeout: UInt64 = 30_000
  public init() {}
}

/// A keep-alive HTTP/1.1 client connection over TCP or a Unix socket. Requests may be pipelined: `send` writes
/// at once, and responses complete in request order.
///
/// Ownership: an open connection keeps itself alive (its stream holds it) until it is closed by either side.
///
/// Threading: loop thread only.
public final class HTTPClientConnection {
  public let address: SocketAddress
  public let configuration: HTTPClientConfiguration
  private let stream: ByteStream
  private let decoder: HTTPResponseDecoder
  private let timer: LoopTimer
  private var waiting: [(Result<HTTPResponse, HTTPClientError>) -> Void] = []
  private var waitingHead = 0
  private var closed = false
  /// Called once when the connection is closed, by either side.
  public var onClose: (() -> Void)?

  private init(stream: ByteStream, address: SocketAddress, configuration: HTTPClientConfiguration) {
    self.stream = stream
    self.address = address
    self.configuration = configuration
    decoder = HTTPResponseDecoder(limits: configuration.limits)
    timer = LoopTimer(loop: stream.loop)
    stream.setNoDelay(true)
    // The stream's callbacks hold the connection: an open connection lives until it is closed (by either
    // side), whoever else holds it. Closing the stream drops the callbacks and so the cycle.
    stream.onRead = { bytes in self.received(bytes) }
    stream.onEnd = { self.peerEnded() }
    stream.onError = { error in self.fail(.connectionClosed(error.description)) }
    stream.startReading()
  }

  /// Connects to `address`; `completion` runs on the loop thread.
  public static func connect(
    loop: Loop, to address: SocketAddress, configuration: HTTPClientConfiguration = HTTPClientConfiguration(),
    _ completion: @escaping (Result<HTTPClientConnection, HTTPClientError>) -> Void
  ) {
    ByteStream.connect(loop: loop, to: address) { result in
      switch result {
      case .failure(let error): completion(.failure(.connectFailed(error)))
      case .success(let stream):
        completion(
          .success(HTTPClientConnection(stream: stream, address: address, configuration: configuration)))
      }
    }
  }

  /// Whether requests can still be sent.
  public var isOpen: Bool { !closed }
  /// Bytes read from the connection (final once closed).
  public var bytesReceived: Int { stream.bytesRead }
  /// Bytes handed to the kernel for the connection (final once closed).
  public var bytesSent: Int { stream.bytesWritten }
  /// Requests sent whose response has not arrived.
  public var pendingRequests: Int { waiting.count - waitingHead }
  /// Bytes read from and written to the connection so far, headers included (for the load harness's bytes on
  /// the wire).
  public var bytesRead: Int { stream.bytesRead }
  public var bytesWritten: Int { stream.bytesWritten }

  /// Sends `request` (adding `Host` and `Content-Length` when missing); `completion` gets its response.
  public func send(
    _ request: HTTPRequest, _ completion: @escaping (Result<HTTPResponse, HTTPClientError>) -> Void
  ) {
    guard !closed else {
      completion(.failure(.connectionClosed("the connection is closed")))
      return
    }
    var request = request
    if request.head.headers["Host"] == nil {
      request.head.headers.add(name: "Host", value: address.hostHeader)
    }
    var bytes = ByteBuffer(capacity: 256 + request.body.readableBytes)
    HTTPEncoder.encodeRequest(request, into: &bytes)
    decoder.expectResponse(to: request.head.method)
    if pendingRequests == 0 { armTimer() }
    waiting.append(completion)
    stream.write(bytes)
  }

  /// Sends a body-less request with `method` to `target`.
  public func send(
    _ method: HTTPMethod, _ target: String, headers: HTTPHeaders = HTTPHeaders(),
    body: ByteBuffer = ByteBuffer(capacity: 0),
    _ completion: @escaping (Result<HTTPResponse, HTTPClientError>) -> Void
  ) {
    send(
      HTTPRequest(head: HTTPRequestHead(method: method, target: target, headers: headers), body: body),
      completion)
  }

  private func received(_ bytes: UnsafeRawBufferPointer) {
    do {
      let output = try decoder.decode(bytes)
      deliver(output.responses)
      if output.upgrade != nil {
        fail(.connectionClosed("unexpected 101 Switching Protocols"))
      }
    } catch {
      fail(.invalidResponse(error))
    }
  }

  private func deliver(_ responses: [HTTPResponse]) {
    for response in responses {
      guard waitingHead < waiting.count else {
        fail(.connectionClosed("a response arrived that no request asked for"))
        return
      }
      let completion = waiting[waitingHead]
      waitingHead += 1
      if waitingHead == waiting.count {
        waiting.removeAll(keepingCapacity: true)
        waitingHead = 0
        timer.stop()
      } else {
        armTimer()
      }
      completion(.success(response))
      if !response.head.keepAlive {
        fail(.connectionClosed("the server closed the connection after an earlier response"))
        return
      }
    }
  }

  private func peerEnded() {
    do {
      deliver(try decoder.finish())
      fail(.connectionClosed("the server closed the connection"))
    } catch {
      fail(.invalidResponse(error))
    }
  }

  private func armTimer() {
    timer.start(after: configuration.responseTimeout) { [unowned self] in self.fail(.timedOut) }
  }

  /// Fails every waiting request with `error` and closes.
  private func fail(_ error: HTTPClientError) {
    guard !closed else { return }
    closed = true
    let pending = waiting[waitingHead...]
    waiting = []
    waitingHead = 0
    timer.close()
    stream.close()
    for completion in pending { completion(.failure(error)) }
    onClose?()
    onClose = nil
  }

  /// Closes the connection; waiting requests fail with `connectionClosed`.
  public func close() { fail(.connectionClosed("closed by the client")) }
}

/// One-shot requests: connect, send, close.
public enum HTTPClient {
  /// Sends `request` to `address` on a new connection and closes it once the response arrived.
  public static func send(
    loop: Loop, to address: SocketAddress, _ request: HTTPRequest,
    configuration: HTTPClientConfiguration = HTTPClientConfiguration(),
    _ completion: @escaping (Result<HTTPResponse, HTTPClientError>) -> Void
  ) {
    HTTPClientConnection.connect(loop: loop, to: address, configuration: configuration) { result in
      switch result {
      case .failure(let error): completion(.failure(error))
      case .success(let connection):
        connection.send(request) { response in
          connection.close()
          completion(response)
        }
      }
    }
  }
}

/// An `http://` or `ws://` URL: where to connect, the `Host` header and the request target.
public struct HTTPURL: Equatable, Sendable, CustomStringConvertible {
  public var scheme: String
  public var host: String
  public var port: Int
  /// Path and query, `/` at least.
  public var target: String

  /// Why a URL was refused.
  public struct ParseError: Error, Equatable, Sendable, CustomStringConvertible {
    public var input: String
    public var reason: String
    public var description: String { "invalid URL \"\(input)\": \(reason)" }
  }

  public init(parsing text: String) throws(ParseError) {
    let parts = text.split(separator: "://", maxSplits: 1, omittingEmptySubsequences: false)
    guard parts.count == 2 else {
      throw ParseError(input: text, reason: "expected http://HOST:PORT or ws://HOST:PORT")
    }
    scheme = parts[0].lowercased()
    guard scheme == "http" || scheme == "ws" else {
      throw ParseError(
        input: text, reason: "scheme \(scheme) is not supported (use http or ws; terminate TLS in front)")
    }
    let rest = parts[1]
    let authorityEnd = rest.firstIndex { $0 == "/" || $0 == "?" } ?? rest.endIndex
    let authority = String(rest[..<authorityEnd])
    target = rest[authorityEnd...].isEmpty ? "/" : String(rest[authorityEnd...])
    if target.hasPrefix("?") { target = "/" + target }
    guard !authority.isEmpty, !authority.contains("@") else {
      throw ParseError(input: text, reason: "missing host")
    }
    let hasPort = authority.hasPrefix("[") ? authority.contains("]:") : authority.contains(":")
    let withPort = hasPort ? authority : authority + ":80"
    let address: SocketAddress
    do throws(SocketAddress.ParseError) {
      address = try SocketAddress(parsing: withPort)
    } catch {
      throw ParseError(input: text, reason: error.reason)
    }
    guard case .inet(let host, let port) = address else {
      throw ParseError(input: text, reason: "missing host")
    }
    self.host = host
    self.port = port
  }

  /// Where to connect.
  public var address: SocketAddress { .inet(host: host, port: port) }
  public var description: String { "\(scheme)://\(address.hostHeader)\(target == "/" ? "" : target)" }
}
