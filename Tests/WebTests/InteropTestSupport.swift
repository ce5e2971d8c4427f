import EventLoop
import EventLoopTestKit
import Testing
import Web

#if canImport(Glibc)
  import Glibc
#endif

/// Runs `action` once `done()` was called `count` times: a test ends only when every party it waits for (the
/// external program, the server-side sockets) has finished, in whatever order the loop sees them.
final class Countdown {
  private var remaining: Int
  private var action: (() -> Void)?

  init(_ count: Int, _ action: @escaping () -> Void) {
    remaining = count
    self.action = action
  }

  func done() {
    remaining -= 1
    if remaining == 0, let action {
      self.action = nil
      action()
    }
  }
}

/// A long-running helper program (a Python server) on the loop, the external half of an interop test.
///
/// Its first line on stdout announces where it listens (`PORT 12345`); later lines report what it saw and are
/// collected for assertions. `stop` kills it and waits for its exit and the end of both output pipes, then
/// closes the process handle, so the loop ends with no live handle.
///
/// The program's stdin is a pipe from us that stays open until the handle closes: the helper scripts take
/// `--exit-on-stdin-eof`, so a test that fails before `stop` (or a crashed test process) leaves no server behind.
///
/// If the program ends before `stop` (a crash, a missing module), the exit and stderr are recorded as a test
/// issue and `onUnexpectedExit` runs so the test can tear its side down instead of waiting for the watchdog.
///
/// Threading: loop thread only.
final class BackgroundProcess {
  let process: ChildProcess
  /// Complete stdout lines so far, the announcement included.
  private(set) var lines: [String] = []
  private(set) var errorBytes: [UInt8] = []
  var onUnexpectedExit: (() -> Void)?
  private var partialLine: [UInt8] = []
  private var lineWaiters: [(needle: String, action: () -> Void)] = []
  private var pendingEnds = 3
  private var stopping = false
  private var stopped: ((_ status: Int64, _ signal: Int32) -> Void)?

  init(loop: Loop, _ executable: String, _ arguments: [String]) throws {
    process = try ChildProcess(
      loop: loop, executable: executable, arguments: arguments, input: true, output: .capture, error: .capture
    )
    let output = process.standardOutput!
    let error = process.standardError!
    output.onRead = { [unowned self] chunk in self.received(chunk) }
    output.onEnd = { [unowned self, unowned output] in
      output.close()
      self.partDone()
    }
    error.onRead = { [unowned self] chunk in self.errorBytes.append(contentsOf: chunk) }
    error.onEnd = { [unowned self, unowned error] in
      error.close()
      self.partDone()
    }
    process.onExit = { [unowned self] _, _ in self.partDone() }
    output.startReading()
    error.startReading()
  }

  var errorText: String { String(decoding: errorBytes, as: UTF8.self) }

  /// Calls `action` with the program's first stdout line once it arrives.
  func whenAnnounced(_ action: @escaping (String) -> Void) {
    whenLine(containing: "") { [unowned self] in action(self.lines[0]) }
  }

  /// Calls `action` once a stdout line containing `needle` has arrived (at once if one already has).
  func whenLine(containing needle: String, _ action: @escaping () -> Void) {
    if lines.contains(where: { $0.contains(needle) || needle.isEmpty }) {
      action()
    } else {
      lineWaiters.append((needle, action))
    }
  }

  /// The port from a `PORT 12345` announcement.
  static func port(fromAnnouncement line: String) -> Int? {
    guard line.hasPrefix("PORT ") else { return nil }
    return Int(line.dropFirst(5))
  }

  private func received(_ chunk: UnsafeRawBufferPointer) {
    for byte in chunk {
      if byte == UInt8(ascii: "\n") {
        let line = String(decoding: partialLine, as: UTF8.self)
        partialLine = []
        lines.append(line)
        let ready = lineWaiters.filter { line.contains($0.needle) || $0.needle.isEmpty }
        lineWaiters.removeAll { line.contains($0.needle) || $0.needle.isEmpty }
        for waiter in ready { waiter.action() }
      } else {
        partialLine.append(byte)
      }
    }
  }

  /// Sends SIGTERM and calls `then` with the exit status and signal once the program is gone and its pipes
  /// have ended.
  func stop(then: @escaping (_ status: Int64, _ signal: Int32) -> Void) {
    stopping = true
    stopped = then
    if process.exitStatus == nil {
      do { try process.kill(SIGTERM) } catch { Issue.record("kill \(process.pid): \(error)") }
    }
    if pendingEnds == 0 { finish() }
  }

  private func partDone() {
    pendingEnds -= 1
    guard pendingEnds == 0 else { return }
    if stopping {
      finish()
    } else {
      let status = process.exitStatus.map { "status \($0.status) signal \($0.signal)" } ?? "?"
      Issue.record("helper exited before it was stopped (\(status)); stderr:\n\(errorText)")
      process.close()
      let hook = onUnexpectedExit
      onUnexpectedExit = nil
      lineWaiters = []
      hook?()
    }
  }

  private func finish() {
    guard let stopped else { return }
    self.stopped = nil
    process.close()
    let exit = process.exitStatus ?? (status: -1, signal: 0)
    stopped(exit.status, exit.signal)
  }
}

/// A file under /tmp named for this process and `name`, holding `bytes`; removed by `removeTempFile`.
func writeTempFile(_ name: String, _ bytes: [UInt8]) throws -> String {
  let path = "/tmp/pagesync-interop-\(getpid())-\(name)"
  let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
  guard fd >= 0 else { throw TempFileError(path: path, errno: errno) }
  defer { close(fd) }
  var offset = 0
  while offset < bytes.count {
    let written = bytes[offset...].withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
    guard written > 0 else { throw TempFileError(path: path, errno: errno) }
    offset += written
  }
  return path
}

func removeTempFile(_ path: String) { unlink(path) }

struct TempFileError: Error, CustomStringConvertible {
  var path: String
  var errno: Int32
  var description: String { "cannot write \(path): errno \(errno)" }
}

/// `count` bytes that cover every byte value (NUL, CR, LF included) in an order that is not periodic in small
/// strides, so a dropped, duplicated or reordered piece of a body shows.
func patternBytes(_ count: Int, seed: UInt64 = 1) -> [UInt8] {
  var generator = SplitMix64(seed: seed)
  return (0..<count).map { _ in UInt8(truncatingIfNeeded: generator.next()) }
}

/// The arguments that make `python3` run one of the scripts in `Tests/WebTests/Python/`, unbuffered.
func pythonScript(_ name: String) -> [String] { ["-u", testResource("Python/\(name)")] }

/// The arguments that make `python3` run one of the helper servers in `Tests/WebTests/Python/` as a
/// `BackgroundProcess`: unbuffered, and ending when the test's end of its stdin closes.
func pythonServer(_ name: String) -> [String] { pythonScript(name) + ["--exit-on-stdin-eof"] }
