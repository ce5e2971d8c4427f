import Testing

@testable import Web

@Suite struct HTTPRequestDecoderTests {
  typealias H = HTTPCodecHarness

  static let get = "GET /index.html HTTP/1.1\r\nHost: example.com\r\nAccept: */*\r\n\r\n"
  static let post = "POST /v1/pages HTTP/1.1\r\nHost: a\r\nContent-Length: 11\r\n\r\nhello world"
  static let chunked =
    "PUT /blob HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n"
    + "5;ext=1;name=\"q v\"\r\nhello\r\n6\r\n world\r\nA\r\n0123456789\r\n0\r\nX-Checksum: abc\r\nX-More: 1\r\n\r\n"
  static let pipeline = get + post + chunked + "DELETE /x?y=1 HTTP/1.1\r\n\r\n"

  // MARK: - Well-formed requests

  @Test func simpleGet() throws {
    let input = H.bytes(Self.get)
    let output = try H.decode(HTTPRequestDecoder(), input).get()
    #expect(output.consumed == input.count)
    #expect(output.upgrade == nil)
    let request = try #require(output.requests.first)
    #expect(output.requests.count == 1)
    #expect(request.method == .GET)
    #expect(request.head.target == "/index.html")
    #expect(request.head.version == .http1_1)
    #expect(request.headers == ["Host": "example.com", "Accept": "*/*"])
    #expect(request.body.isEmpty)
  }

  @Test func postKeepsContentLengthBody() throws {
    let input = H.bytes(Self.post)
    let output = try H.decode(HTTPRequestDecoder(), input).get()
    #expect(output.consumed == input.count)
    let request = try #require(output.requests.first)
    #expect(request.method == .POST)
    #expect(request.body.readableString == "hello world")
    #expect(request.headers["content-length"] == "11")
  }

  @Test func chunkedBodyIsDechunkedAndExtensionsAndTrailersAreDropped() throws {
    let input = H.bytes(Self.chunked + Self.get)
    let output = try H.decode(HTTPRequestDecoder(), input).get()
    #expect(output.consumed == input.count)
    #expect(output.requests.count == 2)
    let request = output.requests[0]
    #expect(request.method == .PUT)
    #expect(request.body.readableString == "hello world0123456789")
    #expect(request.headers == ["Host": "a", "Transfer-Encoding": "chunked"])
    #expect(request.headers["X-Checksum"] == nil)
    // The request after the trailers starts exactly where they end.
    #expect(output.requests[1].head.target == "/index.html")
  }

  @Test func headerValuesLoseSurroundingWhitespaceButKeepInnerSpaces() throws {
    let input = H.bytes("GET / HTTP/1.1\r\nX-A:   spaced  out \t \r\nX-Empty:\r\nX-B:\tb\r\n\r\n")
    let request = try #require(try H.decode(HTTPRequestDecoder(), input).get().requests.first)
    #expect(request.headers == ["X-A": "spaced  out", "X-Empty": "", "X-B": "b"])
  }

  @Test func pipelinedRequestsInOneBufferComeOutInOrder() throws {
    let input = H.bytes(Self.pipeline)
    let output = try H.decode(HTTPRequestDecoder(), input).get()
    #expect(output.consumed == input.count)
    #expect(output.requests.map(\.method) == [.GET, .POST, .PUT, .DELETE])
    #expect(output.requests.map(\.body.readableString) == ["", "hello world", "hello world0123456789", ""])
  }

  @Test func maxRequestsOneReturnsOneAtATimeWithExactConsumed() throws {
    let parts = [Self.get, Self.post, Self.chunked, "DELETE /x?y=1 HTTP/1.1\r\n\r\n"]
    let decoder = HTTPRequestDecoder()
    var rest = H.bytes(Self.pipeline)
    var methods: [HTTPMethod] = []
    for part in parts {
      let output = try H.decode(decoder, rest, maxRequests: 1).get()
      #expect(output.requests.count == 1)
      #expect(output.consumed == part.utf8.count)
      methods += output.requests.map(\.method)
      rest.removeFirst(output.consumed)
    }
    #expect(methods == [.GET, .POST, .PUT, .DELETE])
    #expect(rest.isEmpty)
    #expect(!decoder.isMidRequest)
  }

