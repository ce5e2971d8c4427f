/// Incremental HTTP/1.x request decoder (server side), wrapping http-parser. Pure: no I/O, no clock.
///
/// A final class because http_parser's state must stay at a fixed address (its `data` points back at us).
/// Owned by one connection and used on that connection's loop only.
///
///     let output = try decoder.decode(received)          // received: the bytes not yet consumed
///     handle(output.requests)
///     keep(received[output.consumed...])                 // feed again later, after the responses
///     if let upgrade = output.upgrade { switch to the new protocol with the kept bytes }
///
/// Limits: see `HTTPParserLimits`. Bodies are de-chunked; trailer fields are checked and counted but dropped.
/// Bytes after a message that ends the connection (`Connection: close`, HTTP/1.0) are parsed like any other:
/// the server closes after answering, so it never reads them.
public final class HTTPRequestDecoder {
  private let parser: HTTPMessageParser

  public init(limits: HTTPParserLimits = HTTPParserLimits()) {
    parser = HTTPMessageParser(mode: .request, limits: limits)
  }

  /// What one `decode` call produced.
  public struct Output: Equatable, Sendable {
    /// Complete requests, in order.
    public var requests: [HTTPRequest]
    /// How many of the given bytes were used; the caller keeps the rest and feeds them again later.
    public var consumed: Int
    /// A request that switches protocol (`Upgrade` with `Connection: upgrade`, or CONNECT), which is not also
    /// in `requests`. The bytes after `consumed` belong to the new protocol.
    public var upgrade: HTTPRequest?
  }

  /// Parses `bytes`, stopping after `maxRequests` complete requests (pipelining backpressure), or when a
  /// request asks to upgrade (`Upgrade` header with `Connection: upgrade`, or CONNECT) — then `upgrade` holds
  /// it, `consumed` points just after its head (and body, if any), and the decoder is finished: the caller
  /// hands the remaining bytes to the new protocol, and later calls return nothing and consume nothing.
  ///
  /// `consumed` < bytes.count means the caller must keep the rest and feed it again later (it does NOT re-feed
  /// bytes before `consumed`: a partial request is kept inside the decoder).
  ///
  /// If the bytes go bad after some requests completed, this call returns those requests (with `consumed`
  /// just after the last) and the next call throws. After it throws, the decoder is finished and keeps
  /// throwing the same error.
  public func decode(_ bytes: UnsafeRawBufferPointer, maxRequests: Int = .max) throws(HTTPParseError)
    -> Output
  {
    if let failure = parser.failure { throw failure }
    var output = Output(requests: [], consumed: 0, upgrade: nil)
    if parser.isUpgraded { return output }
    while output.consumed < bytes.count && output.requests.count < maxRequests {
      switch parser.step(UnsafeRawBufferPointer(rebasing: bytes[output.consumed...])) {
      case .needMore:
        output.consumed = bytes.count
      case .message(let message, let consumed, let upgrade):
        output.consumed += consumed
        let request = HTTPRequest(
          head: HTTPRequestHead(
            method: message.method, target: message.target, version: message.version,
            headers: message.headers),
          body: message.body)
        if upgrade {
          output.upgrade = request
          return output
        }
        output.requests.append(request)
      case .failed(let error):
        // Hand over what completed before the bad bytes; the parser remembers the error for the next call.
        if output.requests.isEmpty { throw error }
        return output
      }
    }
    return output
  }

  /// Whether a request has started but not completed (for header-read timeouts: the server times out a
  /// half-sent request, and closes an idle connection quietly).
  public var isMidRequest: Bool { parser.phase != .idle }

  /// Requests begun so far (their first byte parsed), complete or not: a change tells that a new one started.
  public var requestsBegun: Int { parser.messagesBegun }

  /// Whether the head of the current request is complete while its body is still arriving (so a slow body is
  /// distinguishable from slow headers).
  public var hasPendingHead: Bool { parser.isInBody }

  /// Whether the current request's head is complete, its body is still to come, and it asked for
  /// `Expect: 100-continue`: the client waits for `100 Continue` before sending the body.
  public var pendingRequestExpectsContinue: Bool {
    parser.pendingHeaders?.contains(name: "Expect", token: "100-continue") ?? false
  }
}
