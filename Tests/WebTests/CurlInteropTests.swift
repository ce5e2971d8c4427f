import ByteBuffers
import EventLoop
import EventLoopTestKit
import Testing
import Web

#if canImport(Glibc)
  import Glibc
#endif

/// Runs curl with `arguments` on `loop`; `check` gets the finished run. Never through a proxy, and bounded in
/// time so a server that stops answering fails the test rather than hanging it until the watchdog.
private func curl(_ loop: Loop, _ arguments: [String], _ check: @escaping (ProcessRun) -> Void) throws {
  try runProgram(loop, "curl", curlDefaults + arguments, check)
}

/// Runs one curl invocation against `test`, set up on `loop`; closes the server once curl exits and returns the
/// finished run after the loop is done and closed (so every handle is accounted for).
private func runCurl(_ loop: Loop, against test: TestServer, _ arguments: [String]) throws -> ProcessRun {
  var run: ProcessRun?
  try curl(loop, arguments) {
    run = $0
    test.server.close()
  }
  try loop.runUntilDone()
  try loop.close()
  return try #require(run)
}

private let curlDefaults = ["--silent", "--show-error", "--noproxy", "*", "--max-time", "15"]
/// Starts another transfer in the same curl run, with options of its own (`--next` resets them).
private let nextTransfer = ["--next"] + curlDefaults

/// Our HTTP server driven by curl (7.88), and our HTTP client against Python's `http.server`: HTTP/1.1 as
/// software we did not write speaks it.
@Suite struct CurlInteropTests {
  // MARK: curl against our server

  @Test func keepAliveServesSeveralURLsOnOneConnection() throws {
    let loop = try Loop()
    let test = try TestServer(loop: loop)
    let base = "http://\(test.address!)"
    // -w runs after each transfer: num_connects is 1 for the first and 0 for each one that reused it.
    let curl = try runCurl(
      loop, against: test,
      ["-w", "|%{num_connects}|%{http_code}\n", base + "/hello", base + "/stream", base + "/delay/5"])
    #expect(curl.status == 0, "\(curl.errorOutput.string)")
    #expect(curl.output.string == "hello|1|200\npart0;part1;part2;part3;part4;|0|200\ndelay 5|0|200\n")
  }

  @Test func postBodyFromAFileIsEchoedByteForByte() throws {
    let loop = try Loop()
    let test = try TestServer(loop: loop)
    let body = patternBytes(300_000)
    let file = try writeTempFile("post.bin", body)
    defer { removeTempFile(file) }
    let curl = try runCurl(
      loop, against: test,
      [
        "--data-binary", "@\(file)", "-H", "Content-Type: application/octet-stream", "-w",
        "|%header{x-length}",
        "http://\(test.address!)/echo",
      ])
    #expect(curl.status == 0, "\(curl.errorOutput.string)")
    #expect(curl.output.bytes == body + Array("|300000".utf8))
  }

  @Test func chunkedUploadIsDechunked() throws {
    let loop = try Loop()
    let test = try TestServer(loop: loop)
    let body = patternBytes(200_000, seed: 2)
    let file = try writeTempFile("chunked.bin", body)
    defer { removeTempFile(file) }
    // With this header curl sends the file as chunks of its upload buffer (several of them for 200 kB).
    let curl = try runCurl(
      loop, against: test,
      [
        "-H", "Transfer-Encoding: chunked", "--data-binary", "@\(file)", "-w", "|%header{x-length}",
        "http://\(test.address!)/echo",
      ])
    #expect(curl.status == 0, "\(curl.errorOutput.string)")
    #expect(curl.output.bytes == body + Array("|200000".utf8))
  }

