import ByteBuffers
import EventLoopTestKit
import Testing

@testable import Web

@Suite struct HTTPFuzzTests {
  typealias H = HTTPCodecHarness

  static let corpus: [[UInt8]] = [
    HTTPRequestDecoderTests.get,
    HTTPRequestDecoderTests.post,
    HTTPRequestDecoderTests.chunked,
    HTTPRequestDecoderTests.pipeline,
    HTTPRequestDecoderTests.webSocketHead + "\u{81}\u{0}",
    "GET /a?b=c HTTP/1.0\r\nConnection: keep-alive\r\n\r\nHEAD / HTTP/1.1\r\nConnection: close\r\n\r\n",
    "OPTIONS * HTTP/1.1\r\nHost: h\r\nContent-Length: 0\r\n\r\n",
  ].map { H.bytes($0) }

  static let fragments: [[UInt8]] = [
    "\r\n", "\r", "\n", ":", " ", "\t", "\0", "0", "chunked", "Content-Length: 3\r\n",
    "Transfer-Encoding: chunked\r\n",
    "Connection: upgrade\r\nUpgrade: x\r\n", "HTTP/1.1", "HTTP/2.0", "ffffffffffffffff", "\r\n\r\n", ";",
    "\u{FF}",
  ].map { H.bytes($0) }

  /// Cuts `input` into 1 to 5 pieces at random offsets.
  static func randomSplit(_ input: [UInt8], _ rng: inout SplitMix64) -> [[UInt8]] {
    guard input.count > 1 else { return [input] }
    let cuts = (0..<Int.random(in: 0...4, using: &rng)).map { _ in
      Int.random(in: 0...input.count, using: &rng)
    }
    var pieces: [[UInt8]] = []
    var start = 0
    for cut in cuts.sorted() {
      pieces.append(Array(input[start..<cut]))
      start = cut
    }
    pieces.append(Array(input[start...]))
    return pieces
  }

  static func mutate(_ input: [UInt8], _ rng: inout SplitMix64) -> [UInt8] {
    var bytes = input
    for _ in 0..<Int.random(in: 1...3, using: &rng) {
      let at = Int.random(in: 0...bytes.count, using: &rng)
      switch Int.random(in: 0..<6, using: &rng) {
      case 0 where at < bytes.count: bytes[at] = UInt8.random(in: 0...255, using: &rng)
      case 1: bytes.insert(UInt8.random(in: 0...255, using: &rng), at: at)
      case 2: bytes.removeSubrange(at..<min(bytes.count, at + Int.random(in: 1...8, using: &rng)))
      case 3: bytes.insert(contentsOf: fragments.randomElement(using: &rng)!, at: at)
      case 4: bytes.removeSubrange(at...)
      default:
        let end = min(bytes.count, at + Int.random(in: 1...16, using: &rng))
        bytes.insert(contentsOf: bytes[at..<end], at: at)
      }
    }
    return bytes
  }

  static func checkError(_ error: HTTPParseError?) -> Bool {
    guard let error else { return true }
    let expected: Int
    switch error.kind {
    case .malformed: expected = 400
    case .headersTooLarge: expected = 431
    case .bodyTooLarge: expected = 413
    case .unsupportedVersion: expected = 505
    }
    return error.status.code == expected && !error.detail.isEmpty
  }

  /// Random bytes and mutated valid requests, in random splits: never a crash, every error has the status of
  /// its kind, and the verdict does not depend on how the bytes were split.
  @Test func randomAndMutatedRequestsFailCleanlyAndIndependentlyOfSplits() {
    var rng = SplitMix64(seed: 0x5EED_0000_0000_0001)
    var failures = 0
    var parsed = 0
    for iteration in 0..<20_000 {
      let input: [UInt8]
      if iteration % 4 == 0 {
        input = (0..<Int.random(in: 0...96, using: &rng)).map { _ in UInt8.random(in: 0...255, using: &rng) }
      } else {
        input = Self.mutate(Self.corpus.randomElement(using: &rng)!, &rng)
      }
      let whole = H.runRequests([input])
      let split = H.runRequests(
        Self.randomSplit(input, &rng), maxRequests: Int.random(in: 1...3, using: &rng))
      let same =
        whole.requests == split.requests && whole.upgrade == split.upgrade && whole.leftover == split.leftover
        && whole.error?.kind == split.error?.kind
      guard same, Self.checkError(whole.error), Self.checkError(split.error) else {
        Issue.record("iteration \(iteration): input \(input) whole \(whole) split \(split)")
        failures += 1
        if failures > 5 { return }
        continue
      }
      if whole.error == nil { parsed += 1 }
    }
    // The mutations must leave a fair share valid, or the test would only ever exercise the error paths.
    #expect(parsed > 2_000)
  }

