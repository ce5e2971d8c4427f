import ByteBuffers
import EventLoop

/// Settings of an `HTTPServer`. Times are in milliseconds.
public struct HTTPServerConfiguration: Sendable {
  /// Header and body size limits (431 and 413 beyond them).
  public var limits = HTTPParserLimits()
  /// How long a keep-alive connection may sit with no request before it is closed.
  public var idleTimeout: UInt64 = 60_000
  /// How long a request may take to arrive, from its first byte to its last; then 408 and close. This is what
  /// keeps half-sent requests (slowloris) from piling up. Each request has its own: the time starts again when
  /// the next request on the connection begins.
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
  /// Bytes of response data queued for a connection beyond which it reads and parses no more requests until the
  /// queue is written (backpressure against a client that pipelines and never reads). The queue can exceed it
  /// by the answers to requests already parsed (at most `maxPipelinedRequests`).
  public var maxQueuedResponseBytes = 4 << 20
  /// How long (ms) a connection's peer may take no byte of what is queued for it before the connection is
  /// closed without more ado (`ByteStream.writeStallTimeout`); 0 for no limit. A connection is not idle while
  /// an answer is being written, so this, not `idleTimeout`, bounds a peer that stopped reading; and it bounds
  /// how long a closing connection may take to write its last answers.
  public var writeStallTimeout: UInt64 = 60_000
  /// How long a connection that the server closes waits, once its last answer is written and FIN sent, for the
  /// peer to close too (the lingering close), so that a reset does not destroy an answer not yet read.
  public var lingerTimeout: UInt64 = 2_000
  /// Connections refused (over a connection limit) that may be lingering at once after their 503; beyond this a
  /// refused connection is closed at once without an answer, so a flood of refused connections cannot hold
  /// more descriptors than the limits plus this.
  public var maxLingeringRefusals = 256
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
  /// The certificate of the listeners opened with TLS. Replacing it serves the new one to new connections; open
  /// ones keep the session they have.
  public var tls: TLSServerContext?

  public init(
    loop: Loop, configuration: HTTPServerConfiguration = HTTPServerConfiguration(), router: HTTPRouter
  ) {
    self.loop = loop
    self.configuration = configuration
    self.router = router
  }

  /// Starts listening on `address`; returns the bound address (with the real port for port 0). With `tls`,
  /// connections on this listener speak TLS (`tls` becomes the server's `tls`, which a reload may replace).
  @discardableResult
  public func listen(
    on address: SocketAddress, unixSocketMode: UInt32 = 0o600, tls: TLSServerContext? = nil
  ) throws(LoopError) -> SocketAddress {
    let listener = try Listener(loop: loop, address: address, unixSocketMode: unixSocketMode)
    let secure = tls != nil
    if let tls { self.tls = tls }
    // Strong: an open server lives until closed, whoever else holds it.
    listener.onConnection = { stream in
      // TLS first, so that a refusal's 503 goes out sealed too.
      if secure, let tls = self.tls { stream.install(tls.makeSession()) }
      self.accept(stream)
    }
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

  /// Every connection this server accepted (and did not refuse) whose descriptor is still open: HTTP, upgraded,
  /// and closed ones still writing their last answers or lingering. What the connection limits count.
  public private(set) var openConnectionCount = 0

  /// Refused connections still open (their 503 being written, or lingering).
  public private(set) var lingeringRefusals = 0

  /// Open connections (as `openConnectionCount`) per peer host, for `maxConnectionsPerPeer`.
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
      refuse(stream, refusal)
      return
    }
    stream.setNoDelay(true)
    stream.writeStallTimeout = configuration.writeStallTimeout
    let connection = HTTPServerConnection(server: self, stream: stream, peer: peer)
    // The descriptor counts until it is closed, not until the connection is done with it: a closed connection
    // still writing its last answer, or lingering, holds it all the same.
    openConnectionCount += 1
    if let peer { peerConnections[peer, default: 0] += 1 }
    // Replaced when the connection is upgraded (`connectionUpgraded`).
    stream.onClose = { [weak self, weak connection] in
      // Closed behind the connection's back (the loop closing every handle at shutdown): detach it.
      connection?.streamClosed()
      self?.streamClosed(peer: peer)
    }
    connectionObjects[ObjectIdentifier(connection)] = connection
    connection.start()
  }

  /// Answers 503 naming `reason` and closes; at once, without an answer, when too many refusals linger already.
  private func refuse(_ stream: ByteStream, _ reason: String) {
    onEvent?(.connectionRefused(reason: reason))
    guard lingeringRefusals < configuration.maxLingeringRefusals else {
      stream.close()
      return
    }
    let response = HTTPResponseError(.serviceUnavailable, reason).response
    responseCounts.record(response.head.status.code)
    var bytes = ByteBuffer()
    var head = response.head
    head.headers.replaceOrAdd(name: "Connection", value: "close")
    HTTPEncoder.encodeResponse(HTTPResponse(head: head, body: response.body), into: &bytes)
    lingeringRefusals += 1
    stream.onClose = { [weak self] in self?.lingeringRefusals -= 1 }
    stream.write(bytes)
    stream.closeGracefully(linger: 500)
  }

  func connectionDidClose(_ connection: HTTPServerConnection) {
    // Its descriptor stays counted until the stream closes (`accept`).
    connectionObjects.removeValue(forKey: ObjectIdentifier(connection))
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

  /// The timer its WebSockets of `configuration`'s ping interval share (nil without pings).
  func heartbeat(for configuration: WebSocketConfiguration) -> WebSocketHeartbeat? {
    guard configuration.pingInterval > 0 else { return nil }
    let period = Swift.max(configuration.pingInterval / 4, 1)
    if let shared = heartbeats.first(where: { $0.period == period }) { return shared }
    let shared = WebSocketHeartbeat(loop: loop, period: period)
    heartbeats.append(shared)
    return shared
  }

  /// One per ping period in use (a route or two: a short list).
  private var heartbeats: [WebSocketHeartbeat] = []

  /// A connection handed its stream to a WebSocket: counted as upgraded until the stream closes.
  func connectionUpgraded(_ stream: ByteStream, peer: String?) {
    upgradedCount += 1
    // The stream outlives its HTTP connection, often for hours: its close callback now captures the server (held
    // strongly: the callback is the stream's, dropped when it closes) and the peer, one small context, instead of
    // a weak reference to the finished connection, which kept that object's side table alive too (B6).
    stream.onClose = {
      self.upgradedCount -= 1
      self.streamClosed(peer: peer)
    }
  }

  /// A stream this server accepted closed: its descriptor no longer counts.
  private func streamClosed(peer: String?) {
    openConnectionCount -= 1
    if let peer { forget(peer) }
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
  /// A connection was dropped: its peer took none of the `queuedBytes` waiting for it for `writeStallTimeout`.
  case writeStalled(queuedBytes: Int)
}
