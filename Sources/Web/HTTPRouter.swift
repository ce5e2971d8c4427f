import ByteBuffers

/// Answers one request. Call `responder.respond` (or stream a body) exactly once, now or later on the loop thread.
public typealias HTTPHandler = (HTTPRequest, HTTPResponder) -> Void

/// What a WebSocket route decides about an upgrade request.
public enum WebSocketAcceptance {
  /// Switch protocols; `headers` are added to the 101 response.
  case accept(headers: HTTPHeaders = HTTPHeaders())
  /// Refuse with this response (401 for a bad token, 403 for a forbidden workspace, ...).
  case reject(HTTPResponse)
}

/// A WebSocket endpoint: decides on each upgrade request and receives each opened socket.
public struct WebSocketRoute {
  /// The settings of its sockets. Every socket the route opens shares one copy of them (`sharedConfiguration`);
  /// setting this makes a new copy for the sockets opened after.
  public var configuration: WebSocketConfiguration {
    get { sharedConfiguration.value }
    set { sharedConfiguration = SharedWebSocketConfiguration(newValue) }
  }
  public private(set) var sharedConfiguration: SharedWebSocketConfiguration
  public var shouldAccept: (HTTPRequest) -> WebSocketAcceptance
  public var onOpen: (WebSocket) -> Void

  public init(
    configuration: WebSocketConfiguration = WebSocketConfiguration(),
    shouldAccept: @escaping (HTTPRequest) -> WebSocketAcceptance = { _ in .accept() },
    onOpen: @escaping (WebSocket) -> Void
  ) {
    self.sharedConfiguration = SharedWebSocketConfiguration(configuration)
    self.shouldAccept = shouldAccept
    self.onOpen = onOpen
  }
}

/// Maps method and path to a handler, and paths to WebSocket endpoints.
///
/// A pattern is an exact path (`/v1/sync`) or a prefix ending in `/*` (`/v1/pages/*` matches `/v1/pages/x` and
/// `/v1/pages/x/y`, not `/v1/pages`). Exact patterns win over prefixes, longer prefixes over shorter. A path with
/// handlers for other methods only gets 405 with an `Allow` header; an unknown path gets 404. A WebSocket path
/// answers a plain GET (no upgrade) with 426 and other methods with 405.
///
/// Threading: build it before serving; it is read on the loop thread.
public final class HTTPRouter {
  private var exact: [String: [HTTPMethod: HTTPHandler]] = [:]
  private var prefixes: [(prefix: String, handlers: [HTTPMethod: HTTPHandler])] = []
  private var webSockets: [String: WebSocketRoute] = [:]

  public init() {}

  /// Routes `method` requests for `pattern` to `handler`.
  public func add(_ method: HTTPMethod, _ pattern: String, _ handler: @escaping HTTPHandler) {
    if pattern.hasSuffix("/*") {
      let prefix = String(pattern.dropLast())
      if let i = prefixes.firstIndex(where: { $0.prefix == prefix }) {
        prefixes[i].handlers[method] = handler
      } else {
        prefixes.append((prefix, [method: handler]))
        prefixes.sort { $0.prefix.utf8.count > $1.prefix.utf8.count }
      }
    } else {
      exact[pattern, default: [:]][method] = handler
    }
  }

  /// Serves WebSocket upgrades on `path`.
  public func webSocket(_ path: String, _ route: WebSocketRoute) {
    webSockets[path] = route
  }

  /// The WebSocket route for `path`, if any.
  public func webSocketRoute(for path: Substring) -> WebSocketRoute? { webSockets[String(path)] }

  /// What to do with `request`: a handler, or the 404/405 response to send.
  public func resolve(_ request: HTTPRequest) -> Result<HTTPHandler, HTTPResponseError> {
    let path = String(request.path)
    let handlers: [HTTPMethod: HTTPHandler]?
    if let found = exact[path] {
      handlers = found
    } else {
      handlers =
        prefixes.first { path.hasPrefix($0.prefix) && path.utf8.count > $0.prefix.utf8.count }?.handlers
    }
    guard let handlers else {
      // A WebSocket endpoint is a known path: a request that is not an upgrade gets 426 (RFC 7231 6.5.15, with
      // the protocol to upgrade to), another method 405, as for any path, rather than "no route".
      if webSockets[path] != nil {
        if request.method == .GET || request.method == .HEAD {
          return .failure(
            HTTPResponseError(
              .upgradeRequired, "\(path) is a WebSocket endpoint: upgrade with Sec-WebSocket-Version 13",
              headers: [
                "Upgrade": "websocket", "Connection": "Upgrade",
                "Sec-WebSocket-Version": WebSocketHandshake.supportedVersion,
              ]))
        }
        var error = HTTPResponseError(.methodNotAllowed, "\(request.method) is not allowed on \(path)")
        error.headers.add(name: "Allow", value: "GET")
        return .failure(error)
      }
      return .failure(HTTPResponseError(.notFound, "no route for \(path)"))
    }
    if let handler = handlers[request.method] { return .success(handler) }
    if request.method == .HEAD, let get = handlers[.GET] { return .success(get) }
    var allowed = handlers.keys.map(\.rawValue).sorted()
    if handlers[.GET] != nil && handlers[.HEAD] == nil { allowed.append("HEAD") }
    var error = HTTPResponseError(.methodNotAllowed, "\(request.method) is not allowed on \(path)")
    error.headers.add(name: "Allow", value: allowed.joined(separator: ", "))
    return .failure(error)
  }
}

/// An error answer: a status and a one-line message naming the problem, sent as a JSON body
/// `{"error": STATUS_CODE, "message": "..."}`.
public struct HTTPResponseError: Error, Sendable {
  public var status: HTTPStatus
  public var message: String
  public var headers: HTTPHeaders

  public init(_ status: HTTPStatus, _ message: String, headers: HTTPHeaders = HTTPHeaders()) {
    self.status = status
    self.message = message
    self.headers = headers
  }

  /// The response carrying this error.
  public var response: HTTPResponse {
    var headers = self.headers
    headers.replaceOrAdd(name: "Content-Type", value: "application/json")
    let body = "{\"error\":\(status.code),\"message\":\(jsonQuoted(message))}\n"
    return HTTPResponse(status: status, headers: headers, body: ByteBuffer(string: body))
  }
}

/// `s` as a JSON string literal: `"` and `\\` escaped, control characters as `\\n`, `\\r`, `\\t` or `\\u00XX`.
public func jsonQuoted(_ s: String) -> String {
  var out = "\""
  for scalar in s.unicodeScalars {
    switch scalar {
    case "\"": out += "\\\""
    case "\\": out += "\\\\"
    case "\n": out += "\\n"
    case "\r": out += "\\r"
    case "\t": out += "\\t"
    case _ where scalar.value < 0x20:
      let hex = String(scalar.value, radix: 16)
      out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
    default: out.unicodeScalars.append(scalar)
    }
  }
  return out + "\""
}
