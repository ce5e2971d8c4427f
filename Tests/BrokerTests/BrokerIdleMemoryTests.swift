import Testing

@testable import Broker

/// The broker gives memory back once at start-up and once per idle period (no connection, no work, for
/// `idleMemoryQuietMillis`), and never while a connection is open (BrokerServer+Memory.swift). The looks are made
/// here with times of the test's choosing rather than by the status sampler's timer, which is stopped.
@Suite struct BrokerIdleMemoryTests {
  /// A harness whose status sampler is stopped: the test makes every look, at its own times.
  static func harness() throws -> BrokerHarness {
    let harness = try BrokerHarness()
    harness.broker.statusTimer?.close()
    harness.broker.statusTimer = nil
    return harness
  }

  /// Looks once a second from `start` for `seconds` seconds (times in ms); runs the loop until any memory being
  /// given back has been.
  static func look(_ harness: BrokerHarness, from start: UInt64, seconds: UInt64) throws {
    for second in 0...seconds {
      harness.broker.lookForIdleMemory(at: start + second * 1000)
      try harness.run(until: { !harness.broker.returningMemory })
    }
  }

  @Test func startUpGivesBackWhatItRanAndAnIdleBrokerGivesBackOncePerIdlePeriod() throws {
    let harness = try Self.harness()
    try harness.run(until: { harness.broker.memoryReturns == 1 })
    #expect(harness.broker.pagedOutMappings > 0)

    // Nothing has run since start-up: an hour of looks gives nothing back again.
    try Self.look(harness, from: 0, seconds: 3600)
    #expect(harness.broker.memoryReturns == 1)

    // A batch is work: once the broker has been quiet for the period after it, memory goes back, once.
    try harness.commit(client: "c1", [.create("p1", title: "one")])
    try Self.look(harness, from: 3601_000, seconds: 3600)
    #expect(harness.broker.memoryReturns == 2)
    #expect(harness.broker.idleMemory.state == .givenBack)
    try harness.shutDown()
  }

  @Test func aBrokerWithAConnectionOpenNeverGivesBack() throws {
    let harness = try Self.harness()
    try harness.run(until: { harness.broker.memoryReturns == 1 })
    try harness.commit(client: "c1", [.create("p1", title: "one")])
    let device = try harness.openStream()
    try harness.exchange(device, #"{"op":"subscribe","pages":["p1"]}"#)

    // A device connected and silent for an hour: its broker keeps everything resident.
    try Self.look(harness, from: 0, seconds: 3600)
    #expect(harness.broker.memoryReturns == 1)
    #expect(harness.broker.idleMemory.state == .busy)

    // Once it has gone, the idle period starts; memory goes back at its end.
    device.closeFromDevice()
    try harness.run(until: { harness.broker.streamCount == 0 })
    let quiet = BrokerServer.idleMemoryQuietMillis / 1000
    try Self.look(harness, from: 3601_000, seconds: quiet - 1)
    #expect(harness.broker.memoryReturns == 1, "not before the idle period is over")
    try Self.look(harness, from: 3601_000 + quiet * 1000, seconds: 2)
    #expect(harness.broker.memoryReturns == 2)
    try harness.shutDown()
  }
}
