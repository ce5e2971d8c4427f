import ByteBuffers

/// An HTTP method. Any token is allowed; the common ones have names, spelled as on the wire.
public struct HTTPMethod: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
  public var rawValue: String
  public init(rawValue: String) { self.rawValue = rawValue }
  public init(_ rawValue: String) { self.rawValue = rawValue }
  public var description: String { rawValue }

  // swift-format-ignore: AlwaysUseLowerCamelCase
  public static let GET = HTTPMethod("GET")
  // swift-format-ignore: AlwaysUseLowerCamelCase
  public static let HEAD = HTTPMethod("HEAD")
  // swift-format-ignore: AlwaysUseLowerCamelCase
  public static let POST = HTTPMethod("POST")
  // swift-format-ignore: AlwaysUseLowerCamelCase
  public static let PUT = HTTPMethod("PUT")
  // swift-format-ignore: AlwaysUseLowerCamelCase
  public static let DELETE = HTTPMethod("DELETE")
  // swift-format-ignore: AlwaysUseLowerCamelCase
  public static let PATCH = HTTPMethod("PATCH")
  // swift-format-ignore: AlwaysUseLowerCamelCase
  public static let OPTIONS = HTTPMethod("OPTIONS")
}

/// An HTTP status code and its reason phrase.
public struct HTTPStatus: Hashable, Sendable, CustomStringConvertible {
  public var code: Int
  public var reasonPhrase: String

  public init(code: Int, reasonPhrase: String? = nil) {
    self.code = code
    self.reasonPhrase = reasonPhrase ?? HTTPStatus.standardReason(code)
  }

  public var description: String { "\(code) \(reasonPhrase)" }

  public static let switchingProtocols = HTTPStatus(code: 101)
  public static let ok = HTTPStatus(code: 200)
  public static let created = HTTPStatus(code: 201)
  public static let noContent = HTTPStatus(code: 204)
  public static let badRequest = HTTPStatus(code: 400)
  public static let unauthorized = HTTPStatus(code: 401)
  public static let forbidden = HTTPStatus(code: 403)
  public static let notFound = HTTPStatus(code: 404)
  public static let methodNotAllowed = HTTPStatus(code: 405)
  public static let requestTimeout = HTTPStatus(code: 408)
  public static let conflict = HTTPStatus(code: 409)
  public static let payloadTooLarge = HTTPStatus(code: 413)
  public static let upgradeRequired = HTTPStatus(code: 426)
  public static let tooManyRequests = HTTPStatus(code: 429)
  public static let requestHeaderFieldsTooLarge = HTTPStatus(code: 431)
  public static let internalServerError = HTTPStatus(code: 500)
  public static let notImplemented = HTTPStatus(code: 501)
  public static let badGateway = HTTPStatus(code: 502)
  public static let serviceUnavailable = HTTPStatus(code: 503)
  public static let gatewayTimeout = HTTPStatus(code: 504)
  public static let httpVersionNotSupported = HTTPStatus(code: 505)

  static func standardReason(_ code: Int) -> String {
    switch code {
    case 100: "Continue"
    case 101: "Switching Protocols"
    case 200: "OK"
    case 201: "Created"
    case 202: "Accepted"
    case 204: "No Content"
    case 301: "Moved Permanently"
    case 304: "Not Modified"
    case 400: "Bad Request"
    case 401: "Unauthorized"
    case 403: "Forbidden"
    case 404: "Not Found"
    case 405: "Method Not Allowed"
    case 408: "Request Timeout"
    case 409: "Conflict"
    case 411: "Length Required"
    case 413: "Payload Too Large"
    case 414: "URI Too Long"
    case 415: "Unsupported Media Type"
    case 422: "Unprocessable Content"
    case 426: "Upgrade Required"
    case 429: "Too Many Requests"
    case 431: "Request Header Fields Too Large"
    case 500: "Internal Server Error"
    case 501: "Not Implemented"
    case 502: "Bad Gateway"
    case 503: "Service Unavailable"
    case 504: "Gateway Timeout"
    case 505: "HTTP Version Not Supported"
    default: "Status \(code)"
    }
  }
}

