import EventLoop
import EventLoopTestKit
import LoadCore
import PostgresTestKit

#if canImport(Glibc)
  import Glibc
#endif

/// The broker side of a run as a cluster (`--store postgres`, `--brokers N`, `--bus redis`): what the harness
/// starts instead of one broker on SQLite.
public struct ClusterSettings: Sendable, Equatable {
  /// `[store] url` on a PostgreSQL the harness starts (synchronous_commit and fsync on, as shipped), instead of
  /// `[store] path` on SQLite.
  public var postgres = false
  /// Brokers on the same store; writers use broker 1, device streams the last one.
  public var brokers = 1
  /// `[bus] url` on a redis-server the harness starts.
  public var redisBus = false

  public init() {}

  /// One broker on SQLite, in-process bus: the harness's plain broker.
  public var isPlain: Bool { self == ClusterSettings() }

  /// How the report names this setup: `sqlite`, `postgres`, `postgres+2 brokers+redis bus`.
  public var name: String {
    var parts = [postgres ? "postgres" : "sqlite"]
    if brokers > 1 { parts.append("\(brokers) brokers") }
    if redisBus { parts.append("redis bus") }
    return parts.joined(separator: "+")
  }
}

/// A server a run waits for and stops: one process or a cluster of them.
protocol RunServer: AnyObject {
  func whenReady(_ action: @escaping (Result<String, LoadError>) -> Void)
  func stop(then: @escaping () -> Void)
}

extension ManagedServer: RunServer {
  /// A broker's readiness: the `HOST:PORT` of its `broker.address=` log line, once logged.
  static func brokerAddress(_ output: String) -> String? {
    guard let range = output.firstRange(of: "broker.address=") else { return nil }
    let rest = output[range.upperBound...]
    guard let end = rest.firstIndex(where: { $0 == " " || $0 == "\n" }) else { return nil }
    return String(rest[..<end])
  }
}

/// PostgreSQL, Redis and the brokers of a cluster run, started in that order (each once the one before is ready)
/// and stopped in reverse, each by its pid. Ready with the brokers' addresses, comma-separated, first broker first.
///
/// Each process's CPU time is read from /proc when the cluster is ready and again before it stops (PostgreSQL:
/// the postmaster and its backends): `report` gives them, for CPU per delivered notification on each side.
///
/// Threading: the run's loop only.
final class ClusterServers: RunServer {
  private let loop: Loop
  private let settings: ClusterSettings
  private let directory: ScratchDirectory
  private let brokerConfig: (Int, String) -> String
  private var postgresDirectory: String?
  private var started: [(name: String, server: ManagedServer, cpuPids: () -> [Int32])] = []
  private var stopped: [ManagedServer] = []
  private var addresses: [String] = []
  private var cpuAtReady: [Double] = []
  private var cpuAtStop: [Double] = []
  private var onReady: ((Result<String, LoadError>) -> Void)?
  private var readyAt: UInt64 = 0
  private var stoppedAt: UInt64 = 0
  /// Set by `stop`: a server whose turn to start comes later (a signal during start-up) is not started.
  private var stopping = false

  /// `brokerConfig(n, storeAndBus)`: broker n's configuration file text, given its `[store]` (and `[bus]`) tables.
  init(
    loop: Loop, settings: ClusterSettings, directory: ScratchDirectory,
    brokerConfig: @escaping (Int, String) -> String
  ) {
    self.loop = loop
    self.settings = settings
    self.directory = directory
    self.brokerConfig = brokerConfig
  }

  func whenReady(_ action: @escaping (Result<String, LoadError>) -> Void) {
    onReady = action
    do {
      var store = "[store]\npath = \"\(directory.path)/broker.sqlite\"\n"
      if settings.postgres {
        let socketDirectory = try initPostgres()
        store = "[store]\nurl = \"postgres://postgres@/postgres?host=\(socketDirectory)\"\n"
      }
      startPostgres { [self] in
        startRedis { [self] bus in
          startBrokers(1, tables: store + bus)
        }
      }
    } catch {
      fail(error)
    }
  }

