import Testing

@testable import LoadCore

/// B3, B4 and B7's pure logic with plain numbers: layout, figures, the density ledger, catch-up checks, the churn
/// schedule and slopes. No clock, no sleep.
@Suite struct DensityLayoutTests {
  @Test func aPoolAsLargeAsOneSetMeansEveryDeviceSubscribesTheSamePages() throws {
    let layout = try #require(DensityLayout(devices: 3, pagesPerDevice: 4, pool: 4))
    #expect(layout.subscriptions == 12)
    for device in 0..<3 { #expect(Set(layout.pages(of: device)) == [0, 1, 2, 3]) }
    #expect(layout.subscribersPerPage() == [3, 3, 3, 3])
    #expect(layout.meanSubscribersPerPage == 3)
  }

  @Test func aPoolOfEverySetGivesEachDeviceItsOwnPages() throws {
    let layout = try #require(DensityLayout(devices: 3, pagesPerDevice: 2, pool: 6))
    #expect(layout.pages(of: 0) == [0, 1])
    #expect(layout.pages(of: 1) == [2, 3])
    #expect(layout.pages(of: 2) == [4, 5])
    #expect(layout.subscribersPerPage() == [1, 1, 1, 1, 1, 1])
  }

  @Test func setsWrapAroundThePoolWithoutAPageTwice() throws {
    let layout = try #require(DensityLayout(devices: 3, pagesPerDevice: 3, pool: 4))
    #expect(layout.pages(of: 1) == [3, 0, 1])
    #expect(layout.pages(of: 2) == [2, 3, 0])
    #expect(layout.subscribersPerPage().reduce(0, +) == 9)
  }

  @Test func impossibleSizesAreRefused() {
    #expect(DensityLayout(devices: 0, pagesPerDevice: 1, pool: 1) == nil)
    #expect(DensityLayout(devices: 1, pagesPerDevice: 5, pool: 4) == nil)
  }

  @Test func updatesPerSecondBecomePageChangesBySubscribersPerPage() throws {
    // 1,000 devices × 1,000 shared pages: one change notifies 1,000 devices; 50,000 updates/s = 50 changes/s.
    let shared = try #require(DensityLayout(devices: 1000, pagesPerDevice: 1000, pool: 1000))
    #expect(shared.pageChangesPerSecond(forUpdates: 50_000) == 50)
    let own = try #require(DensityLayout(devices: 10, pagesPerDevice: 10, pool: 100))
    #expect(own.pageChangesPerSecond(forUpdates: 500) == 500)
  }
}

@Suite struct DensityFiguresTests {
  @Test func subscriptionRateIsSubscriptionsOverSeconds() {
    #expect(DensityFigures.subscriptionsPerSecond(subscriptions: 1_000_000, nanoseconds: 500_000_000) == 2e6)
    #expect(DensityFigures.subscriptionsPerSecond(subscriptions: 10, nanoseconds: 0) == 0)
  }

  @Test func memoryPerSubscriptionIsTheRSSGrowthOverSubscriptions() {
    #expect(
      DensityFigures.bytesPerSubscription(
        rssBefore: 30_000_000, rssAfter: 94_000_000, subscriptions: 1_000_000)
        == 64)
    // A shrinking RSS is reported as measured, not hidden.
    #expect(DensityFigures.bytesPerSubscription(rssBefore: 2000, rssAfter: 1000, subscriptions: 100) == -10)
    #expect(DensityFigures.bytesPerSubscription(rssBefore: 0, rssAfter: 1000, subscriptions: 0) == 0)
  }

  @Test func missFactorsAreAboveOneWhenATargetIsMissed() {
    #expect(DensityFigures.factor(measured: 128, target: 64, higherIsBetter: false) == 2)
    #expect(DensityFigures.factor(measured: 500_000, target: 2_000_000, higherIsBetter: true) == 4)
    #expect(DensityFigures.factor(measured: 4_000_000, target: 2_000_000, higherIsBetter: true) == 0.5)
  }
}

@Suite struct DensityLedgerTests {
  let layout = DensityLayout(devices: 2, pagesPerDevice: 2, pool: 3)!  // device 0: 0,1; device 1: 2,0

  @Test func aDeviceIsCompleteOnceItKnowsTheFinalTimeOfEveryChangedPage() {
    var ledger = DensityLedger(layout: layout)
    ledger.acknowledged(token: 10, page: 0, scheduledAt: 1_000)
    ledger.acknowledged(token: 11, page: 2, scheduledAt: 2_000)
    #expect(ledger.completeDevices == 0)
    ledger.received(device: 0, page: 0, token: 10, at: 3_000)
    #expect(ledger.isComplete(device: 0))
    #expect(!ledger.isComplete(device: 1))
    #expect(ledger.staleSubscriptions == 2)
    ledger.received(device: 1, page: 2, token: 11, at: 4_000)
    ledger.received(device: 1, page: 0, token: 10, at: 4_000)
    #expect(ledger.completeDevices == 2)
    #expect(ledger.staleSubscriptions == 0)
    #expect(ledger.notifications == 3)
    #expect(ledger.latency.count == 3)
    #expect(ledger.latency.summary.max == 0.003)
  }