  @Test func streamedResponseIsChunkedOnTheWire() throws {
    let loop = try Loop()
    let test = try TestServer(loop: loop)
    let url = "http://\(test.address!)/stream"
    // First as curl decodes it (with the head), then the raw chunk framing as it came over the wire.
    let curl = try runCurl(loop, against: test, ["-i", url] + nextTransfer + ["--raw", url])
    #expect(curl.status == 0, "\(curl.errorOutput.string)")
    let body = (0..<5).map { "part\($0);" }.joined()
    let output = curl.output.string
    let headEnd = try #require(output.firstRange(of: "\r\n\r\n"), "\(output)")
    let head = output[..<headEnd.lowerBound]
    #expect(head.hasPrefix("HTTP/1.1 200"))
    #expect(head.contains("\r\nTransfer-Encoding: chunked"))
    #expect(!head.contains("Content-Length"))
    let rest = output[headEnd.upperBound...]
    #expect(rest.hasPrefix(body), "\(rest)")
    // However we cut the body into chunks, the framing must be valid and carry exactly the body.
    #expect(dechunked(rest.dropFirst(body.count)) == body, "\(rest)")
  }

  @Test func headAnswersTheHeadOnlyAndKeepsTheConnection() throws {
    let loop = try Loop()
    let test = try TestServer(loop: loop)
    let url = "http://\(test.address!)/hello"
    // curl reports body bytes after a HEAD answer as "Excess found" (-v) and drops them, or reads them as the
    // start of the next response on the reused connection and fails.
    let curl = try runCurl(
      loop, against: test, ["-v", "-I", "-w", "|%{num_connects}|%{http_code}|%{size_download}\n", url, url])
    #expect(curl.status == 0, "\(curl.errorOutput.string)")
    let heads = curl.output.string.split(separator: "\r\n\r\n", omittingEmptySubsequences: false)
    #expect(heads.count == 3, "\(curl.output.string)")
    for head in heads.dropLast() {
      #expect(head.contains("HTTP/1.1 200"))
      #expect(head.contains("\r\nContent-Length: 5"))
    }
    #expect(heads.dropFirst().map { $0.prefix { $0 != "\n" } } == ["|1|200|0", "|0|200|0"])
    #expect(!curl.output.string.contains("hello"))
    #expect(!curl.errorOutput.string.contains("Excess found"), "\(curl.errorOutput.string)")
  }

  @Test func unknownPathIs404AndWrongMethodIs405() throws {
    let loop = try Loop()
    let test = try TestServer(loop: loop)
    let base = "http://\(test.address!)"
    let writeOut = ["-o", "/dev/null", "-w", "%{http_code} [%header{allow}]\n"]
    let curl = try runCurl(
      loop, against: test,
      writeOut + [base + "/nope"] + nextTransfer + ["-X", "DELETE"] + writeOut + [base + "/hello"])
    #expect(curl.status == 0, "\(curl.errorOutput.string)")
    #expect(curl.output.string == "404 []\n405 [GET, HEAD]\n")
  }

  @Test func oversizeBodyIs413WithContentLengthAndChunked() throws {
    let loop = try Loop()
    var configuration = HTTPServerConfiguration()
    configuration.limits.maxBodyBytes = 1000
    let test = try TestServer(loop: loop, configuration: configuration)
    let file = try writeTempFile("oversize.bin", patternBytes(200_000, seed: 3))
    defer { removeTempFile(file) }
    let url = "http://\(test.address!)/echo"
    let common = ["--data-binary", "@\(file)", "-o", "/dev/null", "-w", "%{http_code}\n"]
    // The server refuses after the head (Content-Length) or mid-body (chunked) while curl is still uploading;
    // the lingering close must let curl read the 413 rather than hit a reset.
    let curl = try runCurl(
      loop, against: test,
      common + [url] + nextTransfer + ["-H", "Transfer-Encoding: chunked"] + common + [url])
    #expect(curl.status == 0, "\(curl.errorOutput.string)")
    #expect(curl.output.string == "413\n413\n")
  }

  @Test func hugeHeaderIs431() throws {
    let loop = try Loop()
    let test = try TestServer(loop: loop)
    let curl = try runCurl(
      loop, against: test,
      [
        "-H", "X-Big: \(String(repeating: "a", count: 20_000))", "-w", "|%{http_code}",
        "http://\(test.address!)/hello",
      ])
    #expect(curl.status == 0, "\(curl.errorOutput.string)")
    #expect(curl.output.string.hasPrefix("{\"error\":431,"))
    #expect(curl.output.string.hasSuffix("|431"))
  }

