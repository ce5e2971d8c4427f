import ByteBuffers
import CHTTPParser

/// One http_parser and the message it is assembling: the engine under `HTTPRequestDecoder` and
/// `HTTPResponseDecoder`. Owned by one decoder and used from that decoder's thread only.
///
/// http_parser keeps none of its input: each callback gets a piece of the caller's buffer, valid only during
/// `http_parser_execute`, so every piece is copied here. The parser is paused at the end of every message, so
/// one `step` completes at most one message, and its return value says exactly where that message ended. A
/// streamed response (`streamsBody`) also hands out its head as soon as it is complete and its body as it comes.
///
///     idle ──first byte──▶ startLine ──first field──▶ headers ──headers complete──▶ body
///                              └──────headers complete (no fields)─────────────────▶ body
///     body ──trailer field──▶ trailers
///     body, trailers ──message complete (parser paused; `step` returns it)──▶ idle
///     any ──error──▶ failed (terminal)        any ──upgrade message complete──▶ upgraded (terminal)
final class HTTPMessageParser {
  enum Mode {
    case request
    case response
  }

  /// Where in a message the parser is; names the place in error details.
  enum Phase {
    case idle
    case startLine
    case headers
    case body
    case trailers
  }

  /// A complete message, before the decoder makes it a request or a response.
  struct Message {
    var version: HTTPVersion
    /// Requests only.
    var method: HTTPMethod
    /// The request target, or the response's reason phrase.
    var target: String
    /// Responses only.
    var statusCode: Int
    var headers: HTTPHeaders
    var body: ByteBuffer
  }

  /// What one `step` did.
  enum Step {
    /// Every byte was taken and no message completed.
    case needMore
    /// A message completed after `consumed` bytes. With `upgrade`, the bytes after it belong to another
    /// protocol and the parser is finished.
    case message(Message, consumed: Int, upgrade: Bool)
    /// The input is bad; the parser is finished and keeps returning this.
    case failed(HTTPParseError)
  }

  let mode: Mode
  let limits: HTTPParserLimits
  /// Responses only: the method of the request the next response answers (nil: treat as GET). A response to
  /// HEAD has no body; a 2xx response to CONNECT starts a tunnel.
  var answering: HTTPMethod?
  /// Responses only: whether the next response is streamed. Its head is kept for `takeStreamedHead()` once
  /// complete, its body pieces are left for `takeStreamedBody()` after each step, and no body limit applies
  /// (whoever takes the pieces bounds what it keeps). Set before each step, like `answering`.
  var streamsBody = false
  /// Messages begun so far (`on_message_begin`), for a deadline per message.
  private(set) var messagesBegun = 0
  private(set) var phase = Phase.idle
  private(set) var failure: HTTPParseError?
  private(set) var isUpgraded = false

  // http_parser must not move while it runs: `data` points back at us and the C code keeps `parser` across
  // callbacks. A class's stored property has no guaranteed fixed address, so it lives in its own allocation.
  private let parser: UnsafeMutablePointer<http_parser>

  // The message being assembled.
  private var target: [UInt8] = []
  private var fieldBytes: [UInt8] = []
  private var valueBytes: [UInt8] = []
  /// Whether the last header piece was part of a field name (a new name starts a new field).
  private var inField = false
  private var inValue = false
  private var headers = HTTPHeaders()
  private var body = ByteBuffer(capacity: 0)
  private var headerBytes = 0
  private var completed: Message?
  /// A streamed response's final head, complete and not yet taken (its body is empty).
  private var streamedHead: Message?
  /// Set by a callback that fails; it then returns non-zero and http_parser reports HPE_CB_*.
  private var callbackError: HTTPParseError?
  /// Bytes of the current message (and any blank lines before it) taken by earlier steps.
  private var messageOffset = 0

  init(mode: Mode, limits: HTTPParserLimits) {
    self.mode = mode
    self.limits = limits
    parser = .allocate(capacity: 1)
    http_parser_init(parser, mode == .request ? HTTP_REQUEST : HTTP_RESPONSE)
    parser.pointee.data = Unmanaged.passUnretained(self).toOpaque()
  }

  deinit {
    parser.deallocate()
  }

  /// Whether the head of the current message is complete and its body or trailers are still arriving.
  var isInBody: Bool { phase == .body || phase == .trailers }

