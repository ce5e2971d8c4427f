import ByteBuffers
import Web

/// One request of the daemon's local API (docs/protocol.md, "The daemon's local API"), untyped: a method, a
/// path and a JSON body. `LocalAPICall` pairs one with the type of its answer; `pagesync` sends these.
public struct LocalAPIRequest: Equatable, Sendable {
  public var method: HTTPMethod
  /// The path, e.g. `/v1/pages/home`. The builders of `LocalAPICall` escape what an id cannot hold.
  public var path: String
  /// The JSON body, if the request has one.
  public var body: JSONValue?
  /// How long to wait for the answer, in seconds.
  public var timeoutSeconds: UInt64

  /// The wait for most requests: they answer once a local transaction committed.
  public static let defaultTimeoutSeconds: UInt64 = 30
  /// The wait for `POST /v1/sync`, which pushes the queue and catches up before answering.
  public static let syncTimeoutSeconds: UInt64 = 120

  public init(
    _ method: HTTPMethod, _ path: String, body: JSONValue? = nil,
    timeoutSeconds: UInt64 = LocalAPIRequest.defaultTimeoutSeconds
  ) {
    self.method = method
    self.path = path
    self.body = body
    self.timeoutSeconds = timeoutSeconds
  }

  /// The HTTP request as it goes on the socket.
  var httpRequest: HTTPRequest {
    var headers: HTTPHeaders = ["Accept": "application/json"]
    var bytes = ByteBuffer(capacity: 0)
    if let body {
      headers.add(name: "Content-Type", value: "application/json")
      bytes = ByteBuffer(string: body.jsonText)
    }
    return HTTPRequest(head: HTTPRequestHead(method: method, target: path, headers: headers), body: bytes)
  }
}

/// A successful answer: its status, its bytes as received, and their JSON value.
public struct LocalAPIAnswer: Sendable {
  public var status: Int
  /// The body exactly as the daemon sent it (what `pagesync --json` prints).
  public var body: [UInt8]
  public var value: JSONValue

  public init(status: Int, body: [UInt8], value: JSONValue) {
    self.status = status
    self.body = body
    self.value = value
  }
}
