import EventLoop
import EventLoopTestKit
import Testing

#if canImport(Glibc)
  import Glibc
#endif

/// The fault-injection suite (`Python/faults.py`, `make faults` for longer runs): one broker and three daemons,
/// a seeded workload from every device while a seeded schedule kills the broker and the daemons with SIGKILL,
/// cuts and delays their connections; then, healed and synced, the oracle: every acknowledged edit applied once,
/// every offline page equal to the broker's, every forest as its reasons imply, no rejection lost, no page shown
/// incomplete, every store intact. Each seed is replayable: a failure prints it and the whole fault schedule.
@Suite(.serialized) struct FaultInjectionTests {
  /// Seed 1 kills a daemon while the broker's answer to its batch, holding a rejection, waits in the proxy: the
  /// rejection used to come back as `duplicate` on the re-send and vanish.
  @Test func seed1ARejectionWhoseAnswerWasLostIsNotLost() throws { try runFaults(seed: 1) }

  /// Seed 6 rejects a database created inline in a page another device deleted: the page's local `databases`
  /// used to keep it (the same holds for a row in a deleted database's `rows`).
  @Test func seed6ARejectedDatabaseLeavesItsPage() throws { try runFaults(seed: 6) }

  /// The test hook the schedule's crash events use (`PAGESYNC_TEST_CRASH_AT`, `TestCrashPoint`): armed at
  /// `commit:1`, the broker dies by SIGKILL before the COMMIT of its first writing transaction (its schema
  /// migration), saying so on stderr; a malformed value refuses to start; unset, the same store opens fine.
  @Test func anArmedCrashPointKillsTheBrokerInsideItsTransaction() throws {
    let directory = ScratchDirectory()
    defer { directory.remove() }
    directory.write(
      "broker.toml",
      "[server]\nlisten = \"127.0.0.1:0\"\n[store]\npath = \"\(directory.path)/broker.sqlite\"\n")
    let broker = builtProgram("pagesync-broker")
    func run(_ crashAt: String) throws -> ProcessRun? {
      let loop = try Loop()
      var run: ProcessRun?
      run = try ProcessRun(
        loop: loop, "/usr/bin/env",
        ["PAGESYNC_TEST_CRASH_AT=\(crashAt)", broker, "--config", directory.path + "/broker.toml"])
      try loop.runUntilDone(timeout: 30_000)
      try loop.close()
      return run
    }
    let crashed = try run("commit:1")
    #expect(crashed?.signal == SIGKILL, "\(crashed?.errorOutput.string ?? "")")
    #expect(
      crashed?.errorOutput.string.contains(
        "pagesync test crash point: commit #1 reached, in a transaction: yes")
        == true, "\(crashed?.errorOutput.string ?? "")")
    let refused = try run("commit:0")
    #expect(refused?.signal == 0 && refused?.status != 0)
    #expect(refused?.errorOutput.string.contains("PAGESYNC_TEST_CRASH_AT=commit:0") == true)
    let check = try runToCompletion(
      "/usr/bin/sqlite3", [directory.path + "/broker.sqlite", "PRAGMA integrity_check"], timeout: 10_000)
    #expect(check.output == "ok\n")
  }

  /// Seed 5 with the extra faults: crash points armed by the test hook kill the broker and the daemons inside
  /// their commits (three inside a transaction, three right after a COMMIT), the broker's store is twice restored
  /// from an older backup with a new epoch while devices hold queued edits (they were stuck behind a 409 gap and
  /// the edits acknowledged after the backup were lost, before the daemon kept and re-pushed them), and relays
  /// stall half-way through frames and answers, then resume or reset.
  @Test func seed5CrashPointsRestoresAndStalls() throws {
    let output = try runFaults(seed: 5, extra: "crash,restore,stall")
    // "crash points: R of A reached, I inside a transaction": the schedule must hit commits in progress.
    let inside = output.split(separator: "\n").first { $0.hasPrefix("ALL OK faults") }.flatMap { line in
      line.split(separator: ";").first { $0.contains("inside a transaction") }
    }
    #expect(inside != nil && !inside!.contains(" 0 inside"), "\(inside ?? "no crash point counts")")
  }

  /// Two brokers on one shared SQLite store (until the PostgreSQL store lands) and one Redis bus (redis-server on
  /// a free loopback port, never skipped), every device listing both brokers, with stalls and the two-broker
  /// extras. The broker kills take turns between them; when one stays down (kill -9), each device that was on it
  /// must move to the other and be live there (caught up). Redis is killed (SIGKILL) three times for a few steps
  /// and started again on its port, and edits made meanwhile through each device's other broker reach it without
  /// a sync once the buses are live (the brokers' catch-up: without it, or without the bus, this fails). In five
  /// steps every device edits one page at once while two HTTP clients post batches to the same pages through both
  /// brokers at once: every commit of a page gets its own lastUpdatedTime, each client sees a page's times
  /// increase and the store's change log (read with sqlite3) holds each one (brokers keeping their own sequence
  /// fail here). Before any sync of the healing, every device's offline pages, their lastUpdatedTime included,
  /// equal the store's; then the oracle holds (exactly once, every offline page as the store has it). `make
  /// faults` runs seeds 3, 6, 7 and 8 of this mode.
  ///
  /// Seed 8: its broker outages find devices on the broker that goes down (seed 1's did not, so whether a device
  /// moved at all was left to timing). Disabled until the bus landed: without one, a broker's channel index did
  /// not hear of the other's commits, so a catch-up it answered from the index could miss them.
  @Test func seed8TwoBrokersDevicesFailOver() throws {
    let output = try runFaults(seed: 8, extra: "stall,redis,concurrent", brokers: 2)
    #expect(output.contains("3 of 3 devices were on both brokers"), "\(output)")
    #expect(!output.contains("; 0 devices seen moving"), "\(output)")
    #expect(output.contains("redis: killed 3 times"), "\(output)")
    #expect(output.contains("concurrent: 5 steps"), "\(output)")
    #expect(!output.contains("bus probes: 0 seen"), "\(output)")
  }

  /// Two brokers on a PostgreSQL of the run's own (`--store postgres`: initdb and pg_ctl in a temporary directory,
  /// as the postgres user through runuser when root; never skipped) and a Redis bus, read by the oracle with psql
  /// and checked with pg_amcheck. PostgreSQL is stopped at once (`pg_ctl stop -m immediate`) twice for a few steps:
  /// while it is gone, a batch through each live broker is answered 503 (a broker that answered 500 failed here)
  /// and /healthz 503; once it is back, nothing answered 503 is in the store, each broker applies a batch within
  /// 30 s by itself, edits through each device's other broker reach it by push, and at the end the oracle holds
  /// (every acknowledged mutation exactly once, every device's offline pages equal to the store's before any
  /// sync: a daemon that ignored the 4500 of a subscription made while PostgreSQL was gone failed here). Seed 5:
  /// both outages, a broker down with devices on it (each must move), 25 steps (about 10 s). `make faults` runs
  /// longer seeds of this mode with stalls, Redis kills and concurrent batches too.
  @Test func seed5TwoBrokersOnPostgresRestartedMidRun() throws {
    let output = try runFaults(seed: 5, steps: 25, extra: "postgres", brokers: 2, store: "postgres")
    #expect(output.contains("postgres: stopped 2 times"), "\(output)")
    #expect(!output.contains(" 0 batches answered 503"), "\(output)")
    #expect(!output.contains("bus probes: 0 seen"), "\(output)")
  }

  /// Runs `faults.py BIN_DIR --seed S` (150 steps unless given, 3 devices; `--extra`, `--brokers` and `--store`
  /// when given) and expects it to end with `ALL OK`. Returns its output.
  @discardableResult
  private func runFaults(
    seed: Int, steps: Int = 150, extra: String = "", brokers: Int = 1, store: String = "sqlite"
  ) throws -> String {
    let loop = try Loop()
    let binDirectory = String(builtProgram("").dropLast())
    var script: ProcessRun?
    script = try ProcessRun(
      loop: loop, "python3",
      [
        integrationResource("Python/faults.py"), binDirectory, "--seed", "\(seed)", "--steps", "\(steps)",
        "--extra", extra, "--brokers", "\(brokers)", "--store", store,
      ])
    // A run takes 10 to 60 s; this only catches a hung harness.
    try loop.runUntilDone(timeout: 600_000)
    try loop.close()
    let output = (script?.output.string ?? "") + (script?.errorOutput.string ?? "")
    #expect(script?.status == 0, "\(output)")
    #expect(script?.output.string.contains("ALL OK faults") == true, script?.status == 0 ? "\(output)" : "")
    return output
  }
}
