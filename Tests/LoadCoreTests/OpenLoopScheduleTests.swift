import SeededRandom
import Testing

@testable import LoadCore

/// The schedule is driven by an injected clock: plain numbers, never a sleep.
@Suite struct OpenLoopScheduleTests {
  @Test func batchesAreDueAtStartPlusIndexOverRate() {
    let schedule = OpenLoopSchedule(rate: 1000, start: 5_000_000, duration: 1_000_000_000)
    #expect(schedule.total == 1000)
    #expect(schedule.scheduledTime(of: 0) == 5_000_000)
    #expect(schedule.scheduledTime(of: 1) == 6_000_000)
    #expect(schedule.scheduledTime(of: 999) == 1_004_000_000)
  }

  @Test func nothingIsDueBeforeStart() {
    var schedule = OpenLoopSchedule(rate: 100, start: 1_000, duration: 1_000_000_000)
    #expect(schedule.take(now: 999).isEmpty)
    #expect(schedule.take(now: 1_000) == 0..<1)
  }

  @Test func aLateTickGetsEveryBatchItMissedWithTheirOwnScheduledTimes() {
    var schedule = OpenLoopSchedule(rate: 1000, start: 0, duration: 1_000_000_000)
    #expect(schedule.take(now: 0) == 0..<1)
    // The writer was stalled 10 ms: ten more batches are due, and each keeps the time it should have gone.
    let late = schedule.take(now: 10_000_000)
    #expect(late == 1..<11)
    #expect(schedule.scheduledTime(of: late.lowerBound) == 1_000_000)
    #expect(schedule.take(now: 10_500_000).isEmpty)
  }

  @Test func theRunEndsAfterTotalBatches() {
    var schedule = OpenLoopSchedule(rate: 10, start: 0, duration: 1_000_000_000)
    #expect(schedule.take(now: 60_000_000_000) == 0..<10)
    #expect(schedule.isFinished)
    #expect(schedule.delayUntilNext(now: 0) == nil)
  }

  @Test func delayUntilNextCountsDownToTheNextBatch() {
    var schedule = OpenLoopSchedule(rate: 100, start: 0, duration: 1_000_000_000)
    _ = schedule.take(now: 0)
    #expect(schedule.delayUntilNext(now: 4_000_000) == 6_000_000)
    #expect(schedule.delayUntilNext(now: 20_000_000) == 0)
  }
}

@Suite struct LatencyRecorderTests {
  @Test func percentilesAreInMillisecondsFromNanosecondSamples() {
    var recorder = LatencyRecorder()
    for ms in 1...100 { recorder.record(nanoseconds: UInt64(ms) * 1_000_000) }
    let summary = recorder.summary
    #expect(summary.count == 100)
    #expect(abs(summary.p50 - 50) < 0.1)
    #expect(abs(summary.p99 - 99) < 0.1)
    #expect(abs(summary.max - 100) < 0.1)
  }

  @Test func samplesBeyondTheRangeAreClampedAndCountedNotDropped() {
    var recorder = LatencyRecorder()
    recorder.record(nanoseconds: UInt64.max / 2)
    #expect(recorder.count == 1)
    #expect(recorder.clamped == 1)
  }

  @Test func anEmptyRecorderSummarisesAsZeros() {
    #expect(LatencyRecorder().summary == LatencySummary(count: 0, p50: 0, p99: 0, p999: 0, max: 0))
  }
}

@Suite struct SplitMix64Tests {
  @Test func theSameSeedChoosesTheSamePages() {
    var a = SplitMix64(seed: 7)
    var b = SplitMix64(seed: 7)
    #expect(a.choose(100, of: 10_000) == b.choose(100, of: 10_000))
  }

  @Test func choicesAreDistinctSortedAndInRange() {
    var generator = SplitMix64(seed: 1)
    let chosen = generator.choose(100, of: 1000)
    #expect(chosen.count == 100)
    #expect(Set(chosen).count == 100)
    #expect(chosen == chosen.sorted())
    #expect(chosen.allSatisfy { (0..<1000).contains($0) })
    #expect(generator.choose(5, of: 5) == [0, 1, 2, 3, 4])
  }
}
