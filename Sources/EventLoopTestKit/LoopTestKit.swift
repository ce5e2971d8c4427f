import EventLoop

#if canImport(Glibc)
  import Glibc
#endif

/// Why a test's loop run failed.
public enum LoopRunError: Error, CustomStringConvertible {
  /// The watchdog fired: the loop still had work after `milliseconds`.
  case timedOut(milliseconds: UInt64, liveHandles: [String])

  public var description: String {
    switch self {
    case .timedOut(let ms, let handles):
      "loop still running after \(ms) ms with handles: \(handles.joined(separator: ", "))"
    }
  }
}

extension Loop {
  /// Runs the loop until it has nothing left to do, with a watchdog: after `timeout` ms every handle is closed
  /// and the run fails. The watchdog is not a sleep: a passing test returns as soon as its work is done.
  public func runUntilDone(timeout: UInt64 = 20_000) throws(LoopRunError) {
    let watchdog = LoopTimer(loop: self)
    watchdog.keepsLoopAlive = false
    var fired: [String]?
    watchdog.start(after: timeout) { [unowned self] in
      fired = self.liveHandleTypes
      self.closeAllHandles()
    }
    run()
    watchdog.close()
    runNoWait()
    if let fired { throw .timedOut(milliseconds: timeout, liveHandles: fired) }
  }
}

/// Collects everything a stream delivers until it ends.
public final class StreamCollector {
  public private(set) var bytes: [UInt8] = []
  public private(set) var ended = false
  public var onEnd: (() -> Void)?

  public init(_ stream: ByteStream) {
    stream.onRead = { [unowned self] chunk in self.bytes.append(contentsOf: chunk) }
    stream.onEnd = { [unowned self, unowned stream] in
      self.ended = true
      stream.close()
      self.onEnd?()
    }
    stream.startReading()
  }

  public var string: String { String(decoding: bytes, as: UTF8.self) }
}

/// Runs a program to completion on `loop` and reports its output and exit status.
///
/// Ownership: a run keeps itself alive until its completion has run, so a caller may keep only the completion
/// (as `runProgram` in the Web tests does). A run whose handles the watchdog closed never completes and is leaked.
public final class ProcessRun {
  public let process: ChildProcess
  public let output: StreamCollector
  public let errorOutput: StreamCollector
  public private(set) var status: Int64?
  public private(set) var signal: Int32 = 0
  private var pendingEnds = 3
  private var completion: ((ProcessRun) -> Void)?
  /// Set while the program runs. The callbacks below hold the run only unowned, so without this a run that the
  /// caller did not store was freed at once and the first callback trapped on a dead unowned reference.
  private var selfWhileRunning: ProcessRun?

  /// Starts `executable`; `completion` runs once it exited and both of its output streams ended.
  public init(
    loop: Loop, _ executable: String, _ arguments: [String], environment: [String]? = nil,
    completion: @escaping (ProcessRun) -> Void = { _ in }
  ) throws(LoopError) {
    process = try ChildProcess(
      loop: loop, executable: executable, arguments: arguments, environment: environment, output: .capture,
      error: .capture)
    output = StreamCollector(process.standardOutput!)
    errorOutput = StreamCollector(process.standardError!)
    self.completion = completion
    output.onEnd = { [unowned self] in self.partDone() }
    errorOutput.onEnd = { [unowned self] in self.partDone() }
    process.onExit = { [unowned self] status, signal in
      self.status = status
      self.signal = signal
      self.partDone()
    }
    selfWhileRunning = self
  }

  private func partDone() {
    pendingEnds -= 1
    if pendingEnds == 0 {
      process.close()
      // Dropped once called: a completion that stores the run (as tests do) would otherwise be a cycle.
      let completion = self.completion
      self.completion = nil
      completion?(self)
      // Last: may release the run (the caller of this method holds it for the call's duration).
      selfWhileRunning = nil
    }
  }
}

/// What a program run to completion left: its exit status (nil if it could not be started or did not end in
/// time) and its output.
public struct CompletedRun: Sendable {
  public var status: Int64?
  public var output: String
  public var errorOutput: String
}

/// Runs `program` to completion on a loop of its own (for the `sqlite3` CLI on a store, cleanup commands): never
/// Foundation's `Process`, since libuv owns SIGCHLD in a process that uses it.
public func runToCompletion(_ program: String, _ arguments: [String], timeout: UInt64 = 20_000) throws
  -> CompletedRun
{
  let loop = try Loop()
  var result = CompletedRun(status: nil, output: "", errorOutput: "")
  _ = try ProcessRun(loop: loop, program, arguments) { run in
    result = CompletedRun(status: run.status, output: run.output.string, errorOutput: run.errorOutput.string)
  }
  defer { try? loop.close() }
  try loop.runUntilDone(timeout: timeout)
  return result
}

/// A program that did not succeed: what it was asked and what it said.
public struct CommandFailed: Error, CustomStringConvertible {
  public var command: [String]
  public var status: Int64?
  public var errorOutput: String
  public var description: String {
    "\(command.joined(separator: " ")) exited \(status.map(String.init) ?? "abnormally"): \(errorOutput)"
  }
}

/// Runs the `sqlite3` command line program on the database at `path` with `sql`: its standard output without the
/// final newline, or `CommandFailed`. Tests read stores with it as a tool nobody here wrote.
public func sqlite3(_ path: String, _ sql: String) throws -> String {
  let run = try runToCompletion("sqlite3", [path, sql])
  guard run.status == 0 else {
    throw CommandFailed(command: ["sqlite3", path, sql], status: run.status, errorOutput: run.errorOutput)
  }
  var output = run.output
  while output.last == "\n" { output.removeLast() }
  return output
}

/// A Unix socket path under /tmp that no other test (or run) uses (short: `sun_path` holds 107 bytes).
public func temporarySocketPath(_ label: String = "test") -> String {
  "/tmp/pagesync-\(label)-\(getpid())-\(UInt32.random(in: 0...UInt32.max)).sock"
}

/// A database path under /tmp that no other test (or run) uses. Call `remove()` at the end (`defer`): it deletes
/// the file and its -wal, -shm and -journal companions.
public struct TemporaryDatabase: Sendable {
  public let path: String

  public init(_ label: String = #function) {
    let name = label.filter { $0.isLetter || $0.isNumber }
    path = "/tmp/pagesync-test-\(getpid())-\(UInt64.random(in: 0...UInt64.max))-\(name).db"
  }

  public func remove() {
    for suffix in ["", "-wal", "-shm", "-journal"] { unlink(path + suffix) }
  }
}

/// The permission bits of `path`, or nil if it does not exist.
public func permissions(_ path: String) -> mode_t? {
  var info = stat()
  guard stat(path, &info) == 0 else { return nil }
  return info.st_mode & 0o7777
}