  @Test func http10ClientGetsCloseDelimitedAnswers() throws {
    let loop = try Loop()
    let test = try TestServer(loop: loop)
    test.router.add(.GET, "/version") { request, responder in
      responder.respond(.text(.ok, "\(request.head.version)"))
    }
    let base = "http://\(test.address!)"
    // HTTP/1.0 without keep-alive: every request gets its own connection, and the streamed body cannot be
    // chunked, so it ends when the server closes.
    let curl = try runCurl(
      loop, against: test, ["-0", "-i", "-w", "|%{num_connects}\n", base + "/version", base + "/stream"])
    #expect(curl.status == 0, "\(curl.errorOutput.string)")
    let answers = curl.output.string.split(separator: "|1\n", omittingEmptySubsequences: false)
    #expect(answers.count == 3, "\(curl.output.string)")
    #expect(answers.last == "")
    for answer in answers.dropLast() { #expect(answer.contains("\r\nConnection: close\r\n")) }
    #expect(answers[0].hasSuffix("\r\n\r\nHTTP/1.0"))
    #expect(answers.count == 3 && !answers[1].contains("Transfer-Encoding"))
    #expect(answers.count == 3 && answers[1].hasSuffix("\r\n\r\npart0;part1;part2;part3;part4;"))
  }

  @Test func servesCurlOverAUnixSocket() throws {
    let loop = try Loop()
    let path = temporarySocketPath("curl")
    let test = try TestServer(loop: loop, listen: .unix(path: path))
    let curl = try runCurl(
      loop, against: test,
      [
        "--unix-socket", path, "-w", "|%{num_connects}\n", "http://localhost/hello",
        "http://localhost/stream",
      ])
    #expect(curl.status == 0, "\(curl.errorOutput.string)")
    #expect(curl.output.string == "hello|1\npart0;part1;part2;part3;part4;|0\n")
  }

  @Test func answersManyParallelConnections() throws {
    let loop = try Loop()
    let test = try TestServer(loop: loop)
    let count = 20
    // Every request is held until all `count` have arrived, which takes `count` connections served at once
    // (curl does not pipeline); `peak` confirms they were all open together.
    var held: [(Int, HTTPResponder)] = []
    var peak = 0
    test.router.add(.GET, "/gather/*") { [unowned server = test.server] request, responder in
      held.append((Int(request.path.split(separator: "/").last ?? "") ?? -1, responder))
      peak = max(peak, server.connectionCount)
      guard held.count == count else { return }
      for (index, waiting) in held {
        waiting.respond(HTTPResponse(status: .ok, headers: ["X-Index": "\(index)"]))
      }
      held = []
    }
    let base = "http://\(test.address!)/gather/"
    var run: ProcessRun?
    try curl(
      loop,
      [
        "--parallel", "--parallel-immediate", "--parallel-max", "\(count)", "-w",
        "%{http_code} %{url} %header{x-index} %{num_connects}\n",
      ] + (0..<count).map { base + "\($0)" }
    ) {
      run = $0
      // If some requests never arrived, answer the held ones so their connections can close.
      for (_, waiting) in held { waiting.respond(.text(.serviceUnavailable, "not all requests arrived")) }
      held = []
      test.server.close()
    }
    try loop.runUntilDone()
    try loop.close()
    let curl = try #require(run)
    #expect(curl.status == 0, "\(curl.errorOutput.string)")
    #expect(peak == count)
    // Transfers finish in any order; each line must pair a URL with its own answer, on a connection of its own.
    let lines = curl.output.string.split(separator: "\n").map { $0.split(separator: " ").map(String.init) }
    let byIndex = lines.sorted { (Int($0.last(2)) ?? -1) < (Int($1.last(2)) ?? -1) }
    #expect(byIndex == (0..<count).map { ["200", base + "\($0)", "\($0)", "1"] })
  }

  // MARK: our client against Python's http.server

  @Test func clientTalksToPythonHTTPServer() throws {
    let loop = try Loop()
    let python = try BackgroundProcess(loop: loop, "python3", pythonServer("http_server.py"))
    var responses: [String: HTTPResponse] = [:]
    var errors: [String] = []
    var closedAfterEOFAnswer = false
    var exit: (status: Int64, signal: Int32)?
    let upload = ByteBuffer(bytes: patternBytes(100_000, seed: 4))

    func stopPython() { python.stop { exit = ($0, $1) } }
    func record(_ name: String, _ result: Result<HTTPResponse, HTTPClientError>) {
      switch result {
      case .success(let response): responses[name] = response
      case .failure(let error): errors.append("\(name): \(error)")
      }
    }
    python.whenAnnounced { line in
      guard let port = BackgroundProcess.port(fromAnnouncement: line) else {
        Issue.record("unexpected first line: \(line)")
        return stopPython()
      }
      HTTPClientConnection.connect(loop: loop, to: .inet(host: "127.0.0.1", port: port)) { result in
        guard case .success(let connection) = result else {
          Issue.record("connect: \(result)")
          return stopPython()
        }
        // An HTTP/1.0 answer without keep-alive ends the connection, right after that answer is delivered.
        connection.onClose = { closedAfterEOFAnswer = responses["eof"] != nil }
        // Three pipelined requests, then two more once they are answered; all on this one connection.
        connection.send(.GET, "/hello") { record("hello", $0) }
        connection.send(.HEAD, "/hello") { record("head", $0) }
        connection.send(.POST, "/echo", body: upload) { result in
          record("echo", result)
          connection.send(.GET, "/chunked") { record("chunked", $0) }
          connection.send(.GET, "/eof") { result in
            record("eof", result)
            stopPython()
          }
        }
      }
    }
    python.onUnexpectedExit = {}
    try loop.runUntilDone()
    try loop.close()

    #expect(errors.isEmpty, "\(errors)")
    #expect(exit?.signal == SIGTERM, "the server should have run until killed; stderr: \(python.errorText)")
    let hello = try #require(responses["hello"])
    #expect(hello.status.code == 200)
    #expect(hello.body.readableString == "hello from python")
    let head = try #require(responses["head"])
    #expect(head.headers["Content-Length"] == "17")
    #expect(head.body.readableBytes == 0)
    #expect(responses["echo"]?.body == upload)
    let chunked = try #require(responses["chunked"])
    #expect(chunked.headers["Transfer-Encoding"] == "chunked")
    #expect(
      chunked.body.readableBytesArray == Array("one,two,".utf8) + pythonPattern(70_000) + Array(",three".utf8)
    )
    let eof = try #require(responses["eof"])
    #expect(eof.head.version == .http1_0)
    #expect(eof.headers["Content-Length"] == nil)
    #expect(eof.body.readableBytesArray == pythonPattern(200_000))
    #expect(closedAfterEOFAnswer)
    // The server saw one client port for every request: keep-alive held across all five.
    let ports = Set(responses.values.compactMap { $0.headers["X-Peer-Port"] })
    #expect(ports.count == 1, "\(ports)")
  }
}

