import EventLoopTestKit
import SQLiteStore
import Testing
import Web

@testable import Broker

@Suite struct BrokerHealthTests {
  /// Issue #16: `/healthz` (no token) went through the writer's queue as a read, which runs alone between two
  /// groups: each probe split a group commit (two fsyncs where one did) and waited behind every batch queued
  /// before it. Now it reads the store on a connection of its own: it answers while the writer is busy, and the
  /// batches queued around it still commit together.
  @Test func healthAnswersBesideTheWriterAndSplitsNoGroupCommit() throws {
    let harness = try BrokerHarness()
    let sequence = try harness.commit(client: "c1", [.create("home", title: "Home")])
    // The writer held in a job until the gate opens.
    let gate = ThreadGate()
    var held = false
    harness.broker.writer.submit(on: harness.loop, { _ in gate.wait() }, completion: { _ in held = true })
    gate.waitUntilReached()
    let before = harness.broker.writer.transactionsCommitted
    let first = harness.pushBatch(client: "c1", [.setTitle("home", "One")])
    let health = harness.send(.GET, "/healthz", token: nil)
    let second = harness.pushBatch(client: "c2", [.create("other", title: "Other")])
    // Answered while the writer is still held, with the store's committed sequence.
    do {
      try harness.run(until: { health.response != nil }, timeout: 5_000)
    } catch {
      gate.open()
      throw error
    }
    #expect(first.response == nil && second.response == nil && !held)
    let response = try #require(health.response)
    #expect(response.status == .ok)
    let body = try harness.decode(HealthAnswer.self, response)
    #expect(body.status == "ok" && body.sequence == sequence && body.epoch == harness.broker.epoch)
    gate.open()
    try harness.run(until: { first.response != nil && second.response != nil && held })
    #expect(first.response?.status == .ok && second.response?.status == .ok)
    // The held job's group, then one group for both batches.
    #expect(harness.broker.writer.transactionsCommitted == before + 2)
    try harness.shutDown()
  }

  /// Truthful about writing: after a group's transaction failed, `/healthz` is 503 naming why, until a group
  /// commits again.
  @Test func healthIs503WhileTheLastCommitHasFailed() throws {
    let harness = try BrokerHarness()
    try harness.commit(client: "c1", [.create("home", title: "Home")])
    // A job that ends the group's transaction itself: the writer fails that group.
    var failed = false
    harness.broker.writer.submit(
      on: harness.loop, { connection in try connection.execute("COMMIT") },
      completion: { failed = (try? $0.get()) == nil })
    try harness.run(until: { failed })
    let refused = try harness.request(.GET, "/healthz", token: nil)
    #expect(refused.status == .serviceUnavailable)
    #expect(refused.body.readableString.contains("store not writable"))
    try harness.commit(client: "c1", [.setTitle("home", "Again")])
    #expect(try harness.request(.GET, "/healthz", token: nil).status == .ok)
    try harness.shutDown()
  }
}

private struct HealthAnswer: Decodable {
  var status: String
  var epoch: String
  var sequence: UInt64
}
