import EventLoop
import Web

#if canImport(Glibc)
  import Glibc
#endif

/// Sends one request to the daemon's local API over its Unix socket and waits for the answer.
///
/// Each call runs a loop of its own on the calling thread until the exchange is over (connect, send, answer
/// or failure, close), then closes the loop: nothing is left open when it returns.
///
/// Threading: any thread, one call at a time per thread. Nonisolated on purpose: the loop's C callbacks must
/// not be created in `@MainActor` code (docs: notes/toolchain.md).
public struct LocalAPIClient: Sendable {
  /// The socket path, as given (`--socket`, `$PAGESYNC_SOCKET` or the default).
  public var socketPath: String

  public init(socketPath: String) {
    self.socketPath = socketPath
  }

  /// The daemon's answer to `request`, or why there is none. An error status becomes `daemonError` with the
  /// daemon's message; a success whose body is not JSON becomes `invalidAnswer`.
  public func send(_ request: LocalAPIRequest) throws(CLIFailure) -> LocalAPIAnswer {
    let response = try exchange(request)
    let status = response.status.code
    let body = response.body.readableBytesArray
    let parsed = Result { () throws(JSONValue.ParseError) in try JSONValue(parsing: body) }
    guard (200..<300).contains(status) else {
      throw .daemonError(status: status, message: LocalAPIClient.errorMessage(response, parsed))
    }
    switch parsed {
    case .success(let value): return LocalAPIAnswer(status: status, body: body, value: value)
    case .failure(let error):
      throw .invalidAnswer("\(request.method) \(request.path) answered \(response.status) with \(error)")
    }
  }

  /// The message of an error answer: the daemon's `message`, or the status and the start of the body.
  static func errorMessage(_ response: HTTPResponse, _ parsed: Result<JSONValue, JSONValue.ParseError>)
    -> String
  {
    if case .success(let value) = parsed, let message = value["message"]?.stringValue, !message.isEmpty {
      return message
    }
    let text = String(response.body.readableString.prefix(200)).replacingControlCharacters()
    return text.isEmpty
      ? "the daemon answered \(response.status)"
      : "the daemon answered \(response.status): \(text)"
  }

  /// Connects, sends and waits, on a loop of its own.
  private func exchange(_ request: LocalAPIRequest) throws(CLIFailure) -> HTTPResponse {
    // A daemon that closes while we write must give us EPIPE, not kill us.
    signal(SIGPIPE, SIG_IGN)
    let loop: Loop
    do {
      loop = try Loop()
    } catch {
      throw .unreachable(socket: socketPath, reason: "cannot start an event loop: \(error.message)")
    }
    var configuration = HTTPClientConfiguration()
    configuration.responseTimeout = request.timeoutSeconds * 1000
    let outcome = Outcome()
    HTTPClient.send(
      loop: loop, to: .unix(path: socketPath), request.httpRequest, configuration: configuration
    ) { result in
      outcome.result = result
    }
    // Runs until the connection is closed, which the client does once the answer came or the exchange failed
    // (its response timer included): the loop then has nothing left and returns.
    loop.run()
    do {
      try loop.close()
    } catch {
      // A handle left open would be a bug in the client; the answer is still good. Say so, do not fail.
      writeStandardError("pagesync: warning: \(error)\n")
    }
    switch outcome.result {
    case .success(let response): return response
    case .failure(.connectFailed(let error)):
      throw .unreachable(socket: socketPath, reason: error.message)
    case .failure(.timedOut):
      throw .timedOut(socket: socketPath, seconds: request.timeoutSeconds)
    case .failure(.connectionClosed(let why)):
      throw .connectionLost(socket: socketPath, reason: why)
    case .failure(.invalidResponse(let error)):
      throw .invalidAnswer("not an HTTP answer: \(error)")
    case .failure(let error):
      throw .invalidAnswer("\(error)")
    case nil:
      throw .connectionLost(socket: socketPath, reason: "the exchange ended without a result")
    }
  }

  /// Where the completion leaves the result for the code after `loop.run()`.
  private final class Outcome {
    var result: Result<HTTPResponse, HTTPClientError>?
  }
}

extension String {
  /// The text with CR, LF, tab and other control characters written as escapes: one line, columns intact.
  func replacingControlCharacters() -> String {
    guard unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7F }) else { return self }
    var out = ""
    for scalar in unicodeScalars {
      switch scalar {
      case "\n": out += "\\n"
      case "\r": out += "\\r"
      case "\t": out += "\\t"
      case _ where scalar.value < 0x20 || scalar.value == 0x7F:
        out += "\\u{\(String(scalar.value, radix: 16))}"
      default: out.unicodeScalars.append(scalar)
      }
    }
    return out
  }
}
