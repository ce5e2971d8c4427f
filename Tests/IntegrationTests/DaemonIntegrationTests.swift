import EventLoop
import EventLoopTestKit
import Testing

#if canImport(Glibc)
  import Glibc
#endif

/// pagesyncd end to end: a real broker and real daemons on loopback, each device driven only through the built
/// `pagesync`, their stores read with the `sqlite3` command line. Each test runs one scenario of
/// `Python/daemon_e2e.py`, which prints what it checked, how long each wait took, and `ALL OK` when every check
/// held; on failure, what was expected, what was found, and every process's log.
///
/// Serialized: each scenario starts a broker and two or three daemons, and the waits are deadlines on a machine
/// with two cores.
@Suite(.serialized) struct DaemonIntegrationTests {
  @Test func seedExampleDatabaseWithRowsXAndYToggledFavoritedAndUntoggled() throws { try runScenario("seed") }

  @Test func anOfflineDatabaseKeepsItsFirstFiftyRowsInView() throws { try runScenario("row_limit") }

  @Test func viewChangesPruneAndExtendTheOfflineRows() throws { try runScenario("view_prune") }

  @Test func inlineDatabasesComeOfflineWithTheirPage() throws { try runScenario("inline") }

  @Test func onlyTheMostRecentVisitsStayOffline() throws { try runScenario("recent") }

  /// SIGHUP: a bad file changes nothing; new offline limits and a new token apply without a restart; a key that
  /// needs one is reported.
  @Test func aReloadAppliesNewLimitsAndTokensWithoutARestart() throws { try runScenario("reload") }

  /// SIGTERM with a push in flight: the answer is waited for and recorded before the store closes; exit 0.
  @Test func stoppingWaitsForThePushInFlight() throws { try runScenario("drain") }

  /// Tokens from token_command: a refused one shows in status with the edit queued; the right one pushes it; a
  /// broker reload replacing it resumes with the command's next one and a catch-up; PUT /v1/token with curl.
  @Test func aRefusedTokenIsReplacedFromTheCommandWithNothingLost() throws { try runScenario("tokens") }

  /// A workspace revoked on the broker by a reload: its pages leave the device; the stream stays.
  @Test func aRevokedWorkspaceIsPurgedFromTheDevice() throws { try runScenario("revoke") }

  @Test func aFavoriteRowSurvivesTogglingItsDatabaseOff() throws { try runScenario("favorite") }

  @Test func anEditOnOneDeviceReachesAnotherByPush() throws { try runScenario("push") }

  @Test func catchUpAfterARestartFetchesOnlyTheChangedPages() throws { try runScenario("catchup") }

  @Test func editsMadeWhileTheBrokerIsDownReachTheOtherDevice() throws { try runScenario("offline_edits") }

  @Test func aNewerEditWinsOverALaterArrivingOlderOne() throws { try runScenario("lww") }

  @Test func rejectedEditsLeaveTheLocalCopyAsTheBrokerHasIt() throws { try runScenario("rejected") }

  /// An edit stamped days ahead (a clock poisoned by a broker's): rejected clock_ahead, sent again with a fresh
  /// time, no conflict.
  @Test func anEditStampedAheadIsSentAgainWithAFreshTime() throws { try runScenario("clock_ahead") }

  @Test func queuedEditsSurviveKill9AndArriveExactlyOnce() throws { try runScenario("kill9") }

  @Test func aDeviceOfAnotherWorkspaceIsRefused() throws { try runScenario("workspace") }

  /// `offline add`, `favorite add`, `visit` of a page the broker does not have: refused while it is reachable
  /// (nothing in the store), taken while it is not and then listed `missing`; found when made.
  @Test func aReasonForAPageTheBrokerDoesNotHaveIsRefusedOrShownMissing() throws {
    try runScenario("missing")
  }

  /// `block add` without `--after` appends, whether or not the device stores the page.
  @Test func aBlockAddedWithoutAfterGoesLast() throws { try runScenario("append") }

  /// A fake broker answers with the number `JSONDecoder` trapped on (a catch-up answer, a stream frame): the
  /// daemon says the answer is not understood and runs on (it died of SIGILL before the strict decoder).
  @Test func aHostileBrokerCannotStopTheDaemon() throws { try runScenario("hostile_broker") }
  /// Two devices edit one block's text offline (whole-text edits, a splice, marks): both words and both marks
  /// survive on every device and the broker, whichever pushes first.
  @Test func concurrentOfflineTextEditsMerge() throws { try runScenario("text_merge") }
  /// Three devices splice one block offline at random and reconnect in a random order: all converge, every word
  /// kept.
  @Test func threeDevicesSplicingOfflineConverge() throws { try runScenario("text_three") }