/// HTTP version, e.g. 1.1.
public struct HTTPVersion: Hashable, Sendable, CustomStringConvertible {
  public var major: Int
  public var minor: Int
  public init(major: Int, minor: Int) {
    self.major = major
    self.minor = minor
  }
  // swift-format-ignore: AlwaysUseLowerCamelCase
  public static let http1_0 = HTTPVersion(major: 1, minor: 0)
  // swift-format-ignore: AlwaysUseLowerCamelCase
  public static let http1_1 = HTTPVersion(major: 1, minor: 1)
  public var description: String { "HTTP/\(major).\(minor)" }
}

/// An ordered list of header fields. Names compare case-insensitively; order and duplicates are kept.
///
/// Names and values are sanitized when added: CR, LF and NUL become a space, so no header can inject
/// another line into a message we encode.
public struct HTTPHeaders: Sendable, Sequence, Equatable, ExpressibleByDictionaryLiteral {
  public private(set) var fields: [(name: String, value: String)] = []

  public init() {}
  public init(_ fields: [(String, String)]) {
    for (name, value) in fields { add(name: name, value: value) }
  }
  public init(dictionaryLiteral elements: (String, String)...) { self.init(elements) }

  public var count: Int { fields.count }
  public func makeIterator() -> IndexingIterator<[(name: String, value: String)]> { fields.makeIterator() }

  /// Appends a field.
  public mutating func add(name: String, value: String) {
    fields.append((HTTPHeaders.sanitize(name), HTTPHeaders.sanitize(value)))
  }

  /// Replaces every field called `name` by one with `value`.
  public mutating func replaceOrAdd(name: String, value: String) {
    remove(name: name)
    add(name: name, value: value)
  }

  /// Removes every field called `name`.
  public mutating func remove(name: String) {
    fields.removeAll { HTTPHeaders.namesEqual($0.name, name) }
  }

  /// The first value of `name`, if any.
  public subscript(name: String) -> String? {
    fields.first { HTTPHeaders.namesEqual($0.name, name) }?.value
  }

  /// Every value of `name`, in order.
  public func values(of name: String) -> [String] {
    fields.filter { HTTPHeaders.namesEqual($0.name, name) }.map(\.value)
  }

  /// Whether a comma-separated header (`Connection`, `Upgrade`) lists `token`, case-insensitively.
  public func contains(name: String, token: String) -> Bool {
    // The fields themselves, not `values(of:)`: every request and answer asks (`Connection: close`), and two
    // arrays made and freed for an answer that has no such header cost ~900 instructions (callgrind).
    for field in fields where HTTPHeaders.namesEqual(field.name, name) {
      for part in field.value.split(separator: ",") {
        if HTTPHeaders.namesEqual(part.trimmingSpaces, token) { return true }
      }
    }
    return false
  }

  public static func == (lhs: HTTPHeaders, rhs: HTTPHeaders) -> Bool {
    lhs.fields.count == rhs.fields.count
      && zip(lhs.fields, rhs.fields).allSatisfy { $0.name == $1.name && $0.value == $1.value }
  }

  /// Whether two names are the same, ASCII letters compared without case. Read from the strings' contiguous
  /// UTF-8 where they have it (every native string): zipped `UTF8View`s cost ~240 instructions a lookup, and an
  /// answer looks its headers up several times (callgrind, one-mutation batch).
  static func namesEqual(_ a: some StringProtocol, _ b: some StringProtocol) -> Bool {
    guard a.utf8.count == b.utf8.count else { return false }
    let fast = a.utf8.withContiguousStorageIfAvailable { x in
      b.utf8.withContiguousStorageIfAvailable { y in bytesEqualIgnoringASCIICase(x, y) }
    }
    if let fast, let equal = fast { return equal }
    for (x, y) in zip(a.utf8, b.utf8) where x != y {
      guard asciiLower(x) == asciiLower(y) else { return false }
    }
    return true
  }