  private func fail(_ error: LoadError) {
    guard let onReady else { return }
    self.onReady = nil
    onReady(.failure(error))
  }

  private func start(
    _ name: String, _ executable: String, _ arguments: [String],
    cpuPids: @escaping (Int32) -> [Int32] = { [$0] },
    readiness: @escaping (String) -> String?, then: @escaping (String) -> Void
  ) {
    guard !stopping else { return fail(.interrupted("stopped before \(name) started")) }
    let server: ManagedServer
    do {
      server = try ManagedServer(
        loop: loop, name: name, executable: executable, arguments: arguments, readiness: readiness)
    } catch {
      return fail(error)
    }
    let pid = server.pid
    started.append((name, server, { cpuPids(pid) }))
    server.whenReady { [self] result in
      switch result {
      case .failure(let error): fail(error)
      case .success(let value): then(value)
      }
    }
  }

  // MARK: PostgreSQL

  /// `initdb` of a cluster in a directory of its own (owned by `postgres` when running as root: PostgreSQL
  /// refuses root); the directory of its unix socket.
  private func initPostgres() throws(LoadError) -> String {
    let bin: String
    do { bin = try TestPostgres.binaries() } catch { throw .serverFailed("\(error)") }
    var template = Array("/tmp/pagesync-load-pg-XXXXXX".utf8CString)
    guard let made = template.withUnsafeMutableBufferPointer({ mkdtemp($0.baseAddress!) }) else {
      throw .serverFailed("cannot create a temporary directory for PostgreSQL")
    }
    let path = String(cString: made)
    postgresDirectory = path
    if geteuid() == 0, let user = getpwnam("postgres") {
      chown(path, user.pointee.pw_uid, user.pointee.pw_gid)
    }
    chmod(path, 0o755)
    let command =
      asPostgres + [
        bin + "/initdb", "-D", path + "/data", "-A", "trust", "-U", "postgres", "-E", "UTF8", "--locale=C",
        "--no-sync",
      ]
    let result: CompletedRun
    do { result = try runToCompletion(command[0], Array(command.dropFirst()), timeout: 120_000) } catch {
      throw .serverFailed("initdb: \(error)")
    }
    guard result.status == 0 else {
      throw .serverFailed(
        "initdb exited \(result.status.map(String.init) ?? "abnormally"): \(result.errorOutput)")
    }
    return path
  }

  /// `runuser -u postgres --` when running as root.
  private var asPostgres: [String] { geteuid() == 0 ? ["runuser", "-u", "postgres", "--"] : [] }

  private func startPostgres(then: @escaping () -> Void) {
    guard let path = postgresDirectory else { return then() }
    let bin: String
    do { bin = try TestPostgres.binaries() } catch { return fail(.serverFailed("\(error)")) }
    let command =
      asPostgres + [
        bin + "/postgres", "-D", path + "/data", "-k", path, "-c", "listen_addresses=",
        "-c", "max_connections=300",
      ]
    start(
      "postgres", command[0], Array(command.dropFirst()),
      cpuPids: { _ in Self.postmaster(path).map { [$0] + Self.children(of: $0) } ?? [] },
      readiness: { $0.contains("ready to accept connections") ? "" : nil }, then: { _ in then() })
  }

  /// The postmaster's pid, from `data/postmaster.pid` (not ours when it runs through `runuser`).
  private static func postmaster(_ path: String) -> Int32? {
    guard let text = HostProcess.readFile(path + "/data/postmaster.pid"),
      let line = text.split(separator: "\n").first
    else { return nil }
    return Int32(line.trimmingPrefix(" "))
  }

