import DaemonCore
import EventLoop

#if canImport(Glibc)
  import Glibc
#endif

/// Reads the token from `[broker] token_file` or runs `[broker] token_command` (TokenStateMachine's `refresh`).
///
/// - The file: its first `token_max_bytes` + 2 bytes, read at once on the loop thread (a small local file, as the
///   configuration itself is read).
/// - The command: started with `uv_spawn` (argv as configured, no shell, our environment, stdin from /dev/null,
///   stderr to ours, so the journal shows what it complains about); its stdout read on the loop as it comes, at
///   most `token_max_bytes` + 2 bytes kept (the rest is drained and dropped). It must exit 0 within
///   `token_command_timeout` seconds, or it is killed (SIGKILL) and the read fails. The first line is the token.
///
/// One read at a time: a new `read` cancels the one under way (its completion never runs). Loop thread only.
final class TokenSourceReader {
  let loop: Loop
  private var command: RunningCommand?

  init(loop: Loop) {
    self.loop = loop
  }

  /// Reads the token of `configuration`'s source; `completion` runs later on the loop (never inside the call),
  /// with the token or why there is none (the source's name first).
  func read(
    _ configuration: DaemonConfiguration, completion: @escaping (Result<String, TokenReadError>) -> Void
  ) {
    cancel()
    let limit = configuration.tokenMaxBytes
    if let path = configuration.tokenFile {
      let result = Self.readFile(path, maxBytes: limit)
      let timer = LoopTimer(loop: loop)
      // Later, never inside the call: the state machine's caller is still handling the action.
      timer.start(after: 0) {
        timer.close()
        completion(result)
      }
      return
    }
    if let argv = configuration.tokenCommand {
      let running = RunningCommand(
        loop: loop, argv: argv, maxBytes: limit,
        timeoutMillis: UInt64(configuration.tokenCommandTimeoutSeconds) * 1000)
      command = running
      running.start { [weak self, weak running] result in
        if let self, let running, self.command === running { self.command = nil }
        completion(result)
      }
      return
    }
    completion(.failure(TokenReadError("no token source is configured")))
  }

  /// Stops a command under way (a reload, the daemon stopping): it is killed, its completion never runs.
  func cancel() {
    command?.cancel()
    command = nil
  }

  /// The token on the first line of the file at `path`: a regular file only (opened without blocking, so that a
  /// FIFO put there cannot stop the loop).
  static func readFile(_ path: String, maxBytes: Int) -> Result<String, TokenReadError> {
    let fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK)
    guard fd >= 0 else {
      return .failure(TokenReadError("token_file \(path): \(String(cString: strerror(errno)))"))
    }
    defer { Glibc.close(fd) }
    var info = stat()
    guard fstat(fd, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG else {
      return .failure(TokenReadError("token_file \(path): not a regular file"))
    }
    var bytes = [UInt8](repeating: 0, count: maxBytes + 2)
    var count = 0
    while count < bytes.count {
      let n = bytes.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress! + count, $0.count - count) }
      if n < 0 && errno == EINTR { continue }
      guard n >= 0 else {
        return .failure(TokenReadError("token_file \(path): \(String(cString: strerror(errno)))"))
      }
      if n == 0 { break }
      count += n
    }
    return BearerToken.firstLine(of: Array(bytes[..<count]), maxBytes: maxBytes).mapError {
      TokenReadError("token_file \(path): \($0)")
    }
  }
}

/// One run of `token_command`: see `TokenSourceReader`. Done once the process exited and its stdout ended or held
/// a whole first line (a program that leaves a child holding its stdout is not waited for), or at the deadline.
/// Loop thread only.
private final class RunningCommand {
  let loop: Loop
  let argv: [String]
  let maxBytes: Int
  let timeoutMillis: UInt64
  private var process: ChildProcess?
  private let deadline: LoopTimer
  private var output: [UInt8] = []
  private var exit: (status: Int64, signal: Int32)?
  private var outputEnded = false
  private var timedOut = false
  private var completion: ((Result<String, TokenReadError>) -> Void)?

  init(loop: Loop, argv: [String], maxBytes: Int, timeoutMillis: UInt64) {
    self.loop = loop
    self.argv = argv
    self.maxBytes = maxBytes
    self.timeoutMillis = timeoutMillis
    deadline = LoopTimer(loop: loop)
  }

  private var name: String { "token_command \(argv[0])" }

  func start(completion: @escaping (Result<String, TokenReadError>) -> Void) {
    self.completion = completion
    let process: ChildProcess
    do {
      process = try ChildProcess(
        loop: loop, executable: argv[0], arguments: Array(argv.dropFirst()), output: .capture, error: .inherit
      )
    } catch {
      // Reported later, as every completion is.
      deadline.start(after: 0) { [self] in
        finish(.failure(TokenReadError("\(name) could not start: \(error)")))
      }
      return
    }
    self.process = process
    process.onExit = { [self] status, signal in
      exit = (status, signal)
      checkDone()
    }
    let stdout = process.standardOutput
    stdout?.onRead = { [self] chunk in
      let room = maxBytes + 2 - output.count
      if room > 0 { output += chunk.prefix(room) }
      if exit != nil { checkDone() }
    }
    stdout?.onEnd = { [self] in
      outputEnded = true
      checkDone()
    }
    stdout?.onError = { [self] _ in
      outputEnded = true
      checkDone()
    }
    stdout?.startReading()
    deadline.start(after: timeoutMillis) { [self] in
      timedOut = true
      try? process.kill(SIGKILL)
      finish(.failure(TokenReadError("\(name) timed out after \(timeoutMillis / 1000) s (killed)")))
    }
  }

  private func checkDone() {
    guard let exit, completion != nil else { return }
    if exit.signal != 0 {
      finish(.failure(TokenReadError("\(name) was killed by signal \(exit.signal)")))
    } else if exit.status != 0 {
      finish(.failure(TokenReadError("\(name) exited with status \(exit.status)")))
    } else if outputEnded || output.contains(UInt8(ascii: "\n")) || process?.standardOutput == nil {
      finish(
        BearerToken.firstLine(of: output, maxBytes: maxBytes).mapError { TokenReadError("\(name): \($0)") })
    }
  }

  /// Kills the command if it still runs; the completion does not run.
  func cancel() {
    completion = nil
    if let process, process.exitStatus == nil { try? process.kill(SIGKILL) }
    finish(nil)
  }

  private func finish(_ result: Result<String, TokenReadError>?) {
    let callback = completion
    completion = nil
    deadline.close()
    if let process {
      self.process = nil
      process.onExit = nil
      // A killed child is reaped by libuv once its handle closes after the exit; closing now also closes the pipe.
      if process.exitStatus == nil {
        process.onExit = { _, _ in process.close() }
      } else {
        process.close()
      }
    }
    if let result { callback?(result) }
  }
}