  @Test func maxRequestsZeroConsumesNothing() throws {
    let output = try H.decode(HTTPRequestDecoder(), H.bytes(Self.get), maxRequests: 0).get()
    #expect(output.requests.isEmpty)
    #expect(output.consumed == 0)
  }

  @Test func maxRequestsLeavesAPartialNextRequestUnfed() throws {
    // The second request is incomplete; it stays with the caller and is fed again later.
    let decoder = HTTPRequestDecoder()
    let input = H.bytes(Self.get + "POST /v1/pages HTTP/1.1\r\nContent-Le")
    let first = try H.decode(decoder, input, maxRequests: 1).get()
    #expect(first.consumed == Self.get.utf8.count)
    #expect(!decoder.isMidRequest)
    let rest = Array(input[first.consumed...]) + H.bytes("ngth: 2\r\n\r\nok")
    let second = try H.decode(decoder, rest, maxRequests: 1).get()
    #expect(second.consumed == rest.count)
    #expect(second.requests.first?.body.readableString == "ok")
  }

  @Test func byteByByteAndEverySplitGiveTheSameRequests() throws {
    let input = H.bytes(Self.pipeline)
    let whole = H.runRequests([input])
    #expect(whole.requests.count == 4)
    #expect(whole.error == nil)

    let bytewise = H.runRequests(H.byteByByte(input))
    #expect(bytewise.requests == whole.requests)
    #expect(bytewise.error == nil)

    for offset in 0...input.count {
      let split = H.runRequests(H.split(input, at: offset))
      #expect(split.requests == whole.requests, "split at \(offset)")
      #expect(split.error == nil, "split at \(offset)")
      // With backpressure too: one request per call, the rest kept and fed again.
      let oneByOne = H.runRequests(H.split(input, at: offset), maxRequests: 1)
      #expect(oneByOne.requests == whole.requests, "split at \(offset), maxRequests 1")
    }
  }

  @Test func headersSplitAcrossCallsAreJoined() throws {
    let decoder = HTTPRequestDecoder()
    let pieces = ["GET /a HTTP/1.1\r\nX-Lo", "ng-Na", "me: par", "t one\r\nHost", ": h\r\n", "\r\n"]
    var requests: [HTTPRequest] = []
    for (index, piece) in pieces.enumerated() {
      let output = try H.decode(decoder, H.bytes(piece)).get()
      #expect(output.consumed == piece.utf8.count)
      requests += output.requests
      if index < pieces.count - 1 {
        #expect(decoder.isMidRequest)
        #expect(!decoder.hasPendingHead)
      }
    }
    #expect(requests.count == 1)
    #expect(requests.first?.headers == ["X-Long-Name": "part one", "Host": "h"])
    #expect(!decoder.isMidRequest)
  }

  @Test func midRequestAndPendingHeadTrackTheRequest() throws {
    let decoder = HTTPRequestDecoder()
    #expect(!decoder.isMidRequest)
    _ = try H.decode(decoder, H.bytes("\r\n")).get()  // stray CRLF between requests is not a request
    #expect(!decoder.isMidRequest)
    _ = try H.decode(decoder, H.bytes("P")).get()
    #expect(decoder.isMidRequest)
    #expect(!decoder.hasPendingHead)
    _ = try H.decode(decoder, H.bytes("OST / HTTP/1.1\r\nContent-Length: 4\r\n\r\nab")).get()
    #expect(decoder.isMidRequest)
    #expect(decoder.hasPendingHead)
    let output = try H.decode(decoder, H.bytes("cd")).get()
    #expect(output.requests.first?.body.readableString == "abcd")
    #expect(!decoder.isMidRequest)
    #expect(!decoder.hasPendingHead)
  }

