import EventLoop
import EventLoopTestKit
import Testing

/// Two `pagesync-broker` processes on one store (one SQLite file, WAL, until the PostgreSQL store lands) and one
/// `redis-server`, driven by Python/bus_e2e.py with devices on Python `websockets`: an edit committed through one
/// broker reaches the other broker's device by push; Redis killed and started again on the same port loses no
/// notification; a catch-up while the bus is down is answered from the store; garbage on the bus is refused.
/// Never skips: without redis-server the script fails.
@Suite(.serialized) struct BusIntegrationTests {
  @Test func editsCrossBrokersThroughRedisAndARestartedRedisLosesNothing() throws {
    let loop = try Loop()
    // The directory of the built programs: `builtProgram` of an empty name ends with the separator.
    let binDirectory = String(builtProgram("").dropLast())
    let script = try ProcessRun(
      loop: loop, "python3", [integrationResource("Python/bus_e2e.py"), binDirectory])
    // Generous: the script's own waits have deadlines of 15 s each; this only catches a hung harness.
    try loop.runUntilDone(timeout: 300_000)
    try loop.close()
    let output = script.output.string + script.errorOutput.string
    #expect(script.status == 0, "\(output)")
    #expect(script.output.string.hasSuffix("ALL OK\n"), "\(output)")
  }
}