extension Array where Element == String {
  /// The element `n` places from the end (1 = the last), or "" when there is none.
  fileprivate func last(_ n: Int) -> String { count >= n ? self[count - n] : "" }
}

/// The body carried by a complete `Transfer-Encoding: chunked` framing (hex size line, data, CRLF, ..., a zero
/// size line and the final CRLF, no trailers), or nil if the framing is broken or followed by anything.
private func dechunked(_ raw: Substring) -> String? {
  var rest = raw
  var body = ""
  while true {
    guard let lineEnd = rest.firstRange(of: "\r\n"), let size = Int(rest[..<lineEnd.lowerBound], radix: 16)
    else { return nil }
    rest = rest[lineEnd.upperBound...]
    if size == 0 { return rest == "\r\n" ? body : nil }
    let data = rest.utf8.prefix(size)
    guard data.count == size, rest.utf8.dropFirst(size).starts(with: "\r\n".utf8) else { return nil }
    body += String(Substring(data))
    rest = Substring(rest.utf8.dropFirst(size + 2))
  }
}

/// The bytes `pattern(count)` makes in `Python/http_server.py`.
private func pythonPattern(_ count: Int) -> [UInt8] {
  (0..<count).map { UInt8(truncatingIfNeeded: $0 * 7 + ($0 >> 8) * 13) }
}
