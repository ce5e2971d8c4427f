/// Incremental HTTP/1.x response decoder (client side), wrapping http-parser. Pure: no I/O, no clock.
///
/// A final class because http_parser's state must stay at a fixed address (its `data` points back at us).
/// Owned by one connection and used on that connection's loop only.
///
/// Whether a response has a body depends on the request it answers, so the client calls
/// `expectResponse(to:)` for each request it sends, in order. Bodies are de-chunked; trailers are dropped.
///
/// A response can be whole (`Output.responses`: the body collected, within `maxBodyBytes`) or streamed
/// (`expectResponse(to:streamed: true)`; `Output.parts`: its head as soon as it is complete, then its body in the
/// pieces it came in, then `.end`; no body limit, since nothing is collected). A Server-Sent Events stream or a
/// download is read streamed.
public final class HTTPResponseDecoder {
  private let parser: HTTPMessageParser
  /// The requests still waiting for their final response, oldest first: their method, and whether the response
  /// is streamed.
  private var pending: [(method: HTTPMethod, streamed: Bool)] = []
  private var pendingStart = 0

  public init(limits: HTTPParserLimits = HTTPParserLimits()) {
    parser = HTTPMessageParser(mode: .response, limits: limits)
  }

  /// Tell the decoder, in order, what each next response answers: a response to HEAD has no body, whatever
  /// its Content-Length or Transfer-Encoding say. Without a call, a response is taken to answer a GET.
  public func expectResponse(to method: HTTPMethod) {
    pending.append((method, false))
  }

  /// As `expectResponse(to:)`; with `streamed`, that response comes out in `Output.parts` as it arrives
  /// instead of whole in `Output.responses`.
  public func expectResponse(to method: HTTPMethod, streamed: Bool) {
    pending.append((method, streamed))
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
    /// What arrived of a streamed response, in order. Every response in `responses` came before these parts
    /// (`decode` returns right after a streamed response's `.end`).
    public var parts: [HTTPResponsePart] = []

    public init(
      responses: [HTTPResponse], consumed: Int, upgrade: HTTPResponse?, parts: [HTTPResponsePart] = []
    ) {
      self.responses = responses
      self.consumed = consumed
      self.upgrade = upgrade
      self.parts = parts
    }
  }

  /// Parses `bytes`. `consumed` is `bytes.count` unless
  /// - a `101 Switching Protocols` ended decoding: `upgrade` holds it, the remaining bytes belong to the new
  ///   protocol, and the decoder is finished;
  /// - a streamed response ended (`.end` is the last of `parts`): the caller decodes the rest in another call,
  ///   so that whole responses after it are not reported before it;
  /// - the bytes go bad after some responses completed (or some parts came): this call returns those,
  ///   `consumed` points after them, and the next call throws.
  ///
  /// 1xx responses other than 101 (e.g. 100 Continue) are skipped, not returned. After it throws, the decoder
  /// is finished and keeps throwing the same error.
  public func decode(_ bytes: UnsafeRawBufferPointer) throws(HTTPParseError) -> Output {
    if let failure = parser.failure { throw failure }
    var output = Output(responses: [], consumed: 0, upgrade: nil)
    if parser.isUpgraded { return output }
    while output.consumed < bytes.count {
      let streamed = prepareStep()
      let step = parser.step(UnsafeRawBufferPointer(rebasing: bytes[output.consumed...]))
      if streamed { takeStreamedParts(into: &output.parts) }
      switch step {
      case .needMore:
        output.consumed = bytes.count
      case .message(let message, let consumed, let upgrade):
        output.consumed += consumed
        if complete(message, upgrade: upgrade, streamed: streamed, into: &output) { return output }
      case .failed(let error):
        if output.responses.isEmpty && output.parts.isEmpty { throw error }
        return output
      }
    }
    return output
  }

  /// The peer closed: completes a response whose body is delimited by EOF (no Content-Length, not chunked),
  /// whole in `responses` or, streamed, as its `.end` in `parts`; throws if EOF cuts a message short. Returns
  /// nothing when no response was under way.
  public func finish() throws(HTTPParseError) -> Output {
    if let failure = parser.failure { throw failure }
    var output = Output(responses: [], consumed: 0, upgrade: nil)
    let streamed = prepareStep()
    let step = parser.finish()
    if streamed { takeStreamedParts(into: &output.parts) }
    switch step {
    case .needMore:
      break
    case .message(let message, _, let upgrade):
      _ = complete(message, upgrade: upgrade, streamed: streamed, into: &output)
    case .failed(let error):
      throw error
    }
    return output
  }

  /// Tells the parser what the next response answers; returns whether it is streamed.
  private func prepareStep() -> Bool {
    let next = pendingStart < pending.count ? pending[pendingStart] : nil
    parser.answering = next?.method
    parser.streamsBody = next?.streamed ?? false
    return parser.streamsBody
  }

  /// A streamed response's head, if it completed in the last step, and the body bytes that step parsed.
  private func takeStreamedParts(into parts: inout [HTTPResponsePart]) {
    if let head = parser.takeStreamedHead() { parts.append(.head(makeResponse(head).head)) }
    let body = parser.takeStreamedBody()
    if !body.isEmpty { parts.append(.body(body)) }
  }

  /// Reports a completed message; returns whether decoding stops after it (an upgrade, or the end of a
  /// streamed response).
  private func complete(
    _ message: HTTPMessageParser.Message, upgrade: Bool, streamed: Bool, into output: inout Output
  ) -> Bool {
    let response = makeResponse(message)
    if upgrade {
      answered()
      output.upgrade = response
      return true
    }
    // An interim response: the final one to the same request is still to come.
    if (100..<200).contains(message.statusCode) { return false }
    answered()
    guard streamed else {
      output.responses.append(response)
      return false
    }
    // The body pieces of the step that completed the message are in the message, not yet taken.
    if !message.body.isEmpty { output.parts.append(.body(message.body)) }
    output.parts.append(.end)
    return true
  }

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
