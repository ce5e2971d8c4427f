import EventLoop
import EventLoopTestKit
import Testing

/// U+0000 in text against real brokers on both stores (`Python/nul_text.py`): SQLite kept it and PostgreSQL
/// failed the batch with a 500; now each engine's broker rejects such a mutation `invalid_value` with a message
/// naming NUL (curl sends the batch), the rest of the batch applies, and `pagesyncd` answers 400 to such an edit.
@Suite struct NULTextIntegrationTests {
  @Test func aNULInTextIsRejectedAlikeOnSQLiteAndPostgreSQL() throws {
    let loop = try Loop()
    let binDirectory = String(builtProgram("").dropLast())
    var script: ProcessRun?
    script = try ProcessRun(
      loop: loop, "python3", [integrationResource("Python/nul_text.py"), binDirectory])
    // About 5 s (a PostgreSQL is started); this only catches a hung harness.
    try loop.runUntilDone(timeout: 180_000)
    try loop.close()
    let output = (script?.output.string ?? "") + (script?.errorOutput.string ?? "")
    #expect(script?.status == 0, "\(output)")
    #expect(script?.output.string.hasSuffix("ALL OK\n") == true, script?.status == 0 ? "\(output)" : "")
  }
}
