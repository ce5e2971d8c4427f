/// Incremental HTTP/1.x response decoder (client side), wrapping http-parser. Pure: no I/O, no clock.
///
/// A final class because http_parser's state must stay at a fixed address (its `data` points back at us).
/// Owned by one connection and used on that connection's loop only.
///
/// Whether a response has a body depends on the request it answers, so the client calls
/// `expectResponse(to:)` for each request it sends, in order. Bodies are de-chunked; trailers are dropped.
public final class HTTPResponseDecoder {
  private let parser: HTTPMessageParser
  /// Methods of the requests still waiting for their final response, oldest first.
  private var pending: [HTTPMethod] = []
  private var pendingStart = 0

  public init(limits: HTTPParserLimits = HTTPParserLimits()) {
    parser = HTTPMessageParser(mode: .response, limits: limits)
  }

  /// Tell the decoder, in order, what each next response answers: a response to HEAD has no body, whatever
  /// its Content-Length or Transfer-Encoding say. Without a call, a response is taken to answer a GET.
  public func expectResponse(to method: HTTPMethod) {
    pending.append(method)
  }

  /// What one `decode` call produced.
  public struct Output: Equatable, Sendable {
    /// Complete final responses, in order (interim 1xx responses other than 101 are skipped).
    public var responses: [HTTPResponse]
    /// How many of the given bytes were used; the caller keeps the rest (see `decode`).
    public var consumed: Int
    /// A `101 Switching Protocols` response (or a 2xx answer to CONNECT), which is not also in `responses`.
    /// The bytes after `consumed` belong to the new protocol.
    public var upgrade: HTTPResponse?
  }

  /// Parses `bytes`. `consumed` is `bytes.count` unless a `101 Switching Protocols` ended decoding — then
  /// `upgrade` holds it, the remaining bytes belong to the new protocol, and the decoder is finished — or the
  /// bytes go bad after some responses completed: then this call returns those responses, `consumed` points
  /// after the last, and the next call throws. 1xx responses other than 101 (e.g. 100 Continue) are skipped,
  /// not returned. After it throws, the decoder is finished and keeps throwing the same error.
  public func decode(_ bytes: UnsafeRawBufferPointer) throws(HTTPParseError) -> Output {
    if let failure = parser.failure { throw failure }
    var output = Output(responses: [], consumed: 0, upgrade: nil)
    if parser.isUpgraded { return output }
    while output.consumed < bytes.count {
      parser.answering = nextMethod
      switch parser.step(UnsafeRawBufferPointer(rebasing: bytes[output.consumed...])) {
      case .needMore:
        output.consumed = bytes.count
      case .message(let message, let consumed, let upgrade):
        output.consumed += consumed
        let response = makeResponse(message)
        if upgrade {
          answered()
          output.upgrade = response
          return output
        }
        // An interim response: the final one to the same request is still to come.
        if (100..<200).contains(message.statusCode) { continue }
        answered()
        output.responses.append(response)
      case .failed(let error):
        if output.responses.isEmpty { throw error }
        return output
      }
    }
    return output
  }

  /// The peer closed: completes a response whose body is delimited by EOF (no Content-Length, not chunked);
  /// throws if EOF cuts a message short. Returns nothing when no response was under way.
  public func finish() throws(HTTPParseError) -> [HTTPResponse] {
    if let failure = parser.failure { throw failure }
    parser.answering = nextMethod
    switch parser.finish() {
    case .needMore:
      return []
    case .message(let message, _, _):
      answered()
      return [makeResponse(message)]
    case .failed(let error):
      throw error
    }
  }

  private var nextMethod: HTTPMethod? { pendingStart < pending.count ? pending[pendingStart] : nil }

  private func answered() {
    guard pendingStart < pending.count else { return }
    pendingStart += 1
    if pendingStart == pending.count || pendingStart >= 64 {
      pending.removeFirst(pendingStart)
      pendingStart = 0
    }
  }

  private func makeResponse(_ message: HTTPMessageParser.Message) -> HTTPResponse {
    let status = HTTPStatus(
      code: message.statusCode, reasonPhrase: message.target.isEmpty ? nil : message.target)
    return HTTPResponse(
      head: HTTPResponseHead(status: status, version: message.version, headers: message.headers),
      body: message.body)
  }
}
