import EventLoop
import Web

/// The client of the daemon's local API: one request, one answer, over the daemon's Unix socket
/// (docs/client.md). `pagesync` is built on it.
///
/// ```swift
/// let client = LocalAPIClient(socketPath: "var/pagesyncd.sock")
/// let status = try client.send(.status)                        // blocks this thread
/// let edit = try await client.send(.editPage("home", title: "Home"))   // suspends this task
/// ```
///
/// Every call opens a connection of its own on a loop of its own and closes both before it returns: nothing is
/// left open between calls, and calls may run at once from any number of threads or tasks. The synchronous
/// `send` runs its loop on the calling thread; the `async` one runs it on a thread of its own (never on a thread
/// of Swift's cooperative pool) and resumes the task when the answer is in. Cancelling the task closes the
/// connection and throws `.cancelled`.
///
/// Nonisolated on purpose: the loop's C callbacks must not be created in `@MainActor` code, where Swift would add
/// a check that kills the process when libuv calls them on another thread. A writer that the daemon hangs up on
/// gets EPIPE, never SIGPIPE: the signal is blocked on the thread doing the exchange.
public struct LocalAPIClient: Sendable {
  /// The daemon's socket (`[api] socket` in pagesyncd.toml).
  public var socketPath: String

  /// pagesyncd's `[api] socket` default, relative to the working directory.
  public static let defaultSocketPath = "var/pagesyncd.sock"

  public init(socketPath: String = LocalAPIClient.defaultSocketPath) {
    self.socketPath = socketPath
  }

  // MARK: Typed calls

  /// The answer to `call`, decoded. Blocks the calling thread until it comes (at most the request's
  /// `timeoutSeconds`).
  public func send<Answer>(_ call: LocalAPICall<Answer>) throws(PagesyncClientError) -> Answer {
    try call.decode(try send(call.request))
  }

  /// The answer to `call`, decoded, without blocking the calling task's thread.
  public func send<Answer>(_ call: LocalAPICall<Answer>) async throws(PagesyncClientError) -> Answer {
    try call.decode(try await send(call.request))
  }

  // MARK: Untyped requests

  /// The daemon's answer to `request`, or why there is none. An error status becomes `daemonError` with the
  /// daemon's message; a success whose body is not JSON becomes `invalidAnswer`. Blocks the calling thread.
  public func send(_ request: LocalAPIRequest) throws(PagesyncClientError) -> LocalAPIAnswer {
    let exchange = try LocalAPIExchange(socketPath: socketPath, request: request)
    return try answer(to: request, withBrokenPipeSignalBlocked { exchange.run() }).get()
  }