  /// The children of `pid` (PostgreSQL's backends and workers), from /proc.
  static func children(of pid: Int32) -> [Int32] {
    guard let text = HostProcess.readFile("/proc/\(pid)/task/\(pid)/children") else { return [] }
    return text.split(separator: " ").compactMap { Int32($0) }
  }

  // MARK: Redis and brokers

  private func startRedis(then: @escaping (String) -> Void) {
    guard settings.redisBus else { return then("") }
    guard let port = HostProcess.freeLoopbackPort() else {
      return fail(.serverFailed("no free port for redis"))
    }
    start(
      "redis-server", "redis-server",
      [
        "--port", String(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--daemonize",
        "no",
        "--dir", directory.path,
      ],
      readiness: { $0.contains("Ready to accept connections") ? "" : nil },
      then: { _ in then("[bus]\nurl = \"redis://127.0.0.1:\(port)\"\n") })
  }

  /// Broker `n` and, once it is ready (the first makes the schema and the epoch), the next.
  private func startBrokers(_ n: Int, tables: String) {
    guard n <= settings.brokers else { return ready() }
    let file = "broker\(n).toml"
    do { try directory.write(file, brokerConfig(n, tables)) } catch { return fail(error) }
    start(
      "pagesync-broker \(n)", HostProcess.siblingProgram("pagesync-broker"),
      ["--config", directory.path + "/" + file],
      readiness: ManagedServer.brokerAddress,
      then: { [self] address in
        addresses.append(address)
        startBrokers(n + 1, tables: tables)
      })
  }

  private func ready() {
    names = started.map(\.name)
    cpuAtReady = started.map { Self.cpu($0.cpuPids()) }
    readyAt = HostProcess.now()
    guard let onReady else { return }
    self.onReady = nil
    onReady(.success(addresses.joined(separator: ",")))
  }

  private static func cpu(_ pids: [Int32]) -> Double {
    pids.compactMap { HostProcess.sample(pid: $0)?.cpuSeconds }.reduce(0, +)
  }

  /// The pid of broker `n` (1-based), nil before it started.
  func brokerPID(_ n: Int) -> Int32? {
    started.first { $0.name == "pagesync-broker \(n)" }?.server.pid
  }

  /// Stops the brokers, Redis, then PostgreSQL (a fast shutdown of the postmaster by its pid), each by pid once the
  /// one after it has exited.
  func stop(then: @escaping () -> Void) {
    stopping = true
    if cpuAtStop.isEmpty, !cpuAtReady.isEmpty {
      cpuAtStop = started.map { Self.cpu($0.cpuPids()) }
      stoppedAt = HostProcess.now()
    }
    guard let last = started.popLast() else {
      if let path = postgresDirectory {
        postgresDirectory = nil
        _ = try? runToCompletion("rm", ["-rf", path])
      }
      return then()
    }
    if last.name == "postgres", let path = postgresDirectory, let pid = Self.postmaster(path) {
      kill(pid, SIGINT)
    }
    // Kept until every server has stopped: a ManagedServer's callbacks hold it unowned.
    stopped.append(last.server)
    last.server.stop { [self] in stop(then: then) }
  }

  /// `{setup, seconds, processes: {NAME: {cpu_seconds}}}` between ready and stop (the whole run: connecting,
  /// load, drain); `nil` if the cluster never became ready.
  func report() -> ReportValue? {
    guard cpuAtStop.count == names.count, cpuAtReady.count == names.count else { return nil }
    let seconds = Double(stoppedAt - min(stoppedAt, readyAt)) / 1e9
    let processes = names.indices.map { index in
      (names[index], ReportValue.object([("cpu_seconds", .number(cpuAtStop[index] - cpuAtReady[index]))]))
    }
    return .object([
      ("setup", .string(settings.name)), ("seconds", .number(seconds)), ("processes", .object(processes)),
    ])
  }

  /// The names of the started processes, in start order, once the cluster is ready.
  private(set) var names: [String] = []
}
