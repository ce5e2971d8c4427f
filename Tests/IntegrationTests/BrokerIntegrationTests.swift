import EventLoop
import EventLoopTestKit
import Testing

#if canImport(Glibc)
  import Glibc
#endif

/// The broker as a real process on loopback, driven by clients nobody here wrote: Python (urllib and websockets)
/// and curl.
@Suite(.serialized) struct BrokerIntegrationTests {
  @Test func devicesUseTheHTTPAndStreamAPIAsDocumented() throws {
    try expectBrokerScriptPasses("broker_api.py", [TestTokens.alice, TestTokens.bob])
  }

  /// Issue #16, item 2: a chain as deep as `[limits] tree_depth`, a page below it and moves that would make
  /// cycles rejected, and a batch of 1,000 heavy moves cut by `[limits] batch_work` while another workspace's
  /// batch and /healthz answer.
  @Test func deepTreesAreBoundedAndABatchCannotStallTheWriter() throws {
    try expectBrokerScriptPasses("broker_trees.py", [TestTokens.alice, TestTokens.bob], timeout: 180_000)
  }

  @Test func subscriptionsStopAtTheConnectionLimit() throws {
    try expectBrokerScriptPasses(
      "broker_limits.py", [TestTokens.alice], extraConfig: "[limits]\nsubscriptions_per_connection = 5\n")
  }

  @Test func curlSeesTheSeedGuideAPIAndItsErrors() throws {
    let loop = try Loop()
    let directory = ScratchDirectory()
    defer { directory.remove() }
    let broker = try BrokerProcess(loop: loop, directory: directory)
    var answers: [String] = []
    broker.whenListening { base in
      let auth = ["-H", "Authorization: Bearer \(TestTokens.alice)"]
      let requests: [[String]] = [
        ["\(base)/v1/pages/home"],
        auth + ["\(base)/v1/sync?mutationsSince=0&metadataOnly=true"],
        auth + [
          "-X", "POST", "\(base)/v1/sync?lastMutationAt=0", "--data-binary",
          #"{"client":"c1","workspace":"w1","mutations":[{"id":1,"page":"home","time":"5:0","type":"create_page","title":"Home"}]}"#,
        ],
        auth + ["\(base)/v1/sync?mutationsSince=0&page=0&limit=10"],
        auth + [
          "-X", "POST", "\(base)/v1/sync?lastMutationAt=0", "--data-binary",
          #"{"client":"c1","workspace":"w1","mutations":[{"id":2,"page":"home","time":"6:0","type":"set_title","title":"x"}]}"#,
        ],
        auth + ["\(base)/v1/sync?limit=0"],
      ]
      func next(_ index: Int) {
        guard index < requests.count else {
          broker.stop { _, _ in }
          return
        }
        _ = try? ProcessRun(
          loop: loop, "curl", ["-s", "--max-time", "10", "-w", " %{http_code}"] + requests[index]
        ) { run in
          answers.append(run.output.string)
          next(index + 1)
        }
      }
      next(0)
    }
    try loop.runUntilDone(timeout: 60_000)
    try loop.close()
    try #require(answers.count == 6, "\(answers) \(broker.log)")
    #expect(answers[0].hasSuffix(" 401") && answers[0].contains("bearer token is required"))
    #expect(
      answers[1].hasPrefix(#"{"epoch":"#) && answers[1].contains(#""hasChanges":false"#)
        && answers[1].hasSuffix(" 200"))
    #expect(answers[2].contains(#""status":"applied""#) && answers[2].hasSuffix(" 200"), "\(answers[2])")
    #expect(
      answers[3].contains(#""hasMore":false"#) && answers[3].contains(#""title":"Home""#), "\(answers[3])")
    #expect(answers[4].hasSuffix(" 409") && answers[4].contains("pull first"), "\(answers[4])")
    #expect(answers[5].hasSuffix(" 400"), "\(answers[5])")
  }

  @Test func acknowledgedBatchesSurviveKill9AndReSendsApplyOnce() throws {
    let loop = try Loop()
    let directory = ScratchDirectory()
    defer { directory.remove() }
    let state = directory.path + "/state.json"
    let first = try BrokerProcess(loop: loop, directory: directory)
    var pushed: ProcessRun?
    var verified: ProcessRun?
    var killedBy: Int32 = 0
    var second: BrokerProcess?
    first.whenListening { base in
      pushed = try? ProcessRun(
        loop: loop, "python3",
        [
          integrationResource("Python/broker_crash.py"), "push", base, TestTokens.alice,
          "\(first.process.pid)", state,
        ]
      ) { _ in
        first.stop(SIGKILL) { _, signal in
          killedBy = signal
          second = try? BrokerProcess(loop: loop, directory: directory)
          second?.whenListening { base in
            verified = try? ProcessRun(
              loop: loop, "python3",
              [integrationResource("Python/broker_crash.py"), "verify", base, TestTokens.alice, state]
            ) { _ in second?.stop { _, _ in } }
          }
        }
      }
    }
    try loop.runUntilDone(timeout: 90_000)
    try loop.close()
    #expect(pushed?.status == 0, "\(pushed?.output.string ?? "")\(pushed?.errorOutput.string ?? "")")
    #expect(killedBy == SIGKILL)
    #expect(
      verified?.status == 0,
      "\(verified?.output.string ?? "")\(verified?.errorOutput.string ?? "")\(second?.log ?? "")")
    #expect(verified?.output.string.hasSuffix("ALL OK\n") == true)
  }

  @Test func badConfigurationIsRefusedNamingKeyAndLine() throws {
    let loop = try Loop()
    let directory = ScratchDirectory()
    defer { directory.remove() }
    directory.write("bad.toml", "[server]\nlisten = \"127.0.0.1:7700\"\n\n[limits]\nconnections = 0\n")
    directory.write("open.toml", "[server]\nlisten = \"0.0.0.0:7700\"\n")
    directory.write("unknown.toml", "[store]\npath = \"x\"\ncolour = \"blue\"\n")
    var runs: [ProcessRun] = []
    for name in ["bad.toml", "open.toml", "unknown.toml"] {
      runs.append(
        try ProcessRun(
          loop: loop, builtProgram("pagesync-broker"),
          ["--config", "\(directory.path)/\(name)", "--check-config"]))
    }
    try loop.runUntilDone()
    try loop.close()
    #expect(runs.allSatisfy { $0.status != 0 })
    #expect(
      runs[0].errorOutput.string.contains(
        "bad.toml:5: limits.connections: must be from 1 to 1000000 (got 0)"), "\(runs[0].errorOutput.string)")
    #expect(
      runs[1].errorOutput.string.contains(
        "open.toml:2: server.listen: 0.0.0.0:7700 is not a loopback address"), "\(runs[1].errorOutput.string)"
    )
    #expect(
      runs[2].errorOutput.string.contains("unknown.toml:3: store.colour: unknown key"),
      "\(runs[2].errorOutput.string)")
  }
}
