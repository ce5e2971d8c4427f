import ByteBuffers
import EventLoop
import EventLoopTestKit
import PagesyncCLI
import PagesyncClient
import Testing
import Web

#if canImport(Glibc)
  import Glibc
#endif

/// A request the fake daemon received.
struct RecordedRequest: Sendable {
  var method: String
  var target: String
  var contentType: String?
  var body: [UInt8]

  /// The body as JSON; nil when there is none.
  func json() throws -> JSONValue? {
    body.isEmpty ? nil : try JSONValue(parsing: body)
  }
}

/// A canned answer of the fake daemon.
struct CannedAnswer: Sendable {
  var status: Int
  var body: String
  var contentType = "application/json"

  static func ok(_ body: String) -> CannedAnswer { CannedAnswer(status: 200, body: body) }
  static func created(_ body: String) -> CannedAnswer { CannedAnswer(status: 201, body: body) }
  static func error(_ status: Int, _ message: String) -> CannedAnswer {
    CannedAnswer(status: status, body: #"{"error": \#(status), "message": "\#(message)"}"#)
  }
}

/// A stand-in for pagesyncd's local API: our `HTTPServer` on a temporary Unix socket that records every
/// request and answers each with the same canned answer. It knows nothing of the contract: the tests check
/// what `pagesync` sent against docs/protocol.md.
///
/// Threading: loop thread only (the test's loop, which also runs the `pagesync` process).
final class FakeDaemon {
  let server: HTTPServer
  let socketPath: String
  private(set) var requests: [RecordedRequest] = []

  init(loop: Loop, answer: CannedAnswer) throws {
    socketPath = temporarySocketPath()
    let router = HTTPRouter()
    server = HTTPServer(loop: loop, router: router)
    let handler: HTTPHandler = { [unowned self] request, responder in
      self.requests.append(
        RecordedRequest(
          method: request.method.rawValue, target: request.head.target,
          contentType: request.headers["Content-Type"], body: request.body.readableBytesArray))
      responder.respond(
        HTTPResponse(
          status: HTTPStatus(code: answer.status), headers: ["Content-Type": answer.contentType],
          body: ByteBuffer(string: answer.body)))
    }
    for method in [HTTPMethod.GET, .POST, .PUT, .PATCH, .DELETE] { router.add(method, "/*", handler) }
    try server.listen(on: .unix(path: socketPath))
  }
}

/// The `pagesync` program SwiftPM built next to the test bundle.
func pagesyncProgram() -> String {
  var buffer = [CChar](repeating: 0, count: 4096)
  let count = readlink("/proc/self/exe", &buffer, buffer.count - 1)
  let path =
    count > 0 ? String(decoding: buffer[0..<count].map { UInt8(bitPattern: $0) }, as: UTF8.self) : "."
  return path.split(separator: "/", omittingEmptySubsequences: false).dropLast().joined(separator: "/")
    + "/pagesync"
}

/// One run of `pagesync` against a fake daemon: what the program did and what the daemon received.
struct PagesyncRun {
  var status: Int64?
  var output: String
  var errorOutput: String
  var requests: [RecordedRequest]

  /// The one request the run made.
  func onlyRequest(sourceLocation: SourceLocation = #_sourceLocation) throws -> RecordedRequest {
    try #require(requests.count == 1, "requests: \(requests)", sourceLocation: sourceLocation)
    return requests[0]
  }
}

/// Runs `pagesync ARGUMENTS` against a fake daemon answering `answer`. `--socket PATH` is appended (after the
/// command's words, where the contract accepts it) unless `socketArgument` is false; an argument `$SOCKET`
/// and `$SOCKET` in `environment` entries stand for the daemon's socket path. The server is closed once the
/// program exited, so the loop ends with no live handle.
func runPagesync(
  _ arguments: [String], answer: CannedAnswer = .ok("{}"), socketArgument: Bool = true,
  environment: [String]? = nil
) throws -> PagesyncRun {
  let loop = try Loop()
  let daemon = try FakeDaemon(loop: loop, answer: answer)
  let expanded = arguments.map { $0.replacingOccurrences(of: "$SOCKET", with: daemon.socketPath) }
  let fullArguments = socketArgument ? expanded + ["--socket", daemon.socketPath] : expanded
  let environment = environment.map { entries in
    entries.map { $0.replacingOccurrences(of: "$SOCKET", with: daemon.socketPath) }
  }
  var result: PagesyncRun?
  _ = try ProcessRun(loop: loop, pagesyncProgram(), fullArguments, environment: environment) { run in
    result = PagesyncRun(
      status: run.status, output: run.output.string, errorOutput: run.errorOutput.string, requests: [])
    daemon.server.close()
  }
  try loop.runUntilDone(timeout: 30_000)
  try loop.close()
  var run = try #require(result, "pagesync did not finish")
  run.requests = daemon.requests
  return run
}

/// Runs `pagesync ARGUMENTS` with no daemon behind anything (for usage errors and unreachable sockets).
func runPagesyncAlone(_ arguments: [String], environment: [String]? = nil) throws -> PagesyncRun {
  let loop = try Loop()
  var result: PagesyncRun?
  _ = try ProcessRun(loop: loop, pagesyncProgram(), arguments, environment: environment) { run in
    result = PagesyncRun(
      status: run.status, output: run.output.string, errorOutput: run.errorOutput.string, requests: [])
  }
  try loop.runUntilDone(timeout: 30_000)
  try loop.close()
  return try #require(result, "pagesync did not finish")
}

extension String {
  /// Every occurrence of `target` replaced by `replacement` (no Foundation).
  func replacingOccurrences(of target: String, with replacement: String) -> String {
    split(separator: target, omittingEmptySubsequences: false).joined(separator: replacement)
  }
}

/// `text` as JSON, for comparing bodies without caring about spacing or member order.
func json(_ text: String) throws -> JSONValue {
  try JSONValue(parsing: Array(text.utf8))
}
