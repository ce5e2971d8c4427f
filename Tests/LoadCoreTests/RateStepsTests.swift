import Testing

@testable import LoadCore

@Suite struct RateStepsTests {
  func step(
    _ rate: Double, p99: Double, settled: Bool = true, ackedPerSecond: Double? = nil, acked: Int? = nil
  )
    -> RateSteps.StepResult
  {
    let scheduled = Int(rate) * 5
    return RateSteps.StepResult(
      rate: rate, scheduled: scheduled, acked: acked ?? scheduled, ackedPerSecond: ackedPerSecond ?? rate,
      deliveredPerSecond: ackedPerSecond ?? rate, p99Ms: p99, settled: settled)
  }

  @Test func ratesRiseGeometricallyFromTheStart() {
    var steps = RateSteps(start: 250, factor: 2, maximum: 4000)
    var seen: [Double] = []
    while let rate = steps.nextRate {
      seen.append(rate)
      steps.record(step(rate, p99: 1))
    }
    #expect(seen == [250, 500, 1000, 2000, 4000])
    #expect(steps.limit == .maximumRate)
    #expect(steps.lastKeptUp?.rate == 4000)
    #expect(steps.firstNotKeptUp == nil)
  }

  @Test func steppingStopsAtTheFirstStepNotKeptUp() {
    var steps = RateSteps(start: 250, factor: 2, maximum: 64_000)
    steps.record(step(250, p99: 5))
    steps.record(step(500, p99: 12))
    steps.record(step(1000, p99: 40))
    steps.record(step(2000, p99: 900, settled: false))
    #expect(steps.nextRate == nil)
    #expect(steps.limit == .notKeptUp)
    #expect(steps.atLatencyLimit?.rate == 500, "the highest step that kept up with p99 <= 25 ms")
    #expect(steps.lastKeptUp?.rate == 1000)
    #expect(steps.firstNotKeptUp?.rate == 2000)
  }

  @Test func answeringSlowerThanOfferedIsNotKeepingUp() {
    #expect(step(1000, p99: 3, ackedPerSecond: 960).keptUp)
    #expect(!step(1000, p99: 3, ackedPerSecond: 900).keptUp, "a backlog grows at 90% of the offered rate")
    #expect(!step(1000, p99: 3, acked: 4999).keptUp, "a failed batch")
    #expect(!step(1000, p99: 3, settled: false).keptUp)
  }

  @Test func noStepWithinTheLatencyLimitGivesNoFigure() {
    var steps = RateSteps(start: 100, factor: 3, maximum: 1000, p99LimitMs: 25)
    steps.record(step(100, p99: 30))
    #expect(steps.nextRate == 300)
    steps.record(step(300, p99: 60))
    #expect(steps.nextRate == 900)
    steps.record(step(900, p99: 80))
    #expect(steps.nextRate == nil)
    #expect(steps.atLatencyLimit == nil)
    #expect(steps.lastKeptUp?.rate == 900)
  }

  @Test func aMultiStepRunGetsOneNoteForItsLaggingSteps() {
    let notes = GeneratorVerdict.notes(
      steps: [("r250", 1, 10), ("r500", 5, 20), ("r1000", 12.5, 90)], target: "redis")
    #expect(notes.count == 2)
    #expect(notes[0].contains("2 of 3 steps (r500, r1000; lag p99 up to 12.5 ms)"))
    #expect(notes[1].contains("in r1000"))
    #expect(GeneratorVerdict.notes(steps: [("a", 1, 1)], target: "x").isEmpty)
  }

  @Test func generatorVerdictNamesLagAndABusyHarness() {
    #expect(GeneratorVerdict.keptSchedule(lagP99Ms: 2))
    #expect(!GeneratorVerdict.keptSchedule(lagP99Ms: 2.1))
    #expect(
      GeneratorVerdict.notes(lagP99Ms: 1, harnessCPUPercent: 10, closedLoop: false, target: "redis").isEmpty)
    let notes = GeneratorVerdict.notes(
      lagP99Ms: 30, harnessCPUPercent: 90, closedLoop: false, target: "redis")
    #expect(notes.count == 2)
    #expect(notes[1].contains("not the redis server"))
    #expect(
      GeneratorVerdict.notes(lagP99Ms: 0, harnessCPUPercent: 0, closedLoop: true, target: "x")[0].hasPrefix(
        "closed loop"))
  }
}

@Suite struct MemoryFiguresTests {
  @Test func theBudgetIsTheRequestWhenItFitsElseTheDescriptorLimit() {
    #expect(
      ConnectionBudget.plan(requested: 200, descriptorLimit: 20_000, reserve: 64)
        == ConnectionBudget(connections: 200, limitedBy: .requested))
    #expect(
      ConnectionBudget.plan(requested: nil, descriptorLimit: 20_000, reserve: 64)
        == ConnectionBudget(connections: 19_936, limitedBy: .fileDescriptors))
    #expect(
      ConnectionBudget.plan(requested: 50_000, descriptorLimit: 20_000, reserve: 64)
        == ConnectionBudget(connections: 19_936, limitedBy: .fileDescriptors))
    #expect(ConnectionBudget.plan(requested: nil, descriptorLimit: 10, reserve: 64).connections == 0)
  }

  @Test func memoryPerConnectionIsTheGrowthOverTheCount() {
    let figure = MemoryPerItem(
      beforeBytes: 30_000_000, afterBytes: 30_000_000 + 20_000 * 6_000, count: 20_000)
    #expect(figure.bytesPerItem == 6_000)
    #expect(figure.meets(targetBytes: 8192))
    #expect(!MemoryPerItem(beforeBytes: 0, afterBytes: 9_000, count: 1).meets(targetBytes: 8192))
    #expect(MemoryPerItem(beforeBytes: 10, afterBytes: 5, count: 3).bytesPerItem == 0, "memory returned")
    #expect(MemoryPerItem(beforeBytes: 0, afterBytes: 5, count: 0).bytesPerItem == 0)
  }

  @Test func aSeriesThatLevelsOffHasNoLateGrowth() {
    var levelling = MemorySeries()
    for (index, bytes) in [100, 150, 180, 190, 190, 189, 190, 190].enumerated() {
      levelling.record(at: UInt64(index), bytes: bytes)
    }
    #expect(levelling.first == 100)
    #expect(levelling.peak == 190)
    #expect(levelling.growth == 90)
    #expect(levelling.lateGrowth == 0)
    var growing = MemorySeries()
    for index in 0..<8 { growing.record(at: UInt64(index), bytes: 100 + index * 10) }
    #expect(growing.lateGrowth == 40)
    #expect(MemorySeries().growth == 0)
  }

  @Test func prometheusValuesAreReadByExactName() {
    let text = """
      # HELP pagesync_broker_device_streams Open device streams.
      # TYPE pagesync_broker_device_streams gauge
      pagesync_broker_device_streams 200
      pagesync_broker_device_streams_extra 7
      pagesync_broker_notifications_coalesced_total 1.5e3
      pagesync_broker_http_refused_total{status="503"} 2
      """
    #expect(PrometheusText.value(of: "pagesync_broker_device_streams", in: text) == 200)
    #expect(PrometheusText.value(of: "pagesync_broker_notifications_coalesced_total", in: text) == 1500)
    #expect(PrometheusText.value(of: "pagesync_broker_http_refused_total", in: text) == nil)
    #expect(PrometheusText.value(of: "missing", in: text) == nil)
  }
}