  /// Store files the previous release made (Tests/Fixtures/previous-release): the new broker and daemon open
  /// them; the device's queued old-style `edit_block` texts are applied once, every text is kept, and migrated
  /// blocks take splices and marks.
  @Test func storesOfThePreviousReleaseUpgradeWithoutLoss() throws { try runScenario("upgrade") }

  /// A device's store restored from a copy taken before it pushed more edits: its new edits (offline, ids at and
  /// past the broker's last) are answered `id_reused` and sent again under a new client id; nothing is lost.
  @Test func aDeviceRestoredFromAnOlderStoreLosesNoEdit() throws { try runScenario("restored_device") }

  /// Two clones of one device image, both online, editing the same page and block: every edit arrives, and they
  /// end with different client ids.
  @Test func twoClonesOfOneImageLoseNoEdit() throws { try runScenario("cloned_devices") }

  /// Runs `daemon_e2e.py BIN_DIR scenario` and expects it to end with `ALL OK`.
  /// The change stream read by curl: remote and local page events after their commits, offline and sync events,
  /// a resume with Last-Event-ID.
  @Test func theChangeStreamTellsCurlOfEveryChangeAndResumes() throws { try runScenario("events") }

  /// `pagesync watch --json`, through PagesyncClient's event stream, against a real daemon, across its restart.
  @Test func pagesyncWatchFollowsADaemonAcrossARestart() throws { try runScenario("watch") }

  // MARK: Failover between brokers (`[broker] url` as a list)

  /// Two brokers on one shared SQLite store (until PostgreSQL lands) and a Redis bus (redis-server on a free
  /// loopback port, never skipped): a device on broker 1 sees by push, on the same stream, edits made through
  /// broker 2; kill -9 of its broker: it moves to the other, catches up, pushes what it queued in between exactly
  /// once, and status names the new broker.
  @Test func aDeviceFailsOverToTheOtherBrokerWhenItsBrokerIsKilled() throws { try runScenario("failover") }

  /// The first URL of the list is down at start: the device connects to the second.
  @Test func aDeviceWhoseFirstBrokerIsDownConnectsToTheSecond() throws { try runScenario("failover_start") }

  // MARK: TLS (certificates from a CA made now by the openssl command)

  /// Native TLS: a broker with `[server.tls]`, devices at `https://localhost` trusting the test CA (`ca_file`).
  @Test func anEditIsPushedOverNativeTLS() throws { try runScenario("tls_push", tls: true) }

  /// A certificate for another name: refused, `lastError` names the broker and the mismatch, retried.
  @Test func aBrokerCertificateForAnotherHostIsRefused() throws {
    try runScenario("tls_wrong_host", tls: true)
  }

  /// A list of two TLS brokers: the first's certificate names another host, refused; the second is used.
  @Test func eachURLOfAListIsVerifiedAgainstItsOwnHost() throws { try runScenario("tls_failover", tls: true) }

  /// openssl s_server as the broker: SNI sent, nothing of HTTP before the certificate is verified.
  @Test func theDaemonSendsSNIAndNothingBeforeVerification() throws {
    try runScenario("tls_s_server", tls: true)
  }

  /// nginx (Debian's) as the TLS proxy in front of a plain-HTTP broker.
  @Test func nginxAsATLSProxyInFrontOfAPlainBroker() throws { try runScenario("tls_nginx", tls: true) }

  /// The TLS broker against s_client, curl, Python ssl and websockets; SIGHUP renewal and a bad pair.
  @Test func theTLSBrokerAgainstOpenSSLCurlAndPython() throws { try runScenario("tls_broker", tls: true) }

  private func runScenario(_ scenario: String, tls: Bool = false) throws {
    var certificates: TestCertificates?
    if tls {
      let made = try TestCertificates(label: "e2e-tls")
      try made.issue("server")
      try made.issue("renewed")
      try made.issue("other", names: ["DNS:other.example"])
      certificates = made
    }
    defer { certificates?.remove() }
    let loop = try Loop()
    // The directory of the built programs: `builtProgram` of an empty name ends with the separator.
    let binDirectory = String(builtProgram("").dropLast())
    var script: ProcessRun?
    script = try ProcessRun(
      loop: loop, "python3",
      [integrationResource("Python/daemon_e2e.py"), binDirectory, scenario]
        + (certificates.map { [$0.directory] } ?? []))
    // Generous: a scenario's own waits have deadlines of 10 to 15 s each; this only catches a hung harness.
    try loop.runUntilDone(timeout: 600_000)
    try loop.close()
    let output = (script?.output.string ?? "") + (script?.errorOutput.string ?? "")
    #expect(script?.status == 0, "\(output)")
    // The output was shown above when the status was not 0.
    #expect(script?.output.string.hasSuffix("ALL OK\n") == true, script?.status == 0 ? "\(output)" : "")
  }
}
