import ByteBuffers
import EventLoop

/// Settings of an `HTTPServer`. Times are in milliseconds.
public struct HTTPServerConfiguration: Sendable {
  /// Header and body size limits (431 and 413 beyond them).
  public var limits = HTTPParserLimits()
  /// How long a keep-alive connection may sit with no request before it is closed.
  public var idleTimeout: UInt64 = 60_000
  /// How long a request may take to arrive, from its first byte to its last; then 408 and close. This is what
  /// keeps half-sent requests (slowloris) from piling up.
  public var requestReadTimeout: UInt64 = 10_000
  /// Requests read ahead of their responses on one connection (pipelining); past it the server stops reading
  /// from that connection until responses go out.
  public var maxPipelinedRequests = 16
  /// Open connections at most; one more is accepted and closed at once.
  public var maxConnections = 10_000
  /// Open connections from one peer address at most (TCP; counted before any request is read, so a client
  /// that opens connections and sends nothing cannot take the whole `maxConnections` from the others). One more
  /// from that address gets a 503 and is closed.
  public var maxConnectionsPerPeer = Int.max
  /// Bytes of response data queued for a connection beyond which it stops reading requests until the peer
  /// reads (backpressure against a client that pipelines and never reads).
  public var maxQueuedResponseBytes = 4 << 20
  /// The `Server` header, or nil for none.
  public var serverName: String? = "pagesync"

  public init() {}
}

/// An HTTP/1.1 server over one loop: keep-alive, pipelining, chunked and fixed-length bodies, size limits,
/// read and idle timeouts, and WebSocket upgrades, on any number of TCP and Unix-socket listeners.
///
/// Threading: loop thread only.
public final class HTTPServer {
  public let loop: Loop
  public var configuration: HTTPServerConfiguration
  public let router: HTTPRouter
  private var listeners: [Listener] = []
  private var connectionObjects: [ObjectIdentifier: HTTPServerConnection] = [:]
  private var closing = false
  private var closeCompletion: (() -> Void)?
  /// Accept errors, connection-limit refusals and similar events worth a log line.
  public var onEvent: ((HTTPServerEvent) -> Void)?
  /// Every response this server started, by status: handlers' answers, refusals of unparsable requests, the
  /// 500 of a forgotten responder, the 503 of a connection over the limit. For metrics.
  public private(set) var responseCounts = HTTPStatusCounts()

  public init(
    loop: Loop, configuration: HTTPServerConfiguration = HTTPServerConfiguration(), router: HTTPRouter
  ) {
    self.loop = loop
    self.configuration = configuration
    self.router = router
  }

  /// Starts listening on `address`; returns the bound address (with the real port for port 0).
  @discardableResult
  public func listen(on address: SocketAddress, unixSocketMode: UInt32 = 0o600) throws(LoopError)
    -> SocketAddress
  {
    let listener = try Listener(loop: loop, address: address, unixSocketMode: unixSocketMode)
    // Strong: an open server lives until closed, whoever else holds it.
    listener.onConnection = { stream in self.accept(stream) }
    listener.onError = { error in self.onEvent?(.acceptFailed(error)) }
    listeners.append(listener)
    return listener.address
  }

  /// The addresses listened on.
  public var addresses: [SocketAddress] { listeners.map(\.address) }

  /// Open connections, HTTP only (upgraded WebSockets belong to their route).
  public var connectionCount: Int { connectionObjects.count }

  /// Connections upgraded to WebSocket and still open. They count against `maxConnections` with the HTTP ones:
  /// each holds a file descriptor all the same.
  public private(set) var upgradedCount = 0

  /// Every open connection this server accepted: HTTP and upgraded.
  public var openConnectionCount: Int { connectionObjects.count + upgradedCount }

  /// Open connections (HTTP and upgraded) per peer host, for `maxConnectionsPerPeer`.
  private var peerConnections: [String: Int] = [:]

  /// Open connections from `host` (an address as `SocketAddress` prints it, without the port).
  public func openConnectionCount(fromPeer host: String) -> Int { peerConnections[host] ?? 0 }