  /// The headers of the current message once its head is complete and while its body is still arriving.
  var pendingHeaders: HTTPHeaders? { phase == .body ? headers : nil }

  /// The head of a streamed response, once, when it completed during the last step (`streamsBody`). Interim
  /// 1xx heads and a 101 are not streamed heads.
  func takeStreamedHead() -> Message? {
    defer { streamedHead = nil }
    return streamedHead
  }

  /// The body bytes of a streamed response that the last step parsed and that no completed message took: the
  /// caller takes them after every step, so at most one step's input is ever held.
  func takeStreamedBody() -> ByteBuffer {
    guard streamsBody, !body.isEmpty else { return ByteBuffer(capacity: 0) }
    defer { body = ByteBuffer(capacity: 0) }
    return body
  }

  /// Feeds `bytes` (not empty: an empty buffer means EOF to http_parser) until a message completes or the
  /// bytes run out.
  func step(_ bytes: UnsafeRawBufferPointer) -> Step {
    precondition(!bytes.isEmpty, "an empty buffer means EOF; use finish()")
    if let failure { return .failed(failure) }
    precondition(!isUpgraded, "the parser is finished after an upgrade")
    let start = bytes.baseAddress!.assumingMemoryBound(to: CChar.self)
    let count = withUnsafePointer(to: HTTPMessageParser.settings) { settings in
      http_parser_execute(parser, settings, start, bytes.count)
    }
    return outcome(parsed: count, of: bytes)
  }

  /// Tells http_parser the peer closed: completes a message delimited by EOF, fails one cut short.
  func finish() -> Step {
    if let failure { return .failed(failure) }
    if isUpgraded { return .needMore }
    let count = withUnsafePointer(to: HTTPMessageParser.settings) { settings in
      http_parser_execute(parser, settings, nil, 0)
    }
    return outcome(parsed: count, of: nil)
  }

  /// `bytes` is nil at EOF.
  private func outcome(parsed: Int, of bytes: UnsafeRawBufferPointer?) -> Step {
    let errno = parser.pointee.http_errno
    if errno == HPE_PAUSED.rawValue, let message = completed {
      completed = nil
      messageOffset = 0
      http_parser_pause(parser, 0)
      if parser.pointee.upgrade != 0 { isUpgraded = true }
      return .message(message, consumed: parsed, upgrade: isUpgraded)
    }
    if errno == HPE_OK.rawValue && parsed == (bytes?.count ?? 0) {
      messageOffset += parsed
      return .needMore
    }
    let error = callbackError ?? parserError(errno: errno, at: parsed, of: bytes)
    failure = error
    return .failed(error)
  }

  /// An error http_parser found itself. Its detail says where, counted from the start of the message, and
  /// which byte: both are the same however the input was split, unlike any phase we could infer from the
  /// callbacks so far (a header name is reported only once its colon arrives or the read ends).
  private func parserError(errno: UInt32, at offset: Int, of bytes: UnsafeRawBufferPointer?) -> HTTPParseError
  {
    let code = http_errno(rawValue: errno)
    let message = mode == .request ? "request" : "response"
    var detail =
      "\(String(cString: http_errno_description(code))) (\(String(cString: http_errno_name(code))))"
    if let bytes {
      // After a parse error http_parser returns the offset of the byte it refused.
      detail += " at byte \(messageOffset + offset) of the \(message)"
      if offset < bytes.count { detail += " (0x\(String(bytes[offset], radix: 16, uppercase: true)))" }
    } else {
      detail += " after \(messageOffset) bytes of the \(message)"
    }
    switch code {
    case HPE_HEADER_OVERFLOW: return HTTPParseError(kind: .headersTooLarge, detail: detail)
    case HPE_OK:
      // http_parser stopped early without an error: it never does so unless paused, so this is our bug.
      return HTTPParseError(kind: .malformed, detail: "parser stopped without completing the \(message)")
    default: return HTTPParseError(kind: .malformed, detail: detail)
    }
  }

  /// An error found by a callback, which knows where it is.
  private func fail(_ kind: HTTPParseError.Kind, _ problem: String) -> HTTPParseError {
    let place: String
    switch phase {
    case .idle, .startLine: place = mode == .request ? "the request line" : "the status line"
    case .headers: place = "headers"
    case .body: place = "the body"
    case .trailers: place = "trailers"
    }
    return HTTPParseError(kind: kind, detail: "\(problem) while parsing \(place)")
  }

