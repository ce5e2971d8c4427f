import DaemonCore
import EventLoopTestKit
import Testing

@Suite struct ReconnectBackoffTests {
  @Test func boundsDoubleUpToTheCapAndDelaysStayWithin() {
    var backoff = ReconnectBackoff(base: 500, cap: 8_000, resetAfter: 30_000)
    var random = SplitMix64(seed: 7)
    var bounds: [UInt64] = []
    for _ in 0..<8 {
      let bound = backoff.currentBound
      bounds.append(bound)
      let delay = backoff.nextDelay(using: &random)
      #expect(delay <= bound)
    }
    #expect(bounds == [500, 1_000, 2_000, 4_000, 8_000, 8_000, 8_000, 8_000])
    #expect(backoff.attempt == 8)
  }

  @Test func fullJitterSpreadsDevicesOverTheWholeWindow() {
    // A thousand devices at their fifth attempt: delays cover 0...bound, not a narrow band near it.
    var random = SplitMix64(seed: 11)
    var delays: [UInt64] = []
    for _ in 0..<1_000 {
      var backoff = ReconnectBackoff(base: 1_000, cap: 64_000)
      for _ in 0..<4 { _ = backoff.nextDelay(using: &random) }
      delays.append(backoff.nextDelay(using: &random))
    }
    #expect(delays.allSatisfy { $0 <= 16_000 })
    #expect(delays.min()! < 1_000)
    #expect(delays.max()! > 15_000)
    #expect(Set(delays).count > 900)
  }

  @Test func aConnectionThatLastedResetsTheAttemptsAndAShortOneDoesNot() {
    var backoff = ReconnectBackoff(base: 100, cap: 10_000, resetAfter: 30_000)
    var random = SplitMix64(seed: 3)
    for _ in 0..<5 { _ = backoff.nextDelay(using: &random) }
    // Trace: connected at t=1000, dropped at t=5000 (4 s: too short), reconnect, up 40 s, dropped.
    backoff.connected(at: 1_000)
    backoff.disconnected(at: 5_000)
    #expect(backoff.attempt == 5)
    #expect(backoff.currentBound == 3_200)
    backoff.connected(at: 6_000)
    backoff.disconnected(at: 46_000)
    #expect(backoff.attempt == 0)
    #expect(backoff.currentBound == 100)
    // A drop without a connection (a failed attempt) resets nothing.
    _ = backoff.nextDelay(using: &random)
    backoff.disconnected(at: 100_000)
    #expect(backoff.attempt == 1)
  }

  @Test func manyAttemptsNeverOverflow() {
    var backoff = ReconnectBackoff(base: 1 << 40, cap: UInt64.max / 2)
    var random = SplitMix64(seed: 1)
    for _ in 0..<200 { #expect(backoff.nextDelay(using: &random) <= UInt64.max / 2) }
    #expect(backoff.currentBound == UInt64.max / 2)
  }
}