  private static func bytesEqualIgnoringASCIICase(
    _ x: UnsafeBufferPointer<UInt8>, _ y: UnsafeBufferPointer<UInt8>
  )
    -> Bool
  {
    for index in 0..<x.count where x[index] != y[index] {
      guard asciiLower(x[index]) == asciiLower(y[index]) else { return false }
    }
    return true
  }

  /// `s` with CR, LF and NUL made spaces. Every header of every request and answer passes here, so the usual case
  /// (none of them) is one scan of contiguous bytes: `contains(where:)` over the `UTF8View` took ~650
  /// instructions a header (4,000 a one-mutation batch, callgrind).
  static func sanitize(_ s: String) -> String {
    let clean =
      s.utf8.withContiguousStorageIfAvailable { bytes in
        for byte in bytes where byte == 13 || byte == 10 || byte == 0 { return false }
        return true
      } ?? !s.utf8.contains { $0 == 13 || $0 == 10 || $0 == 0 }
    if clean { return s }
    return String(decoding: s.utf8.map { $0 == 13 || $0 == 10 || $0 == 0 ? 32 : $0 }, as: UTF8.self)
  }
}

@inline(__always) func asciiLower(_ c: UInt8) -> UInt8 { c >= 65 && c <= 90 ? c + 32 : c }

extension StringProtocol {
  /// The string without leading and trailing spaces and tabs.
  var trimmingSpaces: Substring {
    let s = Substring(self)
    guard let start = s.firstIndex(where: { $0 != " " && $0 != "\t" }) else { return "" }
    let end = s.lastIndex(where: { $0 != " " && $0 != "\t" })!
    return s[start...end]
  }
}

/// The head of an HTTP request: request line and headers.
public struct HTTPRequestHead: Sendable, Equatable {
  public var method: HTTPMethod
  /// The request target as sent, e.g. `/v1/sync?page=2`.
  public var target: String
  public var version: HTTPVersion
  public var headers: HTTPHeaders

  public init(
    method: HTTPMethod, target: String, version: HTTPVersion = .http1_1, headers: HTTPHeaders = HTTPHeaders()
  ) {
    self.method = method
    self.target = target
    self.version = version
    self.headers = headers
  }

  /// The path part of the target, without the query.
  public var path: Substring {
    if let q = queryMark { return target[..<q] }
    return target[...]
  }

  /// The raw query string after `?`, if any.
  public var query: Substring? {
    guard let q = queryMark else { return nil }
    // After the mark's byte, not its `Character`: a combining mark after `?` belongs to the query.
    return target[target.utf8.index(after: q)...]
  }

  /// Where the first `?` is, found among the target's bytes: `firstIndex(of: Character)` walks grapheme clusters,
  /// ~3,400 instructions for a router's lookup of `/v1/batch` (callgrind). `?` is ASCII, so its byte's index is
  /// a character's too.
  private var queryMark: String.Index? { target.utf8.firstIndex(of: UInt8(ascii: "?")) }

  /// The query parameters, percent-decoded (`+` is a space), in order.
  public var queryItems: [(name: String, value: String)] {
    guard let query else { return [] }
    return query.split(separator: "&").map { item in
      if let eq = item.firstIndex(of: "=") {
        return (percentDecode(item[..<eq]), percentDecode(item[item.index(after: eq)...]))
      }
      return (percentDecode(item), "")
    }
  }

  /// The first value of query parameter `name`.
  public func queryValue(_ name: String) -> String? { queryItems.first { $0.name == name }?.value }

  /// Whether the connection stays open after this message (HTTP/1.1 default; `Connection: close`; HTTP/1.0
  /// needs `Connection: keep-alive`).
  public var keepAlive: Bool { HTTPHeaders.keepAlive(version: version, headers: headers) }
}

/// The head of an HTTP response: status line and headers.
public struct HTTPResponseHead: Sendable, Equatable {
  public var status: HTTPStatus
  public var version: HTTPVersion
  public var headers: HTTPHeaders