  /// Random bytes as responses, with and without EOF, in random splits.
  @Test func randomAndMutatedResponsesFailCleanly() {
    var rng = SplitMix64(seed: 0x5EED_0000_0000_0002)
    let corpus = [
      HTTPResponseDecoderTests.fixed, HTTPResponseDecoderTests.chunked, HTTPResponseDecoderTests.switching,
      "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.0 200 OK\r\n\r\nbody until eof",
    ].map { H.bytes($0) }
    var failures = 0
    for iteration in 0..<4_000 {
      let input = Self.mutate(corpus.randomElement(using: &rng)!, &rng)
      let methods = (0..<3).map { _ in Bool.random(using: &rng) ? HTTPMethod.HEAD : .GET }
      let finish = Bool.random(using: &rng)
      let whole = H.runResponses([input], answering: methods, finish: finish)
      let split = H.runResponses(Self.randomSplit(input, &rng), answering: methods, finish: finish)
      let same =
        whole.responses == split.responses && whole.upgrade == split.upgrade
        && whole.leftover == split.leftover
        && whole.error?.kind == split.error?.kind
      guard same, Self.checkError(whole.error) else {
        Issue.record("iteration \(iteration): input \(input) whole \(whole) split \(split)")
        failures += 1
        if failures > 5 { return }
        continue
      }
    }
  }

  /// Valid requests whose header values are random printable text still parse, whatever the split, and the
  /// values come back without surrounding whitespace.
  @Test func validRequestsWithRandomHeaderValuesParse() {
    var rng = SplitMix64(seed: 0x5EED_0000_0000_0003)
    let names = ["X-A", "User-Agent", "Accept", "X-Custom-Header-1", "Cookie", "If-None-Match", "x_lower"]
    var failures = 0
    for iteration in 0..<4_000 {
      var expected: [HTTPRequest] = []
      var input: [UInt8] = []
      for _ in 0..<Int.random(in: 1...3, using: &rng) {
        var headers = HTTPHeaders()
        var text = "POST /p?i=\(iteration) HTTP/1.1\r\n"
        for _ in 0..<Int.random(in: 0...6, using: &rng) {
          let name = names.randomElement(using: &rng)!
          let value = String(
            decoding: (0..<Int.random(in: 0...40, using: &rng)).map { _ in
              UInt8.random(in: 0x20...0x7E, using: &rng)
            },
            as: UTF8.self)
          text += "\(name): \(value)\r\n"
          headers.add(name: name, value: String(value.trimmingSpaces))
        }
        let body = (0..<Int.random(in: 0...20, using: &rng)).map { _ in UInt8.random(in: 0...255, using: &rng)
        }
        text += "Content-Length: \(body.count)\r\n\r\n"
        headers.add(name: "Content-Length", value: String(body.count))
        input += H.bytes(text) + body
        expected.append(
          HTTPRequest(
            head: HTTPRequestHead(method: .POST, target: "/p?i=\(iteration)", headers: headers),
            body: ByteBuffer(bytes: body)))
      }
      let run = H.runRequests(Self.randomSplit(input, &rng))
      if run.error != nil || run.requests != expected {
        Issue.record("iteration \(iteration): \(String(decoding: input, as: UTF8.self)) gave \(run)")
        failures += 1
        if failures > 5 { return }
      }
    }
  }

  @Test func decoderKeepsThrowingAfterFuzzedErrors() {
    var rng = SplitMix64(seed: 0x5EED_0000_0000_0004)
    var errors = 0
    for _ in 0..<2_000 {
      let decoder = HTTPRequestDecoder()
      let input = Self.mutate(Self.corpus.randomElement(using: &rng)!, &rng)
      var rest = input
      var firstError: HTTPParseError?
      while !rest.isEmpty, firstError == nil {
        switch H.decode(decoder, rest) {
        case .success(let output):
          if output.upgrade != nil || output.consumed == 0 {
            rest = []
          } else {
            rest.removeFirst(output.consumed)
          }
        case .failure(let error): firstError = error
        }
      }
      guard let firstError else { continue }
      errors += 1
      #expect(H.decode(decoder, Self.corpus[0]) == .failure(firstError))
    }
    #expect(errors > 200)
  }
}