  @Test func targetGivesPathAndQuery() throws {
    let input = H.bytes("GET /v1/sync?page=2&q=a%20b+c HTTP/1.1\r\n\r\n")
    let request = try #require(try H.decode(HTTPRequestDecoder(), input).get().requests.first)
    #expect(request.head.target == "/v1/sync?page=2&q=a%20b+c")
    #expect(request.path == "/v1/sync")
    #expect(request.head.query == "page=2&q=a%20b+c")
    #expect(request.head.queryValue("page") == "2")
    #expect(request.head.queryValue("q") == "a b c")
  }

  @Test(arguments: [
    ("GET / HTTP/1.1\r\n\r\n", HTTPVersion.http1_1, true),
    ("GET / HTTP/1.1\r\nConnection: close\r\n\r\n", .http1_1, false),
    ("GET / HTTP/1.0\r\n\r\n", .http1_0, false),
    ("GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n", .http1_0, true),
    ("GET / HTTP/1.0\r\nConnection: Keep-Alive, foo\r\n\r\n", .http1_0, true),
  ])
  func keepAliveFollowsVersionAndConnection(input: String, version: HTTPVersion, keepAlive: Bool) throws {
    let request = try #require(try H.decode(HTTPRequestDecoder(), H.bytes(input)).get().requests.first)
    #expect(request.head.version == version)
    #expect(request.head.keepAlive == keepAlive)
  }

  // MARK: - Upgrades

  static let webSocketHead =
    "GET /ws HTTP/1.1\r\nHost: a\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
    + "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
  static let frame: [UInt8] = [0x81, 0x85, 0x37, 0xFA, 0x21, 0x3D, 0x7F, 0x9F, 0x4D, 0x51, 0x58]

  @Test func upgradeRequestStopsRightAfterItsHead() throws {
    let decoder = HTTPRequestDecoder()
    let input = H.bytes(Self.webSocketHead) + Self.frame
    let output = try H.decode(decoder, input).get()
    #expect(output.requests.isEmpty)
    #expect(output.consumed == Self.webSocketHead.utf8.count)
    let upgrade = try #require(output.upgrade)
    #expect(upgrade.head.target == "/ws")
    #expect(upgrade.headers["Sec-WebSocket-Key"] == "dGhlIHNhbXBsZSBub25jZQ==")
    // Finished: the frame bytes are never parsed as HTTP.
    let after = try H.decode(decoder, Self.frame).get()
    #expect(after.consumed == 0 && after.requests.isEmpty && after.upgrade == nil)
  }

  @Test func upgradeAfterPipelinedRequestAtEverySplit() throws {
    let input = H.bytes(Self.get + Self.webSocketHead) + Self.frame
    for offset in 0...input.count {
      let run = H.runRequests(H.split(input, at: offset))
      #expect(run.requests.map(\.head.target) == ["/index.html"], "split at \(offset)")
      #expect(run.upgrade?.head.target == "/ws", "split at \(offset)")
      #expect(run.leftover == Self.frame, "split at \(offset)")
    }
  }

  @Test func connectIsAnUpgrade() throws {
    let head = "CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n"
    let output = try H.decode(HTTPRequestDecoder(), H.bytes(head + "\u{16}\u{03}")).get()
    #expect(output.upgrade?.method == HTTPMethod("CONNECT"))
    #expect(output.upgrade?.head.target == "example.com:443")
    #expect(output.consumed == head.utf8.count)
  }

  @Test func upgradeHeaderWithoutConnectionUpgradeIsAPlainRequest() throws {
    let input = H.bytes("GET / HTTP/1.1\r\nUpgrade: websocket\r\n\r\n" + Self.get)
    let output = try H.decode(HTTPRequestDecoder(), input).get()
    #expect(output.upgrade == nil)
    #expect(output.requests.count == 2)
  }

  // MARK: - Limits