  public init(status: HTTPStatus, version: HTTPVersion = .http1_1, headers: HTTPHeaders = HTTPHeaders()) {
    self.status = status
    self.version = version
    self.headers = headers
  }

  public var keepAlive: Bool { HTTPHeaders.keepAlive(version: version, headers: headers) }
}

extension HTTPHeaders {
  static func keepAlive(version: HTTPVersion, headers: HTTPHeaders) -> Bool {
    if headers.contains(name: "Connection", token: "close") { return false }
    if version.major == 1 && version.minor >= 1 { return true }
    return headers.contains(name: "Connection", token: "keep-alive")
  }
}

/// A complete request: head and body (the body is de-chunked; at most the configured limit).
public struct HTTPRequest: Sendable, Equatable {
  public var head: HTTPRequestHead
  public var body: ByteBuffer
  public init(head: HTTPRequestHead, body: ByteBuffer = ByteBuffer()) {
    self.head = head
    self.body = body
  }
  /// This request with only the header fields named (compared case-insensitively) and no body: method, target
  /// and version as they are.
  public func keeping(headers names: [String]) -> HTTPRequest {
    var kept = HTTPHeaders()
    for field in head.headers where names.contains(where: { HTTPHeaders.namesEqual($0, field.name) }) {
      kept.add(name: field.name, value: field.value)
    }
    var head = head
    head.headers = kept
    return HTTPRequest(head: head, body: .empty)
  }

  public var method: HTTPMethod { head.method }
  public var path: Substring { head.path }
  public var headers: HTTPHeaders { head.headers }
}

/// A complete response: head and body (de-chunked).
public struct HTTPResponse: Sendable, Equatable {
  public var head: HTTPResponseHead
  public var body: ByteBuffer
  public init(head: HTTPResponseHead, body: ByteBuffer = ByteBuffer()) {
    self.head = head
    self.body = body
  }
  public init(status: HTTPStatus, headers: HTTPHeaders = HTTPHeaders(), body: ByteBuffer = ByteBuffer()) {
    self.init(head: HTTPResponseHead(status: status, headers: headers), body: body)
  }
  /// A response with a text body and `Content-Type: text/plain; charset=utf-8`.
  public static func text(_ status: HTTPStatus, _ text: String) -> HTTPResponse {
    HTTPResponse(
      status: status, headers: ["Content-Type": "text/plain; charset=utf-8"], body: ByteBuffer(string: text))
  }
  public var status: HTTPStatus { head.status }
  public var headers: HTTPHeaders { head.headers }
}

/// One piece of a streamed response, in the order it arrived: `.head`, then `.body` pieces, then `.end`.
public enum HTTPResponsePart: Sendable, Equatable {
  /// The final response's head (interim 1xx responses are skipped), as soon as it is complete.
  case head(HTTPResponseHead)
  /// Body bytes, de-chunked, as they arrived; never empty. How the bytes are cut depends on how they came.
  case body(ByteBuffer)
  /// The body is complete (its last chunk, its Content-Length, or the end of the connection for a body
  /// delimited by it).
  case end
}

func percentDecode(_ s: Substring) -> String {
  guard s.utf8.contains(where: { $0 == UInt8(ascii: "%") || $0 == UInt8(ascii: "+") }) else {
    return String(s)
  }
  var out: [UInt8] = []
  out.reserveCapacity(s.utf8.count)
  var it = Array(s.utf8)[...]
  while let c = it.popFirst() {
    if c == UInt8(ascii: "+") {
      out.append(32)
    } else if c == UInt8(ascii: "%"), it.count >= 2, let h = hexValue(it[it.startIndex]),
      let l = hexValue(it[it.startIndex + 1])
    {
      out.append(h << 4 | l)
      it = it.dropFirst(2)
    } else {
      out.append(c)
    }
  }
  return String(decoding: out, as: UTF8.self)
}

func hexValue(_ c: UInt8) -> UInt8? {
  switch c {
  case 48...57: c - 48
  case 65...70: c - 55
  case 97...102: c - 87
  default: nil
  }
}
