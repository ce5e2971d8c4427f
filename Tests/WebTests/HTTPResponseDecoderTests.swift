import Testing

@testable import Web

@Suite struct HTTPResponseDecoderTests {
  typealias H = HTTPCodecHarness

  static let fixed = "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 5\r\n\r\nhello"
  static let chunked =
    "HTTP/1.1 201 Created\r\nTransfer-Encoding: chunked\r\n\r\n4;x=y\r\nwiki\r\n5\r\npedia\r\n0\r\nX-T: 1\r\n\r\n"

  @Test func fixedLengthResponse() throws {
    let input = H.bytes(Self.fixed)
    let output = try H.decode(HTTPResponseDecoder(), input).get()
    #expect(output.consumed == input.count)
    #expect(output.upgrade == nil)
    let response = try #require(output.responses.first)
    #expect(output.responses.count == 1)
    #expect(response.status == .ok)
    #expect(response.head.version == .http1_1)
    #expect(response.headers == ["Content-Type": "text/plain", "Content-Length": "5"])
    #expect(response.body.readableString == "hello")
  }

  @Test func chunkedResponseIsDechunked() throws {
    let output = try H.decode(HTTPResponseDecoder(), H.bytes(Self.chunked + Self.fixed)).get()
    #expect(output.responses.map(\.status.code) == [201, 200])
    #expect(output.responses[0].body.readableString == "wikipedia")
    #expect(output.responses[0].headers["X-T"] == nil)
    #expect(output.responses[1].body.readableString == "hello")
  }