  @Test func headerBytesOverTheLimitFailWith431() throws {
    let limits = HTTPParserLimits(maxHeaderBytes: 1024)
    let big = "GET / HTTP/1.1\r\nX-Big: " + String(repeating: "a", count: 2000) + "\r\n\r\n"
    let run = H.runRequests([H.bytes(big)], limits: limits)
    #expect(run.error?.kind == .headersTooLarge)
    #expect(run.error?.status.code == 431)

    // Many small headers add up the same way.
    let many = "GET / HTTP/1.1\r\n" + String(repeating: "X-Small: 0123456789\r\n", count: 100) + "\r\n"
    #expect(H.runRequests([H.bytes(many)], limits: limits).error?.kind == .headersTooLarge)
    // Empty fields are not free: each line counts its ": " and CRLF.
    let empty = "GET / HTTP/1.1\r\n" + String(repeating: "a:\r\n", count: 300) + "\r\n"
    #expect(H.runRequests([H.bytes(empty)], limits: limits).error?.kind == .headersTooLarge)
    // At the limit is fine: "/" + "X-Big" + 4 + value = 1024.
    let fits = "GET / HTTP/1.1\r\nX-Big: " + String(repeating: "a", count: 1014) + "\r\n\r\n"
    #expect(H.runRequests([H.bytes(fits)], limits: limits).requests.count == 1)
    let oneMore = "GET / HTTP/1.1\r\nX-Big: " + String(repeating: "a", count: 1015) + "\r\n\r\n"
    #expect(H.runRequests([H.bytes(oneMore)], limits: limits).error?.kind == .headersTooLarge)
  }

  @Test func headerBytesFailAsSoonAsTheLimitIsPassedWhenTrickled() throws {
    let limits = HTTPParserLimits(maxHeaderBytes: 1024)
    let prefix = "GET / HTTP/1.1\r\nX-Big: "
    let input = H.bytes(prefix + String(repeating: "a", count: 5000) + "\r\n\r\n")
    let decoder = HTTPRequestDecoder(limits: limits)
    var failedAt: Int?
    for (index, byte) in input.enumerated() {
      if case .failure(let error) = H.decode(decoder, [byte]) {
        #expect(error.kind == .headersTooLarge)
        failedAt = index
        break
      }
    }
    let index = try #require(failedAt)
    // Counted bytes ("/", "X-Big" and 4, the value) pass 1024 at value byte 1015: fail there, not at the end.
    #expect(index == prefix.utf8.count + 1014)
    #expect(index > 1000)
  }

  @Test func httpParsersOwnHeaderOverflowIsAlso431() throws {
    // Our limit raised past http-parser's 80 KiB ceiling: its HPE_HEADER_OVERFLOW must map to 431 too.
    let limits = HTTPParserLimits(maxHeaderBytes: 1 << 20)
    let input = "GET / HTTP/1.1\r\nX-Big: " + String(repeating: "a", count: 100 * 1024) + "\r\n\r\n"
    let run = H.runRequests([H.bytes(input)], limits: limits)
    #expect(run.error?.kind == .headersTooLarge)
    #expect(run.error?.status.code == 431)
  }

  @Test func contentLengthOverTheLimitFailsWith413BeforeAnyBody() throws {
    let limits = HTTPParserLimits(maxBodyBytes: 100)
    let head = H.bytes("POST / HTTP/1.1\r\nContent-Length: 101\r\n\r\n")
    // Only the head is sent: the error must not wait for the body.
    let run = H.runRequests([head], limits: limits)
    #expect(run.error?.kind == .bodyTooLarge)
    #expect(run.error?.status.code == 413)
    // At the limit exactly is fine.
    let exact = H.bytes("POST / HTTP/1.1\r\nContent-Length: 100\r\n\r\n" + String(repeating: "b", count: 100))
    #expect(H.runRequests([exact], limits: limits).requests.first?.body.readableBytes == 100)
  }

