import EventLoopTestKit
import PagesyncCLI
import PagesyncClient
import Testing

#if canImport(Glibc)
  import Glibc
#endif

/// How `pagesync` fails: the daemon's errors (exit 1), no daemon (69), bad usage (64), bad answers (1); and
/// where the socket path comes from.
@Suite struct PagesyncFailureTests {
  // MARK: The daemon says no

  @Test func aDaemonErrorPrintsItsMessageAndExitsOne() throws {
    let run = try runPagesync(
      ["show", "home"],
      answer: .error(503, "page home is not available offline and the broker is unreachable"))
    #expect(run.status == 1)
    #expect(run.output == "")
    #expect(
      run.errorOutput
        == "pagesync: page home is not available offline and the broker is unreachable (HTTP 503)\n")
  }

  @Test func aDaemonErrorWithJSONLeavesStdoutEmpty() throws {
    let run = try runPagesync(
      ["offline", "remove", "home", "--json"], answer: .error(404, "home is not toggled offline"))
    #expect(run.status == 1)
    #expect(run.output == "")
    #expect(run.errorOutput == "pagesync: home is not toggled offline (HTTP 404)\n")
  }

  @Test func anErrorWithoutAJSONMessageNamesTheStatus() throws {
    let run = try runPagesync(
      ["status"], answer: CannedAnswer(status: 500, body: "store\nbroken", contentType: "text/plain"))
    #expect(run.status == 1)
    #expect(
      run.errorOutput
        == "pagesync: the daemon answered 500 Internal Server Error: store\\nbroken (HTTP 500)\n")
  }

  @Test func aSuccessThatIsNotJSONExitsOne() throws {
    let run = try runPagesync(
      ["offline", "list", "--json"], answer: CannedAnswer(status: 200, body: "[{]", contentType: "text/plain")
    )
    #expect(run.status == 1)
    #expect(run.output == "")
    #expect(
      run.errorOutput.hasPrefix("pagesync: the daemon's answer is not valid: GET /v1/offline answered 200 OK")
    )
    #expect(run.errorOutput.hasSuffix("\n"))
    #expect(run.errorOutput.filter { $0 == "\n" }.count == 1)
  }

  @Test func anAnswerOfTheWrongShapeExitsOne() throws {
    let run = try runPagesync(["offline", "list"], answer: .ok(#"{"pages": []}"#))
    #expect(run.status == 1)
    #expect(
      run.errorOutput == #"pagesync: the daemon's answer is not valid: expected a list, got {"pages":[]}"#
        + "\n")
  }

  // MARK: No daemon

  @Test func aMissingSocketExitsSixtyNine() throws {
    let path = temporarySocketPath()
    let run = try runPagesyncAlone(["status", "--socket", path])
    #expect(run.status == 69)
    #expect(run.output == "")
    #expect(
      run.errorOutput
        == "pagesync: cannot reach the daemon at \(path): no such file or directory (is pagesyncd running? "
        + "set --socket or PAGESYNC_SOCKET)\n")
  }

  @Test func aSocketNobodyListensOnExitsSixtyNine() throws {
    // The socket file of a daemon that died: bound, not listened on, so connecting is refused.
    let path = temporarySocketPath()
    let descriptor = try bindUnixSocketWithoutListening(path)
    defer {
      close(descriptor)
      unlink(path)
    }
    let run = try runPagesyncAlone(["sync", "--socket", path, "--json"])
    #expect(run.status == 69)
    #expect(run.output == "")
    #expect(run.errorOutput.hasPrefix("pagesync: cannot reach the daemon at \(path): connection refused"))
  }

  // MARK: Where the socket comes from

  @Test func theSocketComesFromTheEnvironment() throws {
    let run = try runPagesync(
      ["offline", "list"], answer: .ok("[]"), socketArgument: false, environment: ["PAGESYNC_SOCKET=$SOCKET"])
    #expect(run.status == 0, "\(run.errorOutput)")
    #expect(try run.onlyRequest().target == "/v1/offline")
  }

  @Test func theSocketOptionWinsOverTheEnvironment() throws {
    let run = try runPagesync(
      ["status"], answer: .ok(#"{"connected": false}"#),
      environment: ["PAGESYNC_SOCKET=/nonexistent/pagesyncd.sock"])
    #expect(run.status == 0, "\(run.errorOutput)")
    #expect(run.output == "connected: no\n")
  }

  @Test func theSocketAndJSONOptionsMayComeBeforeTheCommand() throws {
    let run = try runPagesync(
      ["--socket", "$SOCKET", "--json", "offline", "list"], answer: .ok("[]"), socketArgument: false)
    #expect(run.status == 0, "\(run.errorOutput)")
    #expect(run.output == "[]\n")
    #expect(try run.onlyRequest().target == "/v1/offline")
    let equals = try runPagesync(
      ["--socket=$SOCKET", "why", "home"], answer: .ok("[]"), socketArgument: false)
    #expect(equals.status == 0, "\(equals.errorOutput)")
    #expect(try equals.onlyRequest().target == "/v1/why/home")
  }

  @Test func withoutEitherTheDefaultSocketIsUsed() throws {
    let run = try runPagesyncAlone(["status"], environment: [])
    #expect(run.status == 69)
    #expect(run.errorOutput.hasPrefix("pagesync: cannot reach the daemon at var/pagesyncd.sock: "))
  }

  @Test func socketAndJSONAreAcceptedAnywhereAfterTheCommandWords() throws {
    let run = try runPagesync(
      ["edit", "--json", "home", "--socket", "$SOCKET", "--title", "T"],
      answer: .ok(#"{"id": "home", "mutationIds": [7]}"#), socketArgument: false)
    #expect(run.status == 0, "\(run.errorOutput)")
    #expect(try run.onlyRequest().json() == json(#"{"title": "T"}"#))
    #expect(run.output == #"{"id": "home", "mutationIds": [7]}"# + "\n")
  }

  // MARK: Bad usage: refused before anything is sent

  @Test(arguments: [
    (
      ["create", "row", "--database", "tasks", "--id", "t1", "--set", "Status"], "'--set <name=value>'",
      "Status"
    ),
    (["edit", "home", "--set", "=3"], "'--set <name=value>'", "the name is empty"),
    (["create", "page", "--id", "no spaces"], "'--id <id>'", #"invalid id "no spaces""#),
    (
      ["block", "add", "home", "--id", "b1", "--text", "x", "--after", "b/2"], "'--after <after>'",
      #"invalid id "b/2""#
    ),
    (["show", String(repeating: "x", count: 65)], "'<id>'", "ids are 1 to 64"),
    (["create", "row", "--id", "t1"], "Missing expected argument '--database <database>'", "Usage:"),
    (["block", "add", "home", "--id", "b1"], "Missing expected argument '--text <text>'", "Usage:"),
    (
      ["block", "add", "home", "--id", "b1", "--text", "x", "--after", "b0", "--first"],
      "give --after or --first, not both", "Usage:"
    ),
    (["edit", "home"], "nothing to change", "--unset"),
    (["edit", "home", "--set", "A=1", "--set", "A=2"], #"property "A" is given twice"#, "Usage:"),
    (["edit", "home", "--set", "A=1", "--unset", "A"], #"property "A" is both set and unset"#, "Usage:"),
    (
      ["block", "add", "home", "--id", "b1", "--text", "x", "--type", "Heading"], "'--type <type>'",
      "a-z and _"
    ),
    (["view", "set", "tasks", "--sort", ":desc"], "'--sort <name[:desc]>'", "the name is empty"),
    // An unknown command with --json or --socket (added by runPagesync) is named, not the option.
    (["frobnicate", "--json"], "Error: Unexpected argument 'frobnicate'", "Usage: pagesync <subcommand>"),
    (
      ["offline", "toggle", "home", "--json"], "Error: 2 unexpected arguments: 'toggle', 'home'",
      "Usage: pagesync offline <subcommand>"
    ),
  ])
  func badUsageExitsSixtyFourNamingTheProblem(_ arguments: [String], _ named: String, _ detail: String) throws
  {
    let run = try runPagesync(arguments)
    #expect(run.status == 64)
    #expect(run.output == "")
    #expect(run.errorOutput.contains(named), "\(run.errorOutput)")
    #expect(run.errorOutput.contains(detail), "\(run.errorOutput)")
    #expect(run.requests.isEmpty, "sent \(run.requests)")
  }

  @Test func anUnknownCommandExitsSixtyFour() throws {
    let run = try runPagesyncAlone(["offline", "toggle", "home"])
    #expect(run.status == 64)
    #expect(run.errorOutput.contains("unexpected arguments: 'toggle', 'home'"), "\(run.errorOutput)")
    #expect(run.errorOutput.contains("Usage: pagesync offline <subcommand>"), "\(run.errorOutput)")
  }

  @Test func helpDocumentsTheExitStatuses() throws {
    let run = try runPagesyncAlone(["--help"])
    #expect(run.status == 0)
    for line in [
      "EXIT STATUS", "  0   success", "  1   the daemon answered an error", "  64  bad usage",
      "  69  the daemon cannot be reached", "  75  no answer in time",
    ] {
      #expect(run.output.contains(line), "\(run.output)")
    }
  }
}

/// A Unix socket bound at `path` and never listened on; the caller closes the descriptor and unlinks the
/// path.
private func bindUnixSocketWithoutListening(_ path: String) throws -> Int32 {
  let descriptor = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
  try #require(descriptor >= 0)
  var address = sockaddr_un()
  address.sun_family = sa_family_t(AF_UNIX)
  let bytes = Array(path.utf8)
  withUnsafeMutableBytes(of: &address.sun_path) { raw in
    raw.copyBytes(from: bytes.prefix(raw.count - 1))
  }
  let result = withUnsafePointer(to: &address) {
    $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
      bind(descriptor, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
    }
  }
  try #require(result == 0, "bind \(path): errno \(errno)")
  return descriptor
}
