import Testing

@testable import Broker

/// `CounterWindow` and `CommitTally` alone: the status page's rates, read at times the test chooses (the
/// window has no clock of its own).
@Suite struct CounterWindowTests {
  private func counters(batches: Int, sent: Int = 0, coalesced: Int = 0, commits: [Duration] = [])
    -> StatusCounters
  {
    var counters = StatusCounters()
    counters.batchesApplied = batches
    counters.notificationsSent = sent
    counters.notificationsCoalesced = coalesced
    for commit in commits { counters.commits.record(commit) }
    return counters
  }

  @Test func ratesAreTheGrowthSinceTheOldestSampleInsideTheSpan() throws {
    var window = CounterWindow(span: 10_000, capacity: 12)
    // One sample a second: 5 batches a second, 20 notifications a second (of which 2 coalesced).
    for second in 0...15 {
      window.record(
        counters(batches: 5 * second, sent: 18 * second, coalesced: 2 * second),
        at: 1_000_000 + 1000 * UInt64(second))
    }
    // Read half a second after the last sample: the baseline is the sample 9.5 s back (second 6), not the first.
    let now: UInt64 = 1_015_500
    let rates = try #require(
      window.rates(counters(batches: 5 * 15 + 3, sent: 18 * 15, coalesced: 30), at: now))
    #expect(rates.seconds == 9.5)
    #expect(rates.batchesPerSecond == Double(5 * 15 + 3 - 5 * 6) / 9.5)
    #expect(rates.notificationsPerSecond == Double(18 * 15 - 18 * 6) / 9.5)
    #expect(rates.coalescedPerSecond == Double(30 - 12) / 9.5)
  }

  @Test func noRateBeforeASampleOlderThanTheReading() {
    var window = CounterWindow(span: 10_000, capacity: 12)
    #expect(window.rates(counters(batches: 3), at: 500) == nil, "no sample at all")
    window.record(counters(batches: 0), at: 1000)
    #expect(
      window.rates(counters(batches: 3), at: 1000) == nil, "a sample of this very moment: no time elapsed")
    #expect(window.rates(counters(batches: 3), at: 1500)?.batchesPerSecond == 6)
    // The sampling stopped: 10 s on, the last sample has left the span and nothing is made up.
    #expect(window.rates(counters(batches: 3), at: 11_000)?.batchesPerSecond == 0.3)
    #expect(window.rates(counters(batches: 3), at: 11_001) == nil)
  }

  @Test func samplesOlderThanTheSpanAreDroppedAndMemoryIsBounded() {
    var window = CounterWindow(span: 10_000, capacity: 12)
    for second in 0..<100 { window.record(counters(batches: second), at: 1000 * UInt64(second)) }
    // Kept: the samples no older than 10 s before the newest (seconds 89 to 99).
    #expect(window.samples.map(\.time) == (89...99).map { 1000 * UInt64($0) })
    // A caller that samples far more often than the span needs cannot grow the window past its capacity.
    var busy = CounterWindow(span: 10_000, capacity: 12)
    for millisecond in 0..<5000 { busy.record(counters(batches: millisecond), at: UInt64(millisecond)) }
    #expect(busy.samples.count == 12)
    #expect(busy.samples.last?.time == 4999)
  }

  @Test func aSampleFromThePastIsIgnoredAndACounterThatWentDownReadsZero() throws {
    var window = CounterWindow(span: 10_000, capacity: 12)
    window.record(counters(batches: 10), at: 5000)
    window.record(counters(batches: 99), at: 4000)
    #expect(window.samples.map(\.time) == [5000])
    let rates = try #require(window.rates(counters(batches: 4), at: 7000))
    #expect(rates.batchesPerSecond == 0)
  }

  @Test func commitsInTheWindowAreTheDifferenceOfTheTallies() throws {
    var window = CounterWindow(span: 10_000, capacity: 12)
    let early: [Duration] = [.milliseconds(400), .milliseconds(400)]
    window.record(counters(batches: 0, commits: early), at: 0)
    let later = early + [.microseconds(300), .microseconds(800), .milliseconds(3)]
    let rates = try #require(window.rates(counters(batches: 3, commits: later), at: 2000))
    #expect(rates.commits.count == 3)
    #expect(rates.commits.total == .microseconds(4100))
    #expect(rates.commits.mean == .microseconds(4100) / 3)
    // 3 commits: the 99th percentile is the slowest, in the (2.5 ms, 5 ms] bucket; the slow early ones are gone.
    #expect(rates.commits.bound(quantile: 0.99) == .atMost(.milliseconds(5)))
    #expect(rates.commits.bound(quantile: 0.5) == .atMost(.milliseconds(1)))
  }

  @Test func aTallyCountsAsTheHistogramDoes() {
    var tally = CommitTally()
    #expect(tally.bound(quantile: 0.99) == nil)
    #expect(tally.mean == nil)
    // A value on a bound falls in that bucket (`le`), as swift-prometheus counts it.
    tally.record(.microseconds(250))
    tally.record(.seconds(9))
    #expect(tally.cumulative.first == 1)
    #expect(tally.cumulative.last == 1)
    #expect(tally.count == 2)
    #expect(tally.bound(quantile: 0.5) == .atMost(.microseconds(250)))
    #expect(tally.bound(quantile: 0.99) == .above(.seconds(5)))
  }
}
