import Testing

@testable import LoadCore

@Suite struct ReportTests {
  let pagesync = ReportValue.object([
    ("subscribers", .int(1000)),
    ("delivery", .object([("p99_ms", .number(4.5)), ("frames_per_s", .number(900))])),
    ("target", .string("pagesync")),
  ])
  let redis = ReportValue.object([
    ("subscribers", .int(1000)),
    ("delivery", .object([("p99_ms", .number(1.5)), ("frames_per_s", .number(0))])),
    ("target", .string("redis")),
  ])

  @Test func jsonKeepsFieldOrderAndRoundsNumbers() {
    let value = ReportValue.object([
      ("b", .number(1.23456)), ("a", .int(2)), ("s", .string("q\"\n")), ("t", .bool(true)), ("w", .number(3)),
    ])
    #expect(value.json == #"{"b":1.235,"a":2,"s":"q\"\n","t":true,"w":3}"#)
  }

  @Test func nonFiniteNumbersAreWrittenAsZeroToKeepTheJSONValid() {
    #expect(ReportValue.number(.nan).json == "0")
    #expect(ReportValue.number(.infinity).json == "0")
  }

  @Test func pathsReachNestedFields() {
    #expect(pagesync["delivery.p99_ms"]?.numeric == 4.5)
    #expect(pagesync["delivery.missing"] == nil)
    #expect(
      pagesync.flattened().map(\.0) == ["subscribers", "delivery.p99_ms", "delivery.frames_per_s", "target"])
  }

  @Test func ratiosAreOursOverRedisAndSkipZerosAndText() {
    let ratios = ComparisonReport.ratios(pagesync: pagesync, redis: redis)
    #expect(ratios.map(\.0) == ["subscribers", "delivery.p99_ms"])
    #expect(ratios.map { $0.1.numeric } == [1, 3])
    let report = ComparisonReport.make(scenario: "B1", pagesync: pagesync, redis: redis)
    #expect(report.json.hasPrefix(#"{"scenario":"B1","pagesync":{"#))
    #expect(report["ratios.delivery.p99_ms"] == nil)  // a dotted key, not nested
  }

  @Test func tablesAlignColumns() {
    let table = ReportTable.render(header: ["metric", "value"], rows: [["a", "1"], ["long", "12345"]])
    #expect(table == "metric  value\n------  -----\na           1\nlong    12345\n")
  }
}

@Suite struct ProcessSampleTests {
  @Test func readsRSSAndCPUTimeAsLinuxWritesThem() {
    let status = "Name:\tpagesync-broker\nVmHWM:\t   20480 kB\nVmRSS:\t   10240 kB\nThreads:\t2\n"
    let stat = "4242 (pagesync broker) S 1 4242 4242 0 -1 4194560 900 0 0 0 250 50 0 0 20 0 2 0 1234 0 0"
    let sample = ProcessSample.parse(status: status, stat: stat, ticksPerSecond: 100)
    #expect(sample == ProcessSample(residentBytes: 10_485_760, peakResidentBytes: 20_971_520, cpuSeconds: 3))
  }

  @Test func somethingElseIsNil() {
    #expect(ProcessSample.parse(status: "", stat: "1 (x) S", ticksPerSecond: 100) == nil)
  }
}
