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
  /// How long to wait for each response, counted from when it became the one awaited. For a streamed
  /// response (`HTTPClientConnection.stream`), how long to wait for its head.
  public var responseTimeout: UInt64 = 30_000
  /// How long a streamed response may go without a byte once its head came, while the connection is reading
  /// (not between `pauseReading` and `resumeReading`); then it fails with `.timedOut`. 0: no limit. A
  /// Server-Sent Events stream whose server sends a comment every 15 s is dead after, say, 45 s of silence.
  public var streamIdleTimeout: UInt64 = 0
  /// TLS for the connection (an `https://` URL): the server is verified as the address's host before any
  /// request goes out. nil: plain TCP.
  public var tls: TLSClientContext?
  public init() {}
}

/// A keep-alive HTTP/1.1 client connection over TCP or a Unix socket. Requests may be pipelined: `send` writes
/// at once, and responses complete in request order.
///
/// A response is taken whole (`send`: the body collected, within `limits.maxBodyBytes`) or streamed (`stream`:
/// head, body pieces and end handed over as they arrive, without a size limit; `pauseReading` holds the peer
/// back while the handler's reader catches up).
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
  /// Who waits for each response, in request order.
  private enum Waiter {
    case whole((Result<HTTPResponse, HTTPClientError>) -> Void)
    case streamed((Result<HTTPResponsePart, HTTPClientError>) -> Void)

    func fail(_ error: HTTPClientError) {
      switch self {
      case .whole(let completion): completion(.failure(error))
      case .streamed(let handler): handler(.failure(error))
      }
    }
  }
  private var waiting: [Waiter] = []
  private var waitingHead = 0
  /// Whether the response being read is a streamed one whose head came: the idle timeout runs, not the
  /// response timeout.
  private var streamingBody = false
  /// Between `pauseReading` and `resumeReading`.
  private var paused = false
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
    if let tls = configuration.tls, case .inet(let host, _) = address {
      stream.install(tls.makeSession(host: host))
    }
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

  /// `request` on the wire, with `Host` (and `Content-Length`, by the encoder) added when missing.
  private func encode(_ request: HTTPRequest) -> ByteBuffer {
    var request = request
    if request.head.headers["Host"] == nil {
      request.head.headers.add(name: "Host", value: address.hostHeader)
    }
    var bytes = ByteBuffer(capacity: 256 + request.body.readableBytes)
    HTTPEncoder.encodeRequest(request, into: &bytes)
    return bytes
  }

  /// Sends `request` (adding `Host` and `Content-Length` when missing); `completion` gets its response.
  public func send(
    _ request: HTTPRequest, _ completion: @escaping (Result<HTTPResponse, HTTPClientError>) -> Void
  ) {
    guard !closed else {
      completion(.failure(.connectionClosed("the connection is closed")))
      return
    }
    let bytes = encode(request)
    decoder.expectResponse(to: request.head.method)
    if pendingRequests == 0 { armTimer() }
    waiting.append(.whole(completion))
    stream.write(bytes)
  }

  /// Sends `request` (adding `Host` when missing) and hands its response over as it arrives: `handler` gets
  /// `.head`, the body in pieces, then `.end`; or a failure, once, after which it is not called again (closing
  /// the connection fails it with `connectionClosed`). `responseTimeout` runs until the head,
  /// `streamIdleTimeout` after it. Nothing bounds the body: a handler that cannot keep up calls `pauseReading`.
  public func stream(
    _ request: HTTPRequest, _ handler: @escaping (Result<HTTPResponsePart, HTTPClientError>) -> Void
  ) {
    guard !closed else {
      handler(.failure(.connectionClosed("the connection is closed")))
      return
    }
    let bytes = encode(request)
    decoder.expectResponse(to: request.head.method, streamed: true)
    if pendingRequests == 0 { armTimer() }
    waiting.append(.streamed(handler))
    stream.write(bytes)
  }

  /// Stops reading the socket: no more parts (or responses) arrive until `resumeReading`, the kernel's buffers
  /// fill and the server is held back. The idle timeout does not run meanwhile. Idempotent.
  public func pauseReading() {
    guard !closed, !paused else { return }
    paused = true
    stream.stopReading()
    if streamingBody { timer.stop() }
  }

  /// Reads the socket again after `pauseReading`. Idempotent.
  public func resumeReading() {
    guard !closed, paused else { return }
    paused = false
    stream.startReading()
    if streamingBody { armIdleTimer() }
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
    // The decoder stops after a streamed response's end (and before bytes that went bad): decode the rest.
    var offset = 0
    while offset < bytes.count, !closed {
      let output: HTTPResponseDecoder.Output
      do throws(HTTPParseError) {
        output = try decoder.decode(UnsafeRawBufferPointer(rebasing: bytes[offset...]))
      } catch {
        fail(.invalidResponse(error))
        return
      }
      deliver(output)
      if output.upgrade != nil {
        fail(.connectionClosed("unexpected 101 Switching Protocols"))
      }
      offset += output.consumed
    }
    if streamingBody && !closed && !paused { armIdleTimer() }
  }

  private func deliver(_ output: HTTPResponseDecoder.Output) {
    for response in output.responses {
      guard !closed else { return }
      guard let waiter = nextWaiter(), case .whole(let completion) = waiter else {
        fail(.connectionClosed("a response arrived that no request asked for"))
        return
      }
      answered()
      completion(.success(response))
      if !response.head.keepAlive {
        fail(.connectionClosed("the server closed the connection after an earlier response"))
        return
      }
    }
    for part in output.parts {
      guard !closed else { return }
      guard let waiter = nextWaiter(), case .streamed(let handler) = waiter else {
        fail(.connectionClosed("a streamed response arrived that no request asked for"))
        return
      }
      switch part {
      case .head(let head):
        streamingBody = true
        streamKeepAlive = head.keepAlive
        timer.stop()
        handler(.success(part))
      case .body:
        handler(.success(part))
      case .end:
        streamingBody = false
        answered()
        handler(.success(.end))
        if !streamKeepAlive {
          fail(.connectionClosed("the server closed the connection after an earlier response"))
          return
        }
      }
    }
  }

  /// Whether the streamed response being read keeps the connection open after it.
  private var streamKeepAlive = true

  private func nextWaiter() -> Waiter? { waitingHead < waiting.count ? waiting[waitingHead] : nil }

  /// The response awaited first is complete: the next one's timer starts.
  private func answered() {
    waitingHead += 1
    if waitingHead == waiting.count {
      waiting.removeAll(keepingCapacity: true)
      waitingHead = 0
      timer.stop()
    } else {
      armTimer()
    }
  }

  private func peerEnded() {
    do throws(HTTPParseError) {
      deliver(try decoder.finish())
      fail(.connectionClosed("the server closed the connection"))
    } catch {
      fail(.invalidResponse(error))
    }
  }

  private func armTimer() {
    timer.start(after: configuration.responseTimeout) { [unowned self] in self.fail(.timedOut) }
  }

  private func armIdleTimer() {
    guard configuration.streamIdleTimeout > 0 else { return }
    timer.start(after: configuration.streamIdleTimeout) { [unowned self] in self.fail(.timedOut) }
  }

  /// Fails every waiting request with `error` and closes.
  private func fail(_ error: HTTPClientError) {
    guard !closed else { return }
    closed = true
    let pending = waiting[waitingHead...]
    waiting = []
    waitingHead = 0
    streamingBody = false
    timer.close()
    stream.close()
    for waiter in pending { waiter.fail(error) }
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

/// An `http://`, `https://`, `ws://` or `wss://` URL: where to connect, the `Host` header and the request target.
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
    guard ["http", "ws", "https", "wss"].contains(scheme) else {
      throw ParseError(input: text, reason: "scheme \(scheme) is not supported (use http, https, ws or wss)")
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
    let withPort = hasPort ? authority : authority + (scheme == "https" || scheme == "wss" ? ":443" : ":80")
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
  /// Whether the URL asks for TLS (`https`, `wss`).
  public var isSecure: Bool { scheme == "https" || scheme == "wss" }
  public var description: String { "\(scheme)://\(address.hostHeader)\(target == "/" ? "" : target)" }
}