  private func accept(_ stream: ByteStream) {
    let peer: String? = if case .inet(let host, _)? = stream.peerAddress { host } else { nil }
    let refusal: String? =
      if closing {
        "server closing"
      } else if openConnectionCount >= configuration.maxConnections {
        "connection limit reached"
      } else if let peer, openConnectionCount(fromPeer: peer) >= configuration.maxConnectionsPerPeer {
        "too many connections from \(peer)"
      } else {
        nil
      }
    if let refusal {
      onEvent?(.connectionRefused(reason: refusal))
      let response = HTTPResponseError(.serviceUnavailable, refusal).response
      responseCounts.record(response.head.status.code)
      var bytes = ByteBuffer()
      var head = response.head
      head.headers.replaceOrAdd(name: "Connection", value: "close")
      HTTPEncoder.encodeResponse(HTTPResponse(head: head, body: response.body), into: &bytes)
      stream.write(bytes)
      stream.closeGracefully(linger: 500)
      return
    }
    stream.setNoDelay(true)
    let connection = HTTPServerConnection(server: self, stream: stream, peer: peer)
    if let peer { peerConnections[peer, default: 0] += 1 }
    connectionObjects[ObjectIdentifier(connection)] = connection
    connection.start()
  }

  func connectionDidClose(_ connection: HTTPServerConnection) {
    connectionObjects.removeValue(forKey: ObjectIdentifier(connection))
    if let peer = connection.peer { forget(peer) }
    if closing && connectionObjects.isEmpty, let completion = closeCompletion {
      closeCompletion = nil
      completion()
    }
  }

  /// Stops accepting, closes idle connections at once and the others once their in-flight responses are sent;
  /// `then` runs when no HTTP connection is left. WebSockets already upgraded are their owner's to close.
  public func close(then: (() -> Void)? = nil) {
    closing = true
    for listener in listeners { listener.close() }
    listeners = []
    closeCompletion = then
    for connection in Array(connectionObjects.values) { connection.serverIsClosing() }
    if connectionObjects.isEmpty, let completion = closeCompletion {
      closeCompletion = nil
      completion()
    }
  }

  var isClosing: Bool { closing }

  /// A connection handed its stream to a WebSocket: count it until the stream closes.
  func connectionUpgraded(_ stream: ByteStream, peer: String?) {
    upgradedCount += 1
    if let peer { peerConnections[peer, default: 0] += 1 }
    stream.onClose = { [weak self] in
      self?.upgradedCount -= 1
      if let peer { self?.forget(peer) }
    }
  }

  private func forget(_ peer: String) {
    let left = (peerConnections[peer] ?? 1) - 1
    peerConnections[peer] = left > 0 ? left : nil
  }

  func recordResponse(_ status: HTTPStatus) { responseCounts.record(status.code) }
}

/// How many responses had each status code (100 to 599; others are counted as 0). Plain counters: owned by one
/// loop thread, read by copying.
public struct HTTPStatusCounts: Sendable, Equatable {
  private var counts = [Int](repeating: 0, count: 600)

  public init() {}

  /// Responses with `code`.
  public subscript(code: Int) -> Int { counts.indices.contains(code) ? counts[code] : 0 }

  /// Counts one response with `code`.
  public mutating func record(_ code: Int) {
    counts[counts.indices.contains(code) ? code : 0] += 1
  }

  /// The codes in `range` seen at least once, ascending, with their counts.
  public func seen(in range: ClosedRange<Int> = 100...599) -> [(code: Int, count: Int)] {
    range.clamped(to: 0...599).compactMap { counts[$0] > 0 ? ($0, counts[$0]) : nil }
  }
}

/// Something a server operator may want logged or counted.
public enum HTTPServerEvent: Sendable {
  /// `accept` failed (EMFILE and the like); the listener stays up.
  case acceptFailed(LoopError)
  /// A connection was accepted and closed at once.
  case connectionRefused(reason: String)
  /// A request was refused before reaching a handler (400, 408, 413, 431, 505).
  case badRequest(HTTPStatus, String)
}