  // MARK: - Callbacks (run inside http_parser_execute; return non-zero to stop it with an error)

  private func messageBegin() -> Int32 {
    phase = .startLine
    messagesBegun &+= 1
    target.removeAll(keepingCapacity: true)
    fieldBytes.removeAll(keepingCapacity: true)
    valueBytes.removeAll(keepingCapacity: true)
    inField = false
    inValue = false
    headers = HTTPHeaders()
    body = ByteBuffer(capacity: 0)
    streamedHead = nil
    headerBytes = 0
    return 0
  }

  /// The request target (requests) or reason phrase (responses), possibly in pieces.
  private func startLineText(_ piece: UnsafeRawBufferPointer) -> Int32 {
    guard countHeaderBytes(piece.count) else { return 1 }
    target.append(contentsOf: piece)
    return 0
  }

  private func headerField(_ piece: UnsafeRawBufferPointer) -> Int32 {
    if phase == .startLine {
      phase = .headers
    } else if phase == .body {
      phase = .trailers
    }
    if !inField {
      if inValue { flushHeader() }
      inField = true
      // Count the field's ": " and CRLF too, so a flood of empty fields cannot pass as nearly free.
      guard countHeaderBytes(4) else { return 1 }
    }
    guard countHeaderBytes(piece.count) else { return 1 }
    // The system http_parser is built non-strict, which lets a space into header names; RFC 9110 names are
    // tokens, and a name with a space is a classic request-smuggling vector, so refuse it here.
    for byte in piece where !HTTPMessageParser.isTokenByte(byte) {
      callbackError = fail(.malformed, "invalid character in header name")
      return 1
    }
    fieldBytes.append(contentsOf: piece)
    return 0
  }

  private func headerValue(_ piece: UnsafeRawBufferPointer) -> Int32 {
    guard countHeaderBytes(piece.count) else { return 1 }
    inField = false
    inValue = true
    valueBytes.append(contentsOf: piece)
    return 0
  }

  /// Returns 0 (body follows as framed), 1 (no body: a response to HEAD, 1xx, 204, 304) or 2 (no body and
  /// the connection switches protocol), as http_parser defines; -1 fails.
  private func headersComplete() -> Int32 {
    if inValue { flushHeader() }
    guard checkVersion() else { return -1 }
    phase = .body
    if mode == .response {
      let code = Int(parser.pointee.status_code)
      if code == 101 { return 2 }
      if answering?.rawValue == "CONNECT" && (200..<300).contains(code) { return 2 }
      if streamsBody && code >= 200 { streamedHead = head() }
      if answering == .HEAD || (100..<200).contains(code) || code == 204 || code == 304 { return 1 }
      // A streamed body has no size limit: its reader takes it piece by piece.
      if streamsBody { return 0 }
    }
    let length = parser.pointee.content_length
    let chunked = UInt32(parser.pointee.flags) & F_CHUNKED.rawValue != 0
    // content_length is ULLONG_MAX when the message has no Content-Length.
    if !chunked && length != UInt64.max && length > UInt64(max(limits.maxBodyBytes, 0)) {
      callbackError = HTTPParseError(
        kind: .bodyTooLarge,
        detail: "Content-Length \(length) exceeds the \(limits.maxBodyBytes)-byte body limit")
      return -1
    }
    return 0
  }

  private func bodyPiece(_ piece: UnsafeRawBufferPointer) -> Int32 {
    guard streamsBody || body.readableBytes + piece.count <= limits.maxBodyBytes else {
      callbackError = fail(.bodyTooLarge, "body exceeds the \(limits.maxBodyBytes)-byte limit")
      return 1
    }
    body.append(contentsOf: piece)
    return 0
  }

  /// A chunk's size is known (in content_length) before its data: refuse an oversized one at once.
  private func chunkHeader() -> Int32 {
    if streamsBody { return 0 }
    let size = parser.pointee.content_length
    guard size <= UInt64(max(limits.maxBodyBytes - body.readableBytes, 0)) else {
      callbackError = fail(
        .bodyTooLarge,
        "chunked body exceeds the \(limits.maxBodyBytes)-byte body limit (a chunk of \(size) bytes after "
          + "\(body.readableBytes))")
      return 1
    }
    return 0
  }