  @Test func reasonPhraseIsKeptAndAMissingOneIsStandard() throws {
    let input = H.bytes(
      "HTTP/1.1 404 Nothing Here\r\nContent-Length: 0\r\n\r\nHTTP/1.0 503\r\nContent-Length: 0\r\n\r\n")
    let output = try H.decode(HTTPResponseDecoder(), input).get()
    #expect(
      output.responses.map(\.status) == [
        HTTPStatus(code: 404, reasonPhrase: "Nothing Here"), .serviceUnavailable,
      ])
    #expect(output.responses[1].head.version == .http1_0)
  }

  @Test func headResponseHasNoBodyDespiteContentLength() throws {
    let input = H.bytes("HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n" + Self.fixed)
    let whole = H.runResponses([input], answering: [.HEAD, .GET])
    #expect(whole.error == nil)
    #expect(whole.responses.count == 2)
    #expect(whole.responses[0].body.isEmpty)
    #expect(whole.responses[0].headers["Content-Length"] == "10")
    #expect(whole.responses[1].body.readableString == "hello")
    // Without being told about HEAD, the decoder would take the next response as the 10-byte body.
    let untold = H.runResponses([input])
    #expect(untold.responses.first?.body.readableString != "")
    for offset in 0...input.count {
      #expect(
        H.runResponses(H.split(input, at: offset), answering: [.HEAD, .GET]) == whole, "split at \(offset)")
    }
  }

  @Test func headResponseWithChunkedHeaderHasNoBody() throws {
    let input = H.bytes("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + Self.fixed)
    let run = H.runResponses([input], answering: [.HEAD, .GET])
    #expect(run.responses.map(\.body.readableString) == ["", "hello"])
  }

  @Test(arguments: [204, 304])
  func bodilessStatusesHaveNoBodyEvenWithContentLength(code: Int) throws {
    let input = H.bytes("HTTP/1.1 \(code) X\r\nContent-Length: 3\r\n\r\n" + Self.fixed)
    let run = H.runResponses([input])
    #expect(run.error == nil)
    #expect(run.responses.map(\.status.code) == [code, 200])
    #expect(run.responses.map(\.body.readableString) == ["", "hello"])
  }

  @Test func eofDelimitedBodyCompletesOnFinish() throws {
    let decoder = HTTPResponseDecoder()
    let output = try H.decode(decoder, H.bytes("HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nsome ")).get()
    #expect(output.responses.isEmpty)
    _ = try H.decode(decoder, H.bytes("body")).get()
    let responses = try decoder.finish().responses
    #expect(responses.count == 1)
    #expect(responses.first?.body.readableString == "some body")
    #expect(responses.first?.head.keepAlive == false)
  }

  @Test func eofDelimitedBodyAtEverySplit() throws {
    let input = H.bytes("HTTP/1.0 200 OK\r\nX: y\r\n\r\nuntil the end")
    for offset in 0...input.count {
      let run = H.runResponses(H.split(input, at: offset), finish: true)
      #expect(run.error == nil)
      #expect(run.responses.map(\.body.readableString) == ["until the end"], "split at \(offset)")
    }
  }

  @Test func finishWithNothingUnderWayReturnsNothing() throws {
    let decoder = HTTPResponseDecoder()
    #expect(try decoder.finish().responses.isEmpty)
    _ = try H.decode(decoder, H.bytes(Self.fixed)).get()
    #expect(try decoder.finish().responses.isEmpty)
  }

  @Test(arguments: [
    "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort",
    "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nab",
    "HTTP/1.1 200 OK\r\nContent-Le",
    "HTTP/1.1 2",
  ])
  func eofCuttingAMessageShortThrows(input: String) throws {
    let run = H.runResponses([H.bytes(input)], finish: true)
    #expect(run.responses.isEmpty)
    #expect(run.error?.kind == .malformed)
    #expect(run.error?.detail.contains("stream ended at an unexpected time") == true)
  }

  @Test func continueIsSkippedAndDoesNotAnswerTheRequest() throws {
    let input = H.bytes(
      "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 102 Processing\r\n\r\n"
        + "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n" + Self.fixed)
    // The final response to the HEAD comes after the 1xx: it must still be treated as bodiless.
    let whole = H.runResponses([input], answering: [.HEAD, .GET])
    #expect(whole.error == nil)
    #expect(whole.responses.map(\.status.code) == [200, 200])
    #expect(whole.responses.map(\.body.readableString) == ["", "hello"])
    #expect(H.runResponses(H.byteByByte(input), answering: [.HEAD, .GET]) == whole)
  }

  static let switching =
    "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
    + "Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n\r\n"

  @Test func switchingProtocolsEndsDecodingWithTrailingBytesLeft() throws {
    let decoder = HTTPResponseDecoder()
    let frame: [UInt8] = [0x81, 0x05] + H.bytes("Hello")
    let output = try H.decode(decoder, H.bytes(Self.switching) + frame).get()
    #expect(output.responses.isEmpty)
    #expect(output.consumed == Self.switching.utf8.count)
    #expect(output.upgrade?.status == .switchingProtocols)
    #expect(output.upgrade?.headers["Sec-WebSocket-Accept"] == "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=")
    let after = try H.decode(decoder, frame).get()
    #expect(after.consumed == 0 && after.upgrade == nil && after.responses.isEmpty)

    let input = H.bytes(Self.fixed + Self.switching) + frame
    for offset in 0...input.count {
      let run = H.runResponses(H.split(input, at: offset))
      #expect(run.responses.count == 1, "split at \(offset)")
      #expect(run.upgrade?.status.code == 101, "split at \(offset)")
      #expect(run.leftover == frame, "split at \(offset)")
    }
  }

  @Test func switchingProtocolsWithoutUpgradeHeadersStillEndsDecoding() throws {
    let head = "HTTP/1.1 101 Switching Protocols\r\n\r\n"
    let output = try H.decode(HTTPResponseDecoder(), H.bytes(head + "\u{0}\u{1}binary")).get()
    #expect(output.upgrade?.status.code == 101)
    #expect(output.consumed == head.utf8.count)
  }

  @Test func successfulConnectResponseStartsATunnel() throws {
    let head = "HTTP/1.1 200 Connection Established\r\n\r\n"
    let decoder = HTTPResponseDecoder()
    decoder.expectResponse(to: HTTPMethod("CONNECT"))
    let output = try H.decode(decoder, H.bytes(head + "\u{16}\u{3}tls")).get()
    #expect(output.upgrade?.status.code == 200)
    #expect(output.consumed == head.utf8.count)
  }

  @Test func everySplitGivesTheSameResponses() throws {
    let input = H.bytes(Self.fixed + Self.chunked + "HTTP/1.1 204 No Content\r\n\r\n" + Self.fixed)
    let whole = H.runResponses([input])
    #expect(whole.responses.count == 4)
    #expect(H.runResponses(H.byteByByte(input)) == whole)
    for offset in 0...input.count {
      #expect(H.runResponses(H.split(input, at: offset)) == whole, "split at \(offset)")
    }
  }

  @Test func limitsApplyToResponses() throws {
    let limits = HTTPParserLimits(maxHeaderBytes: 64, maxBodyBytes: 8)
    let tooLong = H.runResponses([H.bytes("HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\n")], limits: limits)
    #expect(tooLong.error?.kind == .bodyTooLarge)
    let eofBody = H.runResponses([H.bytes("HTTP/1.1 200 OK\r\n\r\n123456789")], limits: limits)
    #expect(eofBody.error?.kind == .bodyTooLarge)
    let bigHead = H.runResponses(
      [H.bytes("HTTP/1.1 200 OK\r\nX: " + String(repeating: "v", count: 80) + "\r\n\r\n")], limits: limits)
    #expect(bigHead.error?.kind == .headersTooLarge)
  }

  @Test func http2StatusLineIsUnsupported() throws {
    let run = H.runResponses([H.bytes("HTTP/2.0 200 OK\r\nContent-Length: 0\r\n\r\n")])
    #expect(run.error?.kind == .unsupportedVersion)
    #expect(run.error?.status.code == 505)
  }

  @Test func responsesBeforeBadBytesAreDeliveredThenTheDecoderKeepsThrowing() throws {
    let decoder = HTTPResponseDecoder()
    let input = H.bytes(Self.fixed + "HTTP/1.1 abc\r\n\r\n")
    let output = try H.decode(decoder, input).get()
    #expect(output.responses.count == 1)
    #expect(output.consumed == Self.fixed.utf8.count)
    let rest = Array(input[output.consumed...])
    guard case .failure(let error) = H.decode(decoder, rest) else {
      Issue.record("a bad status line was accepted")
      return
    }
    #expect(error.kind == .malformed)
    #expect(H.decode(decoder, H.bytes(Self.fixed)) == .failure(error))
    #expect(throws: error) { try decoder.finish() }
  }
}
