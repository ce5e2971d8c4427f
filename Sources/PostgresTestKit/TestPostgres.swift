import EventLoop
import EventLoopTestKit
import PostgresStore

#if canImport(Glibc)
  import Glibc
#endif

/// A PostgreSQL server for tests, started once per test process from Debian's binaries
/// (`/usr/lib/postgresql/*/bin`, not on PATH) in a temporary directory: its own cluster (`initdb`), listening on
/// a unix socket in that directory only (`listen_addresses = ''`), trusting local connections. Never skipped: a
/// machine without PostgreSQL fails the tests that need it (`.ci/run` installs `postgresql`).
///
/// PostgreSQL refuses to run as root: when the tests do, `initdb` and `pg_ctl` run as the `postgres` user
/// (`runuser`) on a directory that user owns. The server is stopped by its pid when the process exits
/// (`atexit`), and a watchdog shell stops it should the process die without exiting (a crash, kill -9).
///
/// Each test gets a database of its own (`makeDatabase`): tests run in parallel on one server.
public final class TestPostgres: @unchecked Sendable {
  /// The directory holding the cluster (`data`), the socket and the log.
  public let directory: String
  private let lock = Lock()
  private var databases = 0

  /// The server of this test process, started on first use. Throws (with what the server said) if it cannot
  /// start.
  public static func shared() throws -> TestPostgres {
    try sharedLock.withLock {
      if let server = sharedServer { return server }
      let server = try TestPostgres()
      sharedServer = server
      return server
    }
  }

  private static let sharedLock = Lock()
  nonisolated(unsafe) private static var sharedServer: TestPostgres?

  /// The directory of PostgreSQL's programs: the newest `/usr/lib/postgresql/N/bin` with `postgres` in it.
  public static func binaries() throws -> String {
    for version in (9...30).reversed() {
      let bin = "/usr/lib/postgresql/\(version)/bin"
      if access(bin + "/postgres", X_OK) == 0 { return bin }
    }
    throw TestPostgresError(
      command: ["/usr/lib/postgresql/*/bin/postgres"], status: nil,
      errorOutput: "PostgreSQL is not installed: apt-get install postgresql")
  }

  private init() throws {
    let bin = try Self.binaries()
    var template = Array("/tmp/pagesync-pg-XXXXXX".utf8CString)
    guard let made = template.withUnsafeMutableBufferPointer({ mkdtemp($0.baseAddress!) }) else {
      throw TestPostgresError(
        command: ["mkdtemp"], status: nil, errorOutput: "cannot make a temporary directory")
    }
    directory = String(cString: made)
    let asRoot = geteuid() == 0
    if asRoot {
      guard let user = getpwnam("postgres") else {
        throw TestPostgresError(command: ["getpwnam postgres"], status: nil, errorOutput: "no postgres user")
      }
      chown(directory, user.pointee.pw_uid, user.pointee.pw_gid)
    }
    chmod(directory, 0o700)
    func run(_ program: String, _ arguments: [String]) throws {
      let command = asRoot ? ["runuser", "-u", "postgres", "--", program] + arguments : [program] + arguments
      let result = try runToCompletion(command[0], Array(command.dropFirst()), timeout: 120_000)
      guard result.status == 0 else {
        throw TestPostgresError(
          command: command, status: result.status, errorOutput: result.errorOutput + result.output)
      }
    }
    try run(
      bin + "/initdb",
      ["-D", directory + "/data", "-A", "trust", "-U", "postgres", "-E", "UTF8", "--locale=C", "--no-sync"])
    // fsync off: a test cluster lives as long as the test process; what a crash would lose does not matter.
    let options = "-k \(directory) -c listen_addresses='' -c fsync=off -c max_connections=300"
    try run(
      bin + "/pg_ctl",
      ["start", "-w", "-t", "60", "-D", directory + "/data", "-l", directory + "/log", "-o", options])
    guard let pid = Self.serverPID(directory) else {
      throw TestPostgresError(command: ["pg_ctl", "start"], status: nil, errorOutput: "no postmaster.pid")
    }
    Self.serverToStop = pid
    atexit { TestPostgres.stopAtExit() }
    // Should this process die without exiting, the server must not outlive it; either way, once both are gone,
    // the cluster's directory goes.
    _ = try? runToCompletion(
      "sh",
      [
        "-c",
        "(while kill -0 \(getpid()) 2>/dev/null; do sleep 1; done; kill -QUIT \(pid) 2>/dev/null; "
          + "while kill -0 \(pid) 2>/dev/null; do sleep 1; done; rm -rf '\(directory)') "
          + ">/dev/null 2>&1 </dev/null &",
      ])
  }

  nonisolated(unsafe) private static var serverToStop: pid_t = 0

  private static func stopAtExit() {
    guard serverToStop > 0 else { return }
    // SIGQUIT: immediate shutdown, no checkpoint (the cluster is thrown away).
    kill(serverToStop, SIGQUIT)
    serverToStop = 0
  }

  /// The pid of the postmaster, from the first line of `data/postmaster.pid`.
  private static func serverPID(_ directory: String) -> pid_t? {
    guard let file = fopen(directory + "/data/postmaster.pid", "r") else { return nil }
    defer { fclose(file) }
    var line = [CChar](repeating: 0, count: 64)
    guard fgets(&line, 64, file) != nil else { return nil }
    return pid_t(String(cString: line).trimmingWhitespace())
  }

  /// The URL of database `name` on this server, as the broker's `[store] url` takes it.
  public func url(_ name: String) -> String { "postgres://postgres@/\(name)?host=\(directory)" }

  /// A new, empty database; its URL.
  public func makeDatabase() throws -> String {
    let name = lock.withLock { () -> String in
      databases += 1
      return "test\(databases)"
    }
    let admin = try PostgresConnection(url: url("postgres"))
    defer { admin.close() }
    try admin.execute("CREATE DATABASE \(name)")
    return url(name)
  }
}

extension String {
  fileprivate func trimmingWhitespace() -> String {
    var text = Substring(self)
    while let first = text.first, first.isWhitespace { text.removeFirst() }
    while let last = text.last, last.isWhitespace { text.removeLast() }
    return String(text)
  }
}

/// Why the test server could not start: the command and what it said.
public struct TestPostgresError: Error, CustomStringConvertible {
  public var command: [String]
  public var status: Int64?
  public var errorOutput: String
  public var description: String {
    "\(command.joined(separator: " ")) exited \(status.map(String.init) ?? "abnormally"): \(errorOutput)"
  }
}