  private func messageComplete() -> Int32 {
    if inValue { flushHeader() }
    completed = head()
    completed?.body = body
    headers = HTTPHeaders()
    body = ByteBuffer(capacity: 0)
    phase = .idle
    // Stop here so `step` can say where this message ended (pipelining backpressure, upgrades).
    http_parser_pause(parser, 1)
    return 0
  }

  // MARK: - Helpers

  /// The current message's start line and headers, with an empty body.
  private func head() -> Message {
    let version = HTTPVersion(major: Int(parser.pointee.http_major), minor: Int(parser.pointee.http_minor))
    let method: HTTPMethod
    if mode == .request {
      let name = http_method_str(http_method(rawValue: UInt32(parser.pointee.method)))
      method = HTTPMethod(String(cString: name!))
    } else {
      method = .GET
    }
    return Message(
      version: version, method: method, target: String(decoding: target, as: UTF8.self),
      statusCode: Int(parser.pointee.status_code), headers: headers, body: ByteBuffer(capacity: 0))
  }

  private func countHeaderBytes(_ count: Int) -> Bool {
    headerBytes += count
    guard headerBytes > limits.maxHeaderBytes else { return true }
    callbackError = fail(.headersTooLarge, "header section exceeds \(limits.maxHeaderBytes) bytes")
    return false
  }

  /// HTTP/1.0 and 1.1 only. Checked when the head is complete rather than at the first header field: the
  /// field callback comes earlier when a name is split across reads, so an earlier check would make the
  /// verdict on a head that is both of another version and malformed depend on how the bytes arrived.
  private func checkVersion() -> Bool {
    let major = parser.pointee.http_major
    let minor = parser.pointee.http_minor
    guard major == 1 && minor <= 1 else {
      callbackError = HTTPParseError(
        kind: .unsupportedVersion, detail: "HTTP/\(major).\(minor) is not supported")
      return false
    }
    return true
  }

  /// Adds the header whose name and value are complete. Trailer fields are counted against the limit but
  /// dropped: `HTTPRequest` has no place for them, and merging them into the head would let a sender change
  /// framing headers after the framing was decided.
  private func flushHeader() {
    if phase != .trailers {
      var value = valueBytes[...]
      while let last = value.last, last == 32 || last == 9 { value.removeLast() }
      while let first = value.first, first == 32 || first == 9 { value.removeFirst() }
      headers.add(
        name: String(decoding: fieldBytes, as: UTF8.self), value: String(decoding: value, as: UTF8.self))
    }
    fieldBytes.removeAll(keepingCapacity: true)
    valueBytes.removeAll(keepingCapacity: true)
    inValue = false
  }

  /// RFC 9110 tchar: "!#$%&'*+-.^_`|~", digits, letters.
  static func isTokenByte(_ byte: UInt8) -> Bool {
    switch byte {
    case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
      UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "!"), UInt8(ascii: "#")...UInt8(ascii: "'"),
      UInt8(ascii: "*"), UInt8(ascii: "+"), UInt8(ascii: "-"), UInt8(ascii: "."),
      UInt8(ascii: "^")...UInt8(ascii: "`"), UInt8(ascii: "|"), UInt8(ascii: "~"):
      return true
    default:
      return false
    }
  }

  // MARK: - C glue

  private static func from(_ parser: UnsafeMutablePointer<http_parser>?) -> HTTPMessageParser {
    Unmanaged<HTTPMessageParser>.fromOpaque(parser!.pointee.data).takeUnretainedValue()
  }

  private static func piece(_ at: UnsafePointer<CChar>?, _ length: Int) -> UnsafeRawBufferPointer {
    UnsafeRawBufferPointer(start: at, count: length)
  }

  /// The callbacks, shared by every parser: plain C function pointers that find their parser via `data`.
  private static let settings: http_parser_settings = {
    var settings = http_parser_settings()
    http_parser_settings_init(&settings)
    settings.on_message_begin = { from($0).messageBegin() }
    settings.on_url = { from($0).startLineText(piece($1, $2)) }
    settings.on_status = { from($0).startLineText(piece($1, $2)) }
    settings.on_header_field = { from($0).headerField(piece($1, $2)) }
    settings.on_header_value = { from($0).headerValue(piece($1, $2)) }
    settings.on_headers_complete = { from($0).headersComplete() }
    settings.on_body = { from($0).bodyPiece(piece($1, $2)) }
    settings.on_message_complete = { from($0).messageComplete() }
    settings.on_chunk_header = { from($0).chunkHeader() }
    return settings
  }()
}
