import EventLoop
import EventLoopTestKit
import Testing

#if canImport(Glibc)
  import Glibc
#endif

/// docs/openapi.yaml against the real broker: Python/openapi_check.py validates the document, calls every operation,
/// provokes every status a client can, and checks each answer against the schemas, so that the code and the
/// contract cannot drift apart unnoticed.
@Suite(.serialized) struct OpenAPITests {
  /// Small, so that the check provokes 413 with a batch of six mutations rather than a thousand and one.
  static let batchMutations = 5

  @Test func theBrokerAnswersAsDocsOpenAPISays() throws {
    let loop = try Loop()
    let directory = ScratchDirectory()
    defer { directory.remove() }
    // BrokerProcess writes a configuration without [limits] and appends this at its end.
    let broker = try BrokerProcess(
      loop: loop, directory: directory, extraConfig: "[limits]\nbatch_mutations = \(Self.batchMutations)\n")
    var script: ProcessRun?
    var stopped: (status: Int64, signal: Int32)?
    broker.whenListening { base in
      do {
        script = try ProcessRun(
          loop: loop, "python3",
          [
            integrationResource("Python/openapi_check.py"), base, TestTokens.alice, TestTokens.bob,
            "\(Self.batchMutations)",
          ]
        ) { _ in broker.stop { stopped = ($0, $1) } }
      } catch {
        Issue.record("python3: \(error)")
        broker.stop { _, _ in }
      }
    }
    try loop.runUntilDone(timeout: 60_000)
    try loop.close()
    let output = "\(script?.output.string ?? "")\(script?.errorOutput.string ?? "")"
    #expect(script?.status == 0, "\(output)\n\(broker.log)")
    #expect(script?.output.string.hasSuffix("ALL OK\n") == true, "\(output)")
    #expect(stopped?.status == 0 && stopped?.signal == 0, "SIGTERM drains and exits 0: \(broker.log)")
  }
}