  @Test func chunkedBodyOverTheLimitFailsWith413() throws {
    let limits = HTTPParserLimits(maxBodyBytes: 100)
    let head = "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"
    let chunk = "3c\r\n" + String(repeating: "c", count: 60) + "\r\n"
    // Two 60-byte chunks: the second one passes 100.
    let run = H.runRequests(H.byteByByte(H.bytes(head + chunk + chunk + "0\r\n\r\n")), limits: limits)
    #expect(run.error?.kind == .bodyTooLarge)
    #expect(run.error?.status.code == 413)
    // One chunk announcing more than the limit fails on its size line, before its data.
    let announced = H.runRequests([H.bytes(head + "c8\r\n")], limits: limits)
    #expect(announced.error?.kind == .bodyTooLarge)
    // Exactly the limit in chunks is fine.
    let fits = head + chunk + "28\r\n" + String(repeating: "d", count: 40) + "\r\n0\r\n\r\n"
    #expect(H.runRequests([H.bytes(fits)], limits: limits).requests.first?.body.readableBytes == 100)
  }

  @Test func trailersCountTowardsTheHeaderLimit() throws {
    let limits = HTTPParserLimits(maxHeaderBytes: 200)
    let input =
      "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nX-T: " + String(repeating: "t", count: 300)
      + "\r\n\r\n"
    #expect(H.runRequests([H.bytes(input)], limits: limits).error?.kind == .headersTooLarge)
  }

  // MARK: - Malformed input

  struct BadInput: Sendable, CustomStringConvertible {
    var name: String
    var bytes: [UInt8]
    var kind: HTTPParseError.Kind
    var status: Int
    var description: String { name }
  }

  static let badInputs: [BadInput] = [
    BadInput(name: "bad method", bytes: H.bytes("GOT / HTTP/1.1\r\n\r\n"), kind: .malformed, status: 400),
    BadInput(
      name: "lowercase method", bytes: H.bytes("get / HTTP/1.1\r\n\r\n"), kind: .malformed, status: 400),
    BadInput(
      name: "space in header name", bytes: H.bytes("GET / HTTP/1.1\r\nHo st: a\r\n\r\n"), kind: .malformed,
      status: 400),
    BadInput(
      name: "space before colon", bytes: H.bytes("GET / HTTP/1.1\r\nHost : a\r\n\r\n"), kind: .malformed,
      status: 400),
    BadInput(
      name: "header without colon", bytes: H.bytes("GET / HTTP/1.1\r\nHost\r\n\r\n"), kind: .malformed,
      status: 400),
    BadInput(
      name: "missing LF after CR in request line", bytes: H.bytes("GET / HTTP/1.1\rHost: a\r\n\r\n"),
      kind: .malformed, status: 400),
    BadInput(
      name: "missing LF after CR in header", bytes: H.bytes("GET / HTTP/1.1\r\nHost: a\rX: b\r\n\r\n"),
      kind: .malformed, status: 400),
    BadInput(
      name: "control character in header value", bytes: H.bytes("GET / HTTP/1.1\r\nX: a\u{1}b\r\n\r\n"),
      kind: .malformed, status: 400),
    BadInput(
      name: "bad chunk size",
      bytes: H.bytes("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nhello\r\n0\r\n\r\n"),
      kind: .malformed, status: 400),
    BadInput(
      name: "invalid Content-Length", bytes: H.bytes("POST / HTTP/1.1\r\nContent-Length: 1x\r\n\r\nx"),
      kind: .malformed, status: 400),
    BadInput(
      name: "negative Content-Length", bytes: H.bytes("POST / HTTP/1.1\r\nContent-Length: -1\r\n\r\n"),
      kind: .malformed, status: 400),
    BadInput(
      name: "Content-Length with Transfer-Encoding chunked",
      bytes: H.bytes("POST / HTTP/1.1\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"),
      kind: .malformed, status: 400),
    BadInput(
      name: "two different Content-Lengths",
      bytes: H.bytes("POST / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nxy"), kind: .malformed,
      status: 400),
    BadInput(
      name: "two equal Content-Lengths",
      bytes: H.bytes("POST / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\nx"), kind: .malformed,
      status: 400),
    BadInput(
      name: "Transfer-Encoding not ending in chunked",
      bytes: H.bytes("POST / HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\nxyz"), kind: .malformed, status: 400),
    BadInput(
      name: "HTTP/2.0 request line", bytes: H.bytes("GET / HTTP/2.0\r\nHost: a\r\n\r\n"),
      kind: .unsupportedVersion, status: 505),
    BadInput(
      name: "HTTP/1.2 without headers", bytes: H.bytes("GET / HTTP/1.2\r\n\r\n"), kind: .unsupportedVersion,
      status: 505),
    BadInput(
      name: "HTTP/0.9 request", bytes: H.bytes("GET /\r\n\r\n"), kind: .unsupportedVersion, status: 505),
    BadInput(
      name: "garbled version", bytes: H.bytes("GET / HTTP/x.1\r\n\r\n"), kind: .malformed, status: 400),
    BadInput(
      name: "space in target", bytes: H.bytes("GET /a b HTTP/1.1\r\n\r\n"), kind: .malformed, status: 400),
    BadInput(
      name: "junk bytes", bytes: [0x00, 0x01, 0xFF, 0x16, 0x03, 0x01, 0x02], kind: .malformed, status: 400),
    BadInput(
      name: "TLS client hello", bytes: [0x16, 0x03, 0x01, 0x00, 0xA5, 0x01, 0x00, 0x00], kind: .malformed,
      status: 400),
    BadInput(
      name: "HTTP/2 preface", bytes: H.bytes("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"), kind: .malformed,
      status: 400),
  ]