  @Test func aNotificationBeforeItsAnswerIsParkedThenTimedFromItsSchedule() {
    var ledger = DensityLedger(layout: layout)
    ledger.received(device: 0, page: 1, token: 7, at: 5_000_000)
    #expect(ledger.unmatchedNotifications == 1)
    ledger.acknowledged(token: 7, page: 1, scheduledAt: 1_000_000)
    #expect(ledger.unmatchedNotifications == 0)
    #expect(abs(ledger.latency.summary.max - 4) < 0.01)
  }

  @Test func olderTimesAreRegressionsAndUnsubscribedPagesStrays() {
    var ledger = DensityLedger(layout: layout)
    ledger.acknowledged(token: 5, page: 1, scheduledAt: 0)
    ledger.acknowledged(token: 6, page: 1, scheduledAt: 0)
    ledger.received(device: 0, page: 1, token: 6, at: 1)
    ledger.received(device: 0, page: 1, token: 5, at: 1)
    ledger.received(device: 1, page: 1, token: 6, at: 1)
    #expect(ledger.regressions == 1)
    #expect(ledger.strays == 1)
    #expect(ledger.isComplete(device: 0))
  }
}

@Suite struct CatchUpCheckTests {
  @Test func missingNeedlessAndWrongTimesAreCountedApart() {
    let check = CatchUpCheck(expected: ["a": 5, "b": 6, "c": 7], reported: ["a": 5, "b": 9, "d": 1])
    #expect(check == CatchUpCheck(missing: 1, needless: 1, wrongTime: 1))
    #expect(!check.isExact)
    #expect(CatchUpCheck(expected: ["a": 5], reported: ["a": 5]).isExact)
  }
}

@Suite struct ChurnScheduleTests {
  @Test func tenPercentPerMinuteOfAThousandDevicesForAMinuteIsAHundredEventsSpreadEvenly() {
    let schedule = ChurnSchedule(devices: 1000, percentPerMinute: 10, seconds: 60, seed: 1)
    #expect(schedule.events.count == 100)
    #expect(schedule.events.first?.at == 300_000_000)
    #expect(schedule.events.last?.at == 59_700_000_000)
    #expect(Set(schedule.events.map(\.device)).count == 100, "no device twice under 100% churn")
    #expect(schedule.events.allSatisfy { (0..<1000).contains($0.device) })
  }

  @Test func theSameSeedGivesTheSameScheduleAndAnotherSeedAnother() {
    let a = ChurnSchedule(devices: 50, percentPerMinute: 20, seconds: 120, seed: 3)
    #expect(a == ChurnSchedule(devices: 50, percentPerMinute: 20, seconds: 120, seed: 3))
    #expect(a != ChurnSchedule(devices: 50, percentPerMinute: 20, seconds: 120, seed: 4))
  }

  @Test func moreThanEveryDeviceChurnsEachOnceBeforeAnyTwice() {
    let schedule = ChurnSchedule(devices: 4, percentPerMinute: 100, seconds: 120, seed: 9)
    #expect(schedule.events.count == 8)
    #expect(Set(schedule.events.prefix(4).map(\.device)) == [0, 1, 2, 3])
    #expect(ChurnSchedule.count(devices: 10, percentPerMinute: 10, seconds: 30) == 1)
    #expect(ChurnSchedule(devices: 0, percentPerMinute: 10, seconds: 60, seed: 1).events.isEmpty)
  }
}

@Suite struct SampleSeriesTests {
  @Test func aFlatSeriesHasSlopeZeroAndARisingOneItsRatePerMinute() {
    var flat = SampleSeries()
    for second in 0..<10 { flat.record(at: UInt64(second) * 1_000_000_000, value: 42) }
    #expect(flat.slopePerMinute == 0)
    #expect(flat.first == 42 && flat.last == 42)
    var rising = SampleSeries()
    for second in 0..<10 {
      rising.record(at: UInt64(second) * 1_000_000_000, value: Double(100 + 2 * second))
    }
    #expect(abs(rising.slopePerMinute - 120) < 1e-9)
    #expect(rising.minimum == 100 && rising.maximum == 118)
  }

  @Test func theLaterHalfIgnoresAStartUpStep() {
    var series = SampleSeries()
    for second in 0..<10 {
      series.record(at: UInt64(second) * 1_000_000_000, value: second < 3 ? Double(second) * 10 : 50)
    }
    #expect(series.slopePerMinute > 0)
    #expect(series.laterHalfSlopePerMinute == 0)
  }

  @Test func fewerThanTwoSamplesHaveNoSlope() {
    var series = SampleSeries()
    #expect(series.slopePerMinute == 0)
    series.record(at: 5, value: 1)
    #expect(series.slopePerMinute == 0)
  }
}
