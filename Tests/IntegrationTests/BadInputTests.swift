import EventLoop
import EventLoopTestKit
import Testing

/// The bad-input tables of issue #7 (`Python/bad_inputs.py`): for each interface, malformed and hostile inputs
/// and the exact error each must get, with the process alive and its store intact after every row. Each test
/// runs one table against the built programs and expects it to end with `ALL OK`.
@Suite(.serialized) struct BadInputTests {
  /// Raw requests over TCP: framing, limits (413, 431), methods, auth (401), bodies, ids, batches (400, 409,
  /// 413), workspaces and client ids of other users (403), numbers at the edge of 64 bits.
  @Test func theBrokerHTTPAPIRefusesBadRequestsExactly() throws { try runTable("broker_http") }

  /// `/v1/stream`: refused upgrades (401, 426), close codes 1002, 1007, 1008, 1009, stream errors 4400, a flood
  /// from a client that never reads.
  @Test func theDeviceStreamRefusesBadFramesExactly() throws { try runTable("broker_stream") }

  /// The daemon's Unix socket: bad JSON and ids (400), routes (404, 405), and 503 for pages not available
  /// offline while the broker is down.
  @Test func theLocalAPIRefusesBadRequestsExactly() throws { try runTable("local_api") }

  /// `pagesync` against a real daemon: usage (64), the daemon's refusals (1), sockets nobody serves (69).
  @Test func theCommandLineRefusesBadArgumentsExactly() throws { try runTable("cli") }

  /// `--check-config` of both programs: exit 64 naming the file, line and key.
  @Test func badConfigurationFilesNameFileLineAndKey() throws { try runTable("config") }

  /// Runs `bad_inputs.py BIN_DIR table` and expects it to end with `ALL OK`.
  private func runTable(_ table: String) throws {
    let loop = try Loop()
    // The directory of the built programs: `builtProgram` of an empty name ends with the separator.
    let binDirectory = String(builtProgram("").dropLast())
    var script: ProcessRun?
    script = try ProcessRun(
      loop: loop, "python3", [integrationResource("Python/bad_inputs.py"), binDirectory, table])
    // A table takes seconds (the broker's 408 and 1008 rows wait their [limits] of 1 s); this only catches a hung
    // harness.
    try loop.runUntilDone(timeout: 300_000)
    try loop.close()
    let output = (script?.output.string ?? "") + (script?.errorOutput.string ?? "")
    #expect(script?.status == 0, "\(output)")
    #expect(script?.output.string.hasSuffix("ALL OK\n") == true, script?.status == 0 ? "\(output)" : "")
  }
}
