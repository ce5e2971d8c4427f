import ByteBuffers
import Testing

@testable import Web

/// The response decoder's streamed mode (`expectResponse(to:streamed: true)`): the head as soon as it is
/// complete, the body as it comes, no body limit; and whole responses around a streamed one in request order.
@Suite struct HTTPResponseStreamingTests {
  typealias H = HTTPCodecHarness

  static let streamedHead =
    "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
  static let events = "retry: 1000\n\nid: 1\ndata: {}\n\n"
  /// The events in three chunks (one with an extension), then the last chunk and a trailer.
  static let streamed =
    streamedHead + "c\r\nretry: 1000\n\r\n3;x=y\r\n\nid\r\n" + "e\r\n: 1\ndata: {}\n\n\r\n"
    + "0\r\nX-T: 1\r\n\r\n"

  @Test func aStreamedResponseComesAsHeadBodyAndEndAtEverySplit() throws {
    let input = H.bytes(Self.streamed + HTTPResponseDecoderTests.fixed)
    let whole = Self.run([input], answering: [(.GET, true), (.GET, false)])
    #expect(whole.error == nil)
    #expect(whole.headStatuses == [200])
    #expect(whole.body == Self.events)
    #expect(whole.events.last == .response(200, "hello"))
    #expect(whole.shape == ["head", "body", "end", "response"])
    #expect(whole.trailerLeaked == false)
    for offset in 0...input.count {
      let split = Self.run(H.split(input, at: offset), answering: [(.GET, true), (.GET, false)])
      #expect(split.normalized == whole.normalized, "split at \(offset)")
    }
    #expect(
      Self.run(H.byteByByte(input), answering: [(.GET, true), (.GET, false)]).normalized == whole.normalized)
  }

  @Test func theHeadAndEachPieceArriveBeforeTheEnd() throws {
    let decoder = HTTPResponseDecoder()
    decoder.expectResponse(to: .GET, streamed: true)
    let first = try H.decode(decoder, H.bytes(Self.streamedHead + "5\r\nfirst\r\n")).get()
    guard case .head(let head)? = first.parts.first else {
      Issue.record("no head: \(first.parts)")
      return
    }
    #expect(head.status == .ok)
    #expect(head.headers["Content-Type"] == "text/event-stream")
    #expect(first.parts.dropFirst() == [.body(ByteBuffer(string: "first"))])
    #expect(first.responses.isEmpty)
    let second = try H.decode(decoder, H.bytes("6\r\nsecond\r\n")).get()
    #expect(second.parts == [.body(ByteBuffer(string: "second"))])
    let last = try H.decode(decoder, H.bytes("0\r\n\r\n")).get()
    #expect(last.parts == [.end])
  }

  @Test func aStreamedBodyHasNoSizeLimitButAWholeOneKeepsIt() throws {
    let limits = HTTPParserLimits(maxHeaderBytes: 1024, maxBodyBytes: 10)
    let body = String(repeating: "x", count: 5000)
    for response in [
      "HTTP/1.1 200 OK\r\nContent-Length: 5000\r\n\r\n" + body,
      "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1388\r\n" + body + "\r\n0\r\n\r\n",
    ] {
      let streamed = Self.run([H.bytes(response)], answering: [(.GET, true)], limits: limits)
      #expect(streamed.error == nil)
      #expect(streamed.body == body)
      #expect(streamed.shape.last == "end")
      let whole = Self.run([H.bytes(response)], answering: [(.GET, false)], limits: limits)
      #expect(whole.error?.kind == .bodyTooLarge)
    }
  }

  @Test func aStreamedBodyDelimitedByTheEndOfTheConnectionEndsOnFinish() throws {
    let input = H.bytes("HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nsome body")
    for offset in 0...input.count {
      let run = Self.run(H.split(input, at: offset), answering: [(.GET, true)], finish: true)
      #expect(run.error == nil)
      #expect(run.body == "some body", "split at \(offset)")
      #expect(run.shape.first == "head")
      #expect(run.shape.last == "end", "split at \(offset)")
    }
    let unfinished = Self.run([input], answering: [(.GET, true)], finish: false)
    #expect(unfinished.shape.last == "body")
  }

  @Test func anInterimResponseIsNotTheStreamedHead() throws {
    let input = H.bytes("HTTP/1.1 100 Continue\r\n\r\n" + Self.streamed)
    let run = Self.run([input], answering: [(.GET, true)])
    #expect(run.headStatuses == [200])
    #expect(run.body == Self.events)
  }

  @Test func anErrorAnswerToAStreamedRequestStreamsToo() throws {
    let json = #"{"error":503,"message":"too many event streams ([api] event_streams)"}"#
    let input = H.bytes(
      "HTTP/1.1 503 Service Unavailable\r\nContent-Length: \(json.utf8.count)\r\n\r\n" + json)
    let run = Self.run([input], answering: [(.GET, true)])
    #expect(run.headStatuses == [503])
    #expect(run.body == json)
    #expect(run.shape == ["head", "body", "end"])
  }

  @Test(arguments: ["HTTP/1.1 204 No Content\r\n\r\n", "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"])
  func aStreamedResponseWithoutABodyIsHeadThenEnd(input: String) throws {
    #expect(Self.run([H.bytes(input)], answering: [(.GET, true)]).shape == ["head", "end"])
  }

  @Test func aStreamedAnswerToHeadHasNoBody() throws {
    let input = H.bytes("HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n" + HTTPResponseDecoderTests.fixed)
    let run = Self.run([input], answering: [(.HEAD, true), (.GET, false)])
    #expect(run.shape == ["head", "end", "response"])
  }

  @Test func badChunkFramingInAStreamFailsAfterWhatCameBefore() throws {
    let input = H.bytes(Self.streamedHead + "5\r\nfirst\r\nzz\r\n")
    let run = Self.run([input], answering: [(.GET, true)])
    #expect(run.shape == ["head", "body"])
    #expect(run.body == "first")
    #expect(run.error?.kind == .malformed)
  }

  // MARK: Harness

  /// What a run produced, in order.
  enum Event: Equatable {
    case response(Int, String)
    case head(Int)
    case body(String)
    case end
  }

  struct Run: Equatable {
    var events: [Event] = []
    var error: HTTPParseError?
    var trailerLeaked = false

    var shape: [String] {
      events.map {
        switch $0 {
        case .response: "response"
        case .head: "head"
        case .body: "body"
        case .end: "end"
        }
      }
    }
    var headStatuses: [Int] { events.compactMap { if case .head(let code) = $0 { code } else { nil } } }
    var body: String { events.map { if case .body(let text) = $0 { text } else { "" } }.joined() }

    /// Consecutive body pieces merged: how the bytes were cut depends on how they came.
    var normalized: Run {
      var merged = Run(events: [], error: error, trailerLeaked: trailerLeaked)
      for event in events {
        if case .body(let text) = event, case .body(let before)? = merged.events.last {
          merged.events[merged.events.count - 1] = .body(before + text)
        } else {
          merged.events.append(event)
        }
      }
      return merged
    }
  }

  /// Feeds `chunks` as a connection does (decoding again what a call did not consume) and records everything.
  static func run(
    _ chunks: [[UInt8]], answering requests: [(HTTPMethod, Bool)], finish: Bool = false,
    limits: HTTPParserLimits = HTTPParserLimits()
  ) -> Run {
    let decoder = HTTPResponseDecoder(limits: limits)
    for (method, streamed) in requests { decoder.expectResponse(to: method, streamed: streamed) }
    var run = Run()
    func record(_ output: HTTPResponseDecoder.Output) {
      for response in output.responses {
        run.events.append(.response(response.status.code, response.body.readableString))
      }
      for part in output.parts {
        switch part {
        case .head(let head):
          run.events.append(.head(head.status.code))
          if head.headers["X-T"] != nil { run.trailerLeaked = true }
        case .body(let bytes):
          precondition(!bytes.isEmpty, "an empty body part")
          run.events.append(.body(bytes.readableString))
        case .end: run.events.append(.end)
        }
      }
    }
    var pending: [UInt8] = []
    for chunk in chunks {
      pending += chunk
      while !pending.isEmpty {
        switch H.decode(decoder, pending) {
        case .success(let output):
          record(output)
          if output.consumed == 0 && output.parts.isEmpty && output.responses.isEmpty {
            preconditionFailure("no progress")
          }
          pending.removeFirst(output.consumed)
        case .failure(let error):
          run.error = error
          return run
        }
      }
    }
    if finish {
      do throws(HTTPParseError) {
        record(try decoder.finish())
      } catch {
        run.error = error
      }
    }
    return run
  }
}
