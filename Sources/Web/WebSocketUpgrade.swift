import ByteBuffers
import EventLoop

/// The server's checks of a WebSocket upgrade request (RFC 6455 4.2.1).
enum WebSocketUpgrade {
  /// The `Sec-WebSocket-Accept` value for a valid request, or the error response for an invalid one: 400 for a
  /// malformed handshake, 426 with `Sec-WebSocket-Version: 13` for a version we do not speak.
  static func validate(_ head: HTTPRequestHead) -> Result<String, HTTPResponseError> {
    guard head.method == .GET else {
      return .failure(HTTPResponseError(.badRequest, "a WebSocket upgrade must use GET"))
    }
    guard head.version.major > 1 || (head.version.major == 1 && head.version.minor >= 1) else {
      return .failure(HTTPResponseError(.badRequest, "a WebSocket upgrade needs HTTP/1.1"))
    }
    guard head.headers.contains(name: "Connection", token: "upgrade") else {
      return .failure(HTTPResponseError(.badRequest, "a WebSocket upgrade needs Connection: Upgrade"))
    }
    guard
      head.headers["Sec-WebSocket-Version"]?.trimmingSpaces == Substring(WebSocketHandshake.supportedVersion)
    else {
      let version = head.headers["Sec-WebSocket-Version"] ?? "none"
      return .failure(
        HTTPResponseError(
          .upgradeRequired, "unsupported WebSocket version \(version); this server speaks 13",
          headers: ["Sec-WebSocket-Version": WebSocketHandshake.supportedVersion]))
    }
    guard let key = head.headers["Sec-WebSocket-Key"].map({ String($0.trimmingSpaces) }),
      WebSocketHandshake.isValidKey(key)
    else {
      return .failure(HTTPResponseError(.badRequest, "missing or malformed Sec-WebSocket-Key"))
    }
    return .success(WebSocketHandshake.acceptValue(forKey: key))
  }
}

/// Opens client WebSockets.
public enum WebSocketClient {
  /// Connects to `address`, sends the upgrade request for `target` (path and query) with `headers` added, and
  /// completes with the open socket, or with why it failed (a refused upgrade carries the server's response).
  /// With `tls`, the connection is TLS and the server is verified as `address`'s host before the request goes
  /// out.
  /// `completion` runs on the loop thread; the socket starts reading once it returns.
  public static func connect(
    loop: Loop, to address: SocketAddress, target: String, host: String? = nil,
    headers: HTTPHeaders = HTTPHeaders(), configuration: WebSocketConfiguration = WebSocketConfiguration(),
    handshakeTimeout: UInt64 = 10_000, tls: TLSClientContext? = nil,
    _ completion: @escaping (Result<WebSocket, HTTPClientError>) -> Void
  ) {
    let timer = LoopTimer(loop: loop)
    var finished = false
    var openStream: ByteStream?
    func complete(_ result: Result<WebSocket, HTTPClientError>) {
      guard !finished else { return }
      finished = true
      timer.close()
      if case .failure = result { openStream?.close() }
      completion(result)
    }
    timer.start(after: handshakeTimeout) { complete(.failure(.timedOut)) }
    ByteStream.connect(loop: loop, to: address) { result in
      let stream: ByteStream
      switch result {
      case .failure(let error):
        complete(.failure(.connectFailed(error)))
        return
      case .success(let s):
        stream = s
      }
      guard !finished else {
        stream.close()
        return
      }
      openStream = stream
      stream.setNoDelay(true)
      if let tls, case .inet(let host, _) = address { stream.install(tls.makeSession(host: host)) }
      let key = WebSocketHandshake.makeKey()
      var head = HTTPRequestHead(method: .GET, target: target, headers: headers)
      if head.headers["Host"] == nil { head.headers.add(name: "Host", value: host ?? address.hostHeader) }
      head.headers.replaceOrAdd(name: "Upgrade", value: "websocket")
      head.headers.replaceOrAdd(name: "Connection", value: "Upgrade")
      head.headers.replaceOrAdd(name: "Sec-WebSocket-Key", value: key)
      head.headers.replaceOrAdd(name: "Sec-WebSocket-Version", value: WebSocketHandshake.supportedVersion)
      var bytes = ByteBuffer()
      HTTPEncoder.encodeRequestHead(head, contentLength: nil, into: &bytes)
      stream.write(bytes)
      let decoder = HTTPResponseDecoder()
      decoder.expectResponse(to: .GET)
      stream.onRead = { bytes in
        let output: HTTPResponseDecoder.Output
        do throws(HTTPParseError) { output = try decoder.decode(bytes) } catch {
          complete(.failure(.invalidResponse(error)))
          return
        }
        if let response = output.upgrade {
          guard response.head.status.code == 101,
            response.head.headers.contains(name: "Upgrade", token: "websocket"),
            response.head.headers.contains(name: "Connection", token: "upgrade"),
            response.head.headers["Sec-WebSocket-Accept"]?.trimmingSpaces
              == Substring(WebSocketHandshake.acceptValue(forKey: key))
          else {
            complete(
              .failure(
                .handshakeFailed("the server's 101 response does not complete the WebSocket handshake")))
            return
          }
          stream.stopReading()
          let leftover = ByteBuffer(bytes: UnsafeRawBufferPointer(rebasing: bytes[output.consumed...]))
          let socket = WebSocket(
            stream: stream, role: .client, configuration: SharedWebSocketConfiguration(configuration),
            request: nil,
            leftover: leftover)
          complete(.success(socket))
          socket.start()
        } else if let response = output.responses.first {
          complete(.failure(.upgradeRefused(response)))
        }
      }
      stream.onEnd = {
        complete(.failure(.connectionClosed("the server closed the connection during the handshake")))
      }
      stream.onError = { error in complete(.failure(.connectionClosed(error.description))) }
      stream.startReading()
    }
  }
}

extension SocketAddress {
  /// The `Host` header naming this address.
  var hostHeader: String {
    switch self {
    case .inet(let host, let port): host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)"
    case .unix: "localhost"
    }
  }
}
