import EventLoop
import EventLoopTestKit
import Testing

#if canImport(Glibc)
  import Glibc
#endif

/// Tokens the integration tests configure.
enum TestTokens {
  static let alice = "alice-token-0123456789"
  static let bob = "bob-token-0123456789abc"
}

/// The directory holding the test bundle, where SwiftPM also puts the programs it built.
func builtProgram(_ name: String) -> String {
  var buffer = [CChar](repeating: 0, count: 4096)
  let count = readlink("/proc/self/exe", &buffer, buffer.count - 1)
  let path =
    count > 0 ? String(decoding: buffer[0..<count].map { UInt8(bitPattern: $0) }, as: UTF8.self) : "."
  let directory = path.split(separator: "/", omittingEmptySubsequences: false).dropLast().joined(
    separator: "/")
  return directory + "/" + name
}

/// The path of a file under Tests/IntegrationTests.
func integrationResource(_ name: String, file: String = #filePath) -> String {
  file.split(separator: "/", omittingEmptySubsequences: false).dropLast().joined(separator: "/") + "/" + name
}

/// A scratch directory for one test, removed by `remove()`.
struct ScratchDirectory {
  let path: String
  init() {
    var template = Array("/tmp/pagesync-it-XXXXXX".utf8CString)
    path = template.withUnsafeMutableBufferPointer { String(cString: mkdtemp($0.baseAddress!)) }
  }
  func write(_ name: String, _ text: String) {
    let file = fopen(path + "/" + name, "w")!
    fputs(text, file)
    fclose(file)
  }
  func remove() {
    _ = try? runToCompletion("/bin/rm", ["-rf", path], timeout: 10_000)
  }
}

/// A `pagesync-broker` process on a port of its own, with a store in `directory`.
final class BrokerProcess {
  let process: ChildProcess
  private(set) var address: String?
  private(set) var log = ""
  private var pendingLine: [UInt8] = []
  private var onAddress: ((String) -> Void)?
  private var onExit: ((Int64, Int32) -> Void)?
  private(set) var exitStatus: (status: Int64, signal: Int32)?
  private var openParts = 3

  /// Writes the configuration (port 0, two tokens) unless one exists, and starts the broker. `storeFile`: the
  /// store's name in `directory` (no quote or backslash: it goes in a TOML string as it is). `storeURL`: a
  /// PostgreSQL store (`[store] url`) instead of the file.
  init(
    loop: Loop, directory: ScratchDirectory, extraConfig: String = "", storeFile: String = "broker.sqlite",
    storeURL: String? = nil
  ) throws {
    directory.write(
      "broker.toml",
      """
      [server]
      listen = "127.0.0.1:0"
      [store]
      \(storeURL.map { "url = \"\($0)\"" } ?? "path = \"\(directory.path)/\(storeFile)\"")
      [[auth.tokens]]
      token = "\(TestTokens.alice)"
      user = "alice"
      workspaces = ["w1"]
      [[auth.tokens]]
      token = "\(TestTokens.bob)"
      user = "bob"
      workspaces = ["w2"]
      \(extraConfig)
      """)
    process = try ChildProcess(
      loop: loop, executable: builtProgram("pagesync-broker"),
      arguments: ["--config", directory.path + "/broker.toml"],
      output: .capture, error: .capture)
    for stream in [process.standardOutput!, process.standardError!] {
      stream.onRead = { [unowned self] bytes in self.received(bytes) }
      stream.onEnd = { [unowned self, unowned stream] in
        stream.close()
        self.partDone()
      }
      stream.startReading()
    }
    process.onExit = { [unowned self] status, signal in
      self.exitStatus = (status, signal)
      self.partDone()
    }
  }

  /// Calls `action` with `http://HOST:PORT` once the broker logged where it listens.
  func whenListening(_ action: @escaping (String) -> Void) {
    if let address { action("http://" + address) } else { onAddress = { action("http://" + $0) } }
  }

  /// Sends `signal` and calls `then` once the process is gone and its output read.
  func stop(_ signal: Int32 = SIGTERM, then: @escaping (Int64, Int32) -> Void) {
    onExit = then
    try? process.kill(signal)
    if openParts == 0, let exitStatus { then(exitStatus.status, exitStatus.signal) }
  }

  private func received(_ bytes: UnsafeRawBufferPointer) {
    log += String(decoding: bytes, as: UTF8.self)
    guard address == nil, let range = log.firstRange(of: "broker.address=") else { return }
    let rest = log[range.upperBound...]
    guard let end = rest.firstIndex(where: { $0 == " " || $0 == "\n" }) else { return }
    address = String(rest[..<end])
    onAddress?(address!)
    onAddress = nil
  }

  private func partDone() {
    openParts -= 1
    guard openParts == 0 else { return }
    process.close()
    if let onExit, let exitStatus { onExit(exitStatus.status, exitStatus.signal) }
  }
}

/// Runs `Python/SCRIPT` against a fresh broker (`extraConfig` appended to its configuration) with the broker's
/// base URL and `arguments`, then stops the broker with SIGTERM, and checks what every such script promises:
/// exit 0, "ALL OK" last, and a broker that drained and exited 0.
func expectBrokerScriptPasses(
  _ script: String, _ arguments: [String], extraConfig: String = "", storeFile: String = "broker.sqlite",
  storeURL: String? = nil, timeout: UInt64 = 60_000, sourceLocation: SourceLocation = #_sourceLocation
) throws {
  let loop = try Loop()
  let directory = ScratchDirectory()
  defer { directory.remove() }
  let broker = try BrokerProcess(
    loop: loop, directory: directory, extraConfig: extraConfig, storeFile: storeFile, storeURL: storeURL)
  var run: ProcessRun?
  var stopped: (Int64, Int32)?
  broker.whenListening { base in
    do {
      run = try ProcessRun(
        loop: loop, "python3", [integrationResource("Python/" + script), base] + arguments
      ) {
        _ in broker.stop { stopped = ($0, $1) }
      }
    } catch {
      Issue.record("python3: \(error)", sourceLocation: sourceLocation)
      broker.stop { _, _ in }
    }
  }
  try loop.runUntilDone(timeout: timeout)
  try loop.close()
  #expect(
    run?.status == 0, "\(run?.output.string ?? "")\(run?.errorOutput.string ?? "")\n\(broker.log)",
    sourceLocation: sourceLocation)
  #expect(run?.output.string.hasSuffix("ALL OK\n") == true, sourceLocation: sourceLocation)
  #expect(stopped?.0 == 0, "SIGTERM drains and exits 0: \(broker.log)", sourceLocation: sourceLocation)
}