  @Test(arguments: badInputs)
  func malformedInputFailsWithItsStatus(_ bad: BadInput) throws {
    let whole = H.runRequests([bad.bytes])
    let error = try #require(whole.error)
    #expect(whole.requests.isEmpty)
    #expect(error.kind == bad.kind)
    #expect(error.status.code == bad.status)
    #expect(!error.detail.isEmpty)
    // The same verdict when the bytes trickle in.
    #expect(H.runRequests(H.byteByByte(bad.bytes)).error == error)
  }

  @Test func errorDetailNamesTheProblemAndWhere() throws {
    let run = H.runRequests([H.bytes("GET / HTTP/1.1\r\nHo st: a\r\n\r\n")])
    #expect(run.error?.detail == "invalid character in header name while parsing headers")
    let version = H.runRequests([H.bytes("GET / HTTP/2.0\r\nHost: a\r\n\r\n")])
    #expect(version.error?.detail == "HTTP/2.0 is not supported")
    // http-parser's own errors say which byte of the message it refused, whatever the split.
    let input = H.bytes(Self.get + "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n")
    let detail =
      "invalid character in chunk size header (HPE_INVALID_CHUNK_SIZE) at byte 47 of the request (0x7A)"
    #expect(H.runRequests([input]).error?.detail == detail)
    #expect(H.runRequests(H.byteByByte(input)).error?.detail == detail)
  }

  @Test func decoderKeepsThrowingAfterAnError() throws {
    let decoder = HTTPRequestDecoder()
    let first = H.decode(decoder, H.bytes("GOT / HTTP/1.1\r\n\r\n"))
    guard case .failure(let error) = first else {
      Issue.record("bad method was accepted")
      return
    }
    for _ in 0..<3 {
      #expect(H.decode(decoder, H.bytes(Self.get)) == .failure(error))
    }
  }

  @Test func requestsBeforeBadBytesAreDeliveredThenTheErrorIsThrown() throws {
    let decoder = HTTPRequestDecoder()
    let input = H.bytes(Self.get + Self.post + "GARBAGE\r\n\r\n")
    let output = try H.decode(decoder, input).get()
    #expect(output.requests.map(\.method) == [.GET, .POST])
    #expect(output.consumed == (Self.get + Self.post).utf8.count)
    let rest = Array(input[output.consumed...])
    guard case .failure(let error) = H.decode(decoder, rest) else {
      Issue.record("the bad bytes were accepted")
      return
    }
    #expect(error.kind == .malformed)
  }
}
