import EventLoop

#if canImport(Glibc)
  import Glibc
#endif

/// A server the harness starts for a run (`pagesync-broker` or `redis-server`) and stops by its pid.
///
/// Ready once a line of its output matches `readiness` (the broker's `broker.address=HOST:PORT` log line, redis's
/// "Ready to accept connections"). Its output is read and kept (the tail shows in errors), never echoed.
///
/// Threading: the run's loop only.
final class ManagedServer {
  let name: String
  private let process: ChildProcess
  private var output = ""
  private var readiness: (String) -> String?
  private var onReady: ((Result<String, LoadError>) -> Void)?
  private var onStopped: (() -> Void)?
  private var openParts = 3
  private var killTimer: LoopTimer?
  private(set) var exitStatus: (status: Int64, signal: Int32)?

  var pid: Int32 { process.pid }

  /// Starts `executable`; `readiness` gets the output so far and returns a value once the server is ready.
  init(
    loop: Loop, name: String, executable: String, arguments: [String],
    readiness: @escaping (String) -> String?
  ) throws(LoadError) {
    self.name = name
    self.readiness = readiness
    do {
      process = try ChildProcess(
        loop: loop, executable: executable, arguments: arguments, output: .capture, error: .capture)
    } catch {
      throw .serverFailed("cannot start \(executable): \(error)")
    }
    for stream in [process.standardOutput, process.standardError].compactMap({ $0 }) {
      stream.onRead = { [unowned self] bytes in self.received(bytes) }
      stream.onEnd = { [unowned self, unowned stream] in
        stream.close()
        self.partDone()
      }
      stream.startReading()
    }
    process.onExit = { [unowned self] status, signal in
      self.exitStatus = (status, signal)
      if let onReady = self.onReady {
        self.onReady = nil
        onReady(.failure(.serverFailed("\(name) exited (\(status), signal \(signal)): \(self.tail)")))
      }
      self.partDone()
    }
  }

  /// Calls `action` once the server is ready, with what `readiness` returned.
  func whenReady(_ action: @escaping (Result<String, LoadError>) -> Void) {
    onReady = action
    check()
  }

  /// SIGTERM by pid; `then` runs once the process is gone and its output read.
  func stop(then: @escaping () -> Void) {
    guard openParts > 0 else {
      then()
      return
    }
    onStopped = then
    try? process.kill(SIGTERM)
    // The broker drains on SIGTERM; one that has not exited after 10 s is killed, so a run always ends.
    let timer = LoopTimer(loop: process.loop)
    timer.keepsLoopAlive = false
    timer.start(after: 10_000) { [weak self] in
      timer.close()
      try? self?.process.kill(SIGKILL)
    }
    killTimer = timer
  }

  /// The last lines of output, for error messages.
  var tail: String { String(output.suffix(600)) }

  private func received(_ bytes: UnsafeRawBufferPointer) {
    output += String(decoding: bytes, as: UTF8.self)
    if output.utf8.count > 1 << 20 { output = String(output.suffix(64 * 1024)) }
    check()
  }

  private func check() {
    guard let onReady, let value = readiness(output) else { return }
    self.onReady = nil
    onReady(.success(value))
  }

  private func partDone() {
    openParts -= 1
    guard openParts == 0 else { return }
    process.close()
    killTimer?.close()
    killTimer = nil
    onStopped?()
    onStopped = nil
  }
}