  /// The daemon's answer to `request`, without blocking the calling task's thread: the exchange runs on a
  /// thread of its own. Cancelling the task closes the connection and throws `.cancelled` (the request may
  /// or may not have taken effect).
  public func send(_ request: LocalAPIRequest) async throws(PagesyncClientError) -> LocalAPIAnswer {
    let exchange = try LocalAPIExchange(socketPath: socketPath, request: request)
    await withTaskCancellationHandler {
      await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
        startDetachedThread {
          exchange.finish(with: exchange.run())
          continuation.resume()
        }
      }
    } onCancel: {
      exchange.cancel()
    }
    return try answer(to: request, exchange.outcome()).get()
  }

  /// What an exchange's outcome means for the caller.
  private func answer(to request: LocalAPIRequest, _ outcome: ExchangeOutcome) -> Result<
    LocalAPIAnswer, PagesyncClientError
  > {
    switch outcome {
    case .failed(let error): return .failure(error)
    case .answered(let response):
      let status = response.status.code
      let body = response.body.readableBytesArray
      let parsed = Result { () throws(JSONValue.ParseError) in try JSONValue(parsing: body) }
      guard (200..<300).contains(status) else {
        return .failure(.daemonError(status: status, message: LocalAPIClient.errorMessage(response, parsed)))
      }
      switch parsed {
      case .success(let value): return .success(LocalAPIAnswer(status: status, body: body, value: value))
      case .failure(let error):
        return .failure(
          .invalidAnswer("\(request.method) \(request.path) answered \(response.status) with \(error)"))
      }
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
}

/// How an exchange ended.
enum ExchangeOutcome: Sendable {
  case answered(HTTPResponse)
  case failed(PagesyncClientError)
}

/// One request on a connection of its own, on a loop of its own: connect, send, answer or failure, close.
///
/// Threading: made on any thread; `run` on one thread, once (the loop runs there until the exchange is over,
/// then is closed); `cancel` from any thread, any time, also after `run` returned.
final class LocalAPIExchange: @unchecked Sendable {
  // @unchecked: `loop`, `connection` and `cancelled` belong to the thread in `run`; `finished` is guarded by
  // `lock`, which is what makes `cancel` safe from another thread.
  private let socketPath: String
  private let request: LocalAPIRequest
  private let loop: Loop
  private let lock = Lock()
  private var finished = false
  private var connection: HTTPClientConnection?
  private var cancelled = false
  /// The outcome, handed from the exchange's thread to the awaiting task under `lock`.
  private var handedOver: ExchangeOutcome?

  init(socketPath: String, request: LocalAPIRequest) throws(PagesyncClientError) {
    self.socketPath = socketPath
    self.request = request
    do {
      loop = try Loop()
    } catch {
      throw .unreachable(socket: socketPath, reason: "cannot start an event loop: \(error.message)")
    }
  }

  /// Runs the exchange to its end on the calling thread.
  func run() -> ExchangeOutcome {
    var configuration = HTTPClientConfiguration()
    configuration.responseTimeout = request.timeoutSeconds * 1000
    var result: Result<HTTPResponse, HTTPClientError>?
    HTTPClientConnection.connect(loop: loop, to: .unix(path: socketPath), configuration: configuration) {
      [self] connected in
      switch connected {
      case .failure(let error): result = .failure(error)
      case .success(let connection):
        guard !cancelled else {
          connection.close()
          result = .failure(.connectionClosed("cancelled"))
          return
        }
        self.connection = connection
        connection.send(request.httpRequest) { [self] response in
          self.connection = nil
          connection.close()
          result = response
        }
      }
    }
    // Runs until the connection is closed, which the client does once the answer came or the exchange failed
    // (its response timer included): the loop then has nothing left and returns.
    loop.run()
    lock.withLock { finished = true }
    // A handle left open would be a bug in the client; the answer is still good, so this is not a failure.
    try? loop.close()
    // A cancel that came after the answer changes nothing: the answer is good.
    if cancelled, case .failure? = result { return .failed(.cancelled) }
    switch result {
    case .success(let response): return .answered(response)
    case .failure(.connectFailed(let error)):
      return .failed(.unreachable(socket: socketPath, reason: error.message))
    case .failure(.timedOut):
      return .failed(.timedOut(socket: socketPath, seconds: request.timeoutSeconds))
    case .failure(.connectionClosed(let why)):
      return .failed(.connectionLost(socket: socketPath, reason: why))
    case .failure(.invalidResponse(let error)):
      return .failed(.invalidAnswer("not an HTTP answer: \(error)"))
    case .failure(let error):
      return .failed(.invalidAnswer("\(error)"))
    case nil:
      return .failed(.connectionLost(socket: socketPath, reason: "the exchange ended without a result"))
    }
  }

  /// Keeps `outcome` for the task that awaits it. The continuation alone orders the two threads, but the answer's
  /// bytes were written on this one: passing them under the lock makes the order one that ThreadSanitizer sees
  /// too (it cannot see every ordering inside the Swift runtime, and reported this hand-over as a race).
  func finish(with outcome: ExchangeOutcome) {
    lock.withLock { handedOver = outcome }
  }

  /// The outcome `finish(with:)` kept; called once the thread has resumed the awaiting task.
  func outcome() -> ExchangeOutcome {
    lock.withLock { handedOver }
      ?? .failed(.connectionLost(socket: socketPath, reason: "the exchange ended without a result"))
  }

  /// Ends the exchange early: the connection (or the connect under way) is closed on the loop's thread. Does
  /// nothing once the loop has finished.
  func cancel() {
    lock.withLock {
      guard !finished else { return }
      // Before `finished`, the loop still has its wake-up; a task that arrives after `run()` returned is run by
      // `loop.close()`, which finds nothing left to close.
      loop.execute { [self] in
        cancelled = true
        connection?.close()
      }
    }
  }
}

extension String {
  /// The text with CR, LF, tab and other control characters written as escapes: one line, columns intact.
  package func replacingControlCharacters() -> String {
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
