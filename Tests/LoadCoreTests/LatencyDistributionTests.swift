import Testing

@testable import LoadCore

/// The distribution a report carries, and reading a saved report back.
@Suite struct LatencyDistributionTests {
  @Test func percentilesAreLogSpacedShortDecimalsUpToWhatTheSamplesResolve() {
    #expect(LatencyDistribution.percentiles(count: 0) == [])
    #expect(LatencyDistribution.percentiles(count: 1) == [0])
    #expect(
      LatencyDistribution.percentiles(count: 100) == [
        0, 20, 50, 60, 75, 80, 87.5, 90, 92, 95, 96, 97.5, 98, 98.75, 99,
      ])
    let many = LatencyDistribution.percentiles(count: 10_000_000)
    #expect(many.count == 7 * 7 + 1)
    #expect(ReportValue.decimal(many.last!, places: 9).json == "99.99999")
    #expect(ReportValue.decimal(many[many.count - 2], places: 9).json == "99.9999875")
  }

  @Test func theDistributionIsTheHistogramsValueAtEachPercentile() {
    var recorder = LatencyRecorder()
    // 1..1000 ms, one each: p50 ≈ 500 ms, p99 ≈ 990 ms (3 significant digits).
    for ms in 1...1000 { recorder.record(nanoseconds: UInt64(ms) * 1_000_000) }
    let points = recorder.distribution
    #expect(points.count == LatencyDistribution.percentiles(count: 1000).count)
    let median = points.first { $0.percentile == 50 }!.ms
    let p99 = points.first { $0.percentile == 99 }!.ms
    #expect(abs(median - 500) <= 1 && abs(p99 - 990) <= 1, "\(median) \(p99)")
    #expect(points.map(\.ms) == points.map(\.ms).sorted())
    let report = recorder.reportValue
    #expect(report["p99_ms"]?.numeric == recorder.summary.p99)
    #expect(
      LatencyDistribution.points(report["distribution"]!)
        == points.map { .init(percentile: $0.percentile, ms: ($0.ms * 1000).rounded() / 1000) })
    // Tables leave the list out.
    #expect(!ReportTable.render(.object([("latency", report)])).contains("distribution"))
  }

  @Test func aSavedReportReadsBackAsWritten() throws {
    var recorder = LatencyRecorder()
    for ms in [1, 2, 3, 50] { recorder.record(nanoseconds: UInt64(ms) * 1_000_000) }
    let report = ReportValue.object([
      ("scenario", .string("B1 \"q\"")), ("n", .int(3)), ("x", .number(2.5)), ("ok", .bool(true)),
      ("latency", recorder.reportValue),
    ])
    let read = try ReportValue.parse(json: report.json)
    #expect(read.json == report.json)
    #expect(throws: (any Error).self) { try ReportValue.parse(json: "{\"a\":1,}") }
  }
}
