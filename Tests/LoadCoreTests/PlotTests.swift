import Testing

@testable import LoadCore

/// The plots' writer: the points sit where the data says against the axes' own ticks, text is escaped, the page
/// names no script and no URL, and the edge cases (one step, a side missing, zero, huge values) still draw.
@Suite struct PlotTests {
  /// `attribute="value"` pairs of every `<name ...>` in `markup`, in order.
  static func elements(_ name: String, in markup: String) -> [[String: String]] {
    var found: [[String: String]] = []
    var rest = markup[...]
    while let start = rest.firstRange(of: "<" + name + " ") {
      let tail = rest[start.upperBound...]
      guard let end = tail.firstIndex(of: ">") else { break }
      var attributes: [String: String] = [:]
      var text = tail[..<end]
      while let equals = text.firstIndex(of: "=") {
        let key = text[..<equals].trimmingPrefix(" ")
        let valueStart = text.index(equals, offsetBy: 2)
        guard let close = text[valueStart...].firstIndex(of: "\"") else { break }
        attributes[String(key)] = String(text[valueStart..<close])
        text = text[text.index(after: close)...]
      }
      found.append(attributes)
      rest = tail[end...]
    }
    return found
  }

  /// The `cy` of the y tick labelled `value` (its grid line's `y1`).
  static func tickY(_ value: String, in svg: String) -> Double? {
    guard let range = svg.firstRange(of: "class=\"tick y-tick\" data-value=\"\(value)\"") else { return nil }
    return elements("line", in: String(svg[range.upperBound...])).first.flatMap { $0["y1"] }.flatMap(
      Double.init)
  }

  static func tickX(_ value: String, in svg: String) -> Double? {
    guard let range = svg.firstRange(of: "class=\"tick x-tick\" data-value=\"\(value)\"") else { return nil }
    return elements("line", in: String(svg[range.upperBound...])).first.flatMap { $0["x1"] }.flatMap(
      Double.init)
  }

  /// A step of a rising run as `FanOutRun` writes it.
  static func step(
    rate: Double, p99: Double, updates: Double, cpu: Double, harness: Double = 20, lag: Double = 0.5,
    distribution: [(Double, Double)] = [], readers: (generator: Double, busiest: Double, lag: Double)? = nil
  ) -> ReportValue {
    var generator: [(String, ReportValue)] = [
      ("lag_p99_ms", .number(lag)), ("harness_cpu_pct", .number(harness)),
    ]
    var more: [(String, ReportValue)] = []
    if let readers {
      generator.append(("thread_cpu_pct", .number(readers.generator)))
      more.append(
        (
          "readers",
          .object([("busiest_cpu_pct", .number(readers.busiest)), ("lag_p99_ms", .number(readers.lag))])
        ))
    }
    return .object(
      [
        ("rate", .number(rate)),
        ("batches", .object([("acked_per_s", .number(rate))])),
        (
          "delivery",
          .object([
            ("updates_per_s", .number(updates)),
            (
              "latency",
              .object([
                ("p99_ms", .number(p99)),
                (
                  "distribution",
                  LatencyDistribution.reportValue(distribution.map { .init(percentile: $0.0, ms: $0.1) })
                ),
              ])
            ),
          ])
        ),
        ("generator", .object(generator)),
        ("server", .object([("cpu_pct", .number(cpu))])),
      ] + more)
  }

  static func side(_ target: String, steps: [(String, ReportValue)], load: Double = 0.5, notes: String = "")
    -> ReportValue
  {
    .object([
      ("scenario", .string("B1")), ("target", .string(target)),
      ("saturation", .object([("p99_limit_ms", .number(25))])), ("steps", .object(steps)),
      (
        "machine",
        .object([
          ("cores", .int(2)), ("loadavg_1m_start", .number(load)), ("loadavg_1m_end", .number(load + 1)),
        ])
      ),
      ("ok", .bool(true)), ("notes", .string(notes)),
    ])
  }

  // Made anew for each use: a `static let` holding it is reported by LeakSanitizer (`make sanitize`), which cannot
  // follow pointers inside Swift's multi-payload enums kept in a global.
  static var sweep: ReportValue {
    ComparisonReport.make(
      scenario: "B1",
      pagesync: side(
        "pagesync",
        steps: [
          (
            "r100",
            step(rate: 100, p99: 10, updates: 100_000, cpu: 20, distribution: [(0, 2), (90, 5), (99, 10)])
          ),
          ("r1000", step(rate: 1000, p99: 100, updates: 1_000_000, cpu: 60)),
        ]),
      redis: side(
        "redis",
        steps: [
          ("r100", step(rate: 100, p99: 1, updates: 100_000, cpu: 10, distribution: [(0, 1), (99, 1)])),
          ("r1000", step(rate: 1000, p99: 1000, updates: 500_000, cpu: 40, harness: 99, lag: 7)),
        ], notes: "the harness used 99% of a core in r1000"))
  }

  @Test func pointsSitOnTheTicksOfTheirValues() throws {
    let data = try PlotData(reports: [Self.sweep])
    let p99 = try #require(PlotReport.charts(data).first { $0.id == "p99" }).svg()
    let circles = Self.elements("circle", in: p99)
    #expect(circles.count == 4)
    // Every point's position is its tick's: 100 batches/s on the "100" tick, 10 ms on the "10" tick...
    for circle in circles {
      let x = try #require(circle["data-x"])
      let y = try #require(circle["data-y"])
      let tickX = try #require(Self.tickX(x, in: p99), "a tick at x = \(x)")
      let tickY = try #require(Self.tickY(y, in: p99), "a tick at y = \(y)")
      #expect(abs(Double(circle["cx"]!)! - tickX) < 0.02, "\(circle)")
      #expect(abs(Double(circle["cy"]!)! - tickY) < 0.02, "\(circle)")
    }
    // ...and the data is the reports': pagesync's p99 10 then 100 ms, Redis's 1 then 1,000.
    #expect(circles.map { $0["data-y"]! } == ["10", "100", "1", "1000"])
    #expect(p99.contains("data-series=\"pagesync\"") && p99.contains("data-series=\"redis\""))
    #expect(p99.contains("class=\"guide\" data-value=\"25\""), "the 25 ms limit is drawn")
    // A line through each system's points.
    #expect(Self.elements("polyline", in: p99).count == 2)
  }

  @Test func percentileCurvesUseOneOverOneMinusP() throws {
    let data = try PlotData(reports: [Self.sweep])
    let chart = try #require(PlotReport.charts(data).first { $0.id == "percentiles-100" })
    let svg = chart.svg()
    let circles = Self.elements("circle", in: svg)
    // p0 → 1, p90 → 10, p99 → 100 on the x axis; labelled as percentiles.
    #expect(circles.map { $0["data-x"]! } == ["1", "10", "100", "1", "100"])
    #expect(circles.map { $0["data-y"]! } == ["2", "5", "10", "1", "1"])
    #expect(svg.contains(">90%</text>") && svg.contains(">99%</text>") && svg.contains(">0%</text>"))
    let ninety = try #require(Self.tickX("10", in: svg))
    #expect(abs(Double(circles[1]["cx"]!)! - ninety) < 0.02)
    // No distribution at 1,000 batches/s: no plot for it.
    #expect(!PlotReport.charts(data).contains { $0.id == "percentiles-1000" })
  }

  @Test func thePageEscapesTextAndNamesNoScriptAndNoURL() throws {
    let hostile = Self.side(
      "pagesync", steps: [("r100", Self.step(rate: 100, p99: 3, updates: 100, cpu: 5))],
      notes: "<script>alert('x')</script> & \"more\"")
    let page = PlotReport.html(try PlotData(reports: [hostile.labelled("<b>")]))
    #expect(!page.lowercased().contains("<script"))
    #expect(page.contains("&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt; &amp; &quot;more&quot;"))
    #expect(!page.contains("http"), "no URL of any kind: nothing to fetch")
    #expect(page.contains("<svg") && page.hasPrefix("<!DOCTYPE html>"))
    // A label is markup-free too.
    #expect(page.contains("pagesync (&lt;b&gt;)"))
    // A file of its own needs the SVG namespace.
    let chart = try #require(PlotReport.charts(try PlotData(reports: [hostile])).first)
    #expect(chart.svg(standalone: true).hasPrefix("<svg xmlns=\"http://www.w3.org/2000/svg\""))
  }

  @Test func theNotesSayWhichSideWasHarnessLimitedAndByWhatRule() throws {
    let notes = PlotReport.notes(try PlotData(reports: [Self.sweep]))
    #expect(
      notes.contains {
        $0.hasPrefix("harness-limited: redis at r1000 (generator 99% of a core, lag p99 7 ms)")
      }
    )
    #expect(!notes.contains { $0.contains("pagesync at") })
    #expect(
      notes.contains {
        $0.hasPrefix("rule: ") && $0.contains("85%") && $0.contains("2 ms")
          && $0.contains("readers.busiest_cpu_pct")
      })
    #expect(notes.contains("1-minute load average at the start and end of the runs: 0.5–1.5 on 2 cores"))
    #expect(notes.contains("redis report: the harness used 99% of a core in r1000"))
    let quiet = ComparisonReport.make(
      scenario: "B1", pagesync: Self.side("pagesync", steps: []), redis: Self.side("redis", steps: []))
    #expect(PlotReport.notes(try PlotData(reports: [quiet])).contains("harness-limited: no side, at no step"))
  }

  /// The multi-threaded harness: the process's CPU adds up its threads, so the rule reads each thread's own
  /// figures; a busy reader thread (or frames waiting for one) makes the step harness-limited.
  @Test func aBusyReaderThreadMakesAStepHarnessLimitedAndAManyThreadedHarnessAloneDoesNot() throws {
    let threaded = ComparisonReport.make(
      scenario: "B1",
      pagesync: Self.side(
        "pagesync",
        steps: [
          // 150% of a core in all, no thread busy: not limited.
          ("r100", Self.step(rate: 100, p99: 2, updates: 1, cpu: 5, harness: 150, readers: (50, 60, 0.5)))
        ]),
      redis: Self.side(
        "redis",
        steps: [
          ("r100", Self.step(rate: 100, p99: 2, updates: 1, cpu: 5, harness: 120, readers: (20, 97, 0.5))),
          ("r200", Self.step(rate: 200, p99: 2, updates: 1, cpu: 5, harness: 60, readers: (20, 40, 4))),
        ]))
    let data = try PlotData(reports: [threaded])
    let notes = PlotReport.notes(data)
    #expect(
      notes.contains(
        "harness-limited: redis at r100 (generator 20% of a core, lag p99 0.5 ms; busiest reader 97% of a core, "
          + "reader lag p99 0.5 ms), r200 (generator 20% of a core, lag p99 0.5 ms; busiest reader 40% of a core, "
          + "reader lag p99 4 ms, no harness thread busy: they waited for a core)"), "\(notes)")
    #expect(!notes.contains { $0.contains("pagesync at") })
    let page = PlotReport.html(data)
    #expect(page.contains("<th>busiest reader CPU %</th>"))
    #expect(page.contains("<td>97</td>"))
  }

  @Test func oneStepWithoutASweepIsOnePointPerSystem() throws {
    // B1's shape: the step's figures at the top level, the run's server CPU.
    let run = ReportValue.object([
      ("scenario", .string("B1")), ("target", .string("pagesync")), ("rate", .number(100)),
      (
        "delivery",
        .object([("updates_per_s", .number(99_000)), ("latency", .object([("p99_ms", .number(12))]))])
      ),
      ("server", .object([("cpu_pct", .number(33))])), ("ok", .bool(true)),
    ])
    let data = try PlotData(reports: [run])
    #expect(data.series.count == 1 && data.series[0].steps.count == 1)
    #expect(data.series[0].steps[0].serverCPUPercent == 33)
    let charts = PlotReport.charts(data)
    for chart in charts {
      let circles = Self.elements("circle", in: chart.svg())
      #expect(circles.count == 1, "\(chart.id)")
      // The one point is inside the plot, not on its edge or outside.
      let cx = Double(circles[0]["cx"]!)!
      #expect(cx > LineChart.left && cx < LineChart.width - LineChart.right)
    }
  }

  @Test func zeroAndHugeValuesAreLeftOutOrShownNeverMisplaced() throws {
    let run = Self.side(
      "pagesync",
      steps: [
        ("r100", Self.step(rate: 100, p99: 0, updates: 0, cpu: 0)),
        ("r1000", Self.step(rate: 1000, p99: 3e9, updates: 4e13, cpu: 950)),
      ])
    let charts = PlotReport.charts(try PlotData(reports: [run]))
    let p99 = try #require(charts.first { $0.id == "p99" }).svg()
    #expect(Self.elements("circle", in: p99).map { $0["data-y"] } == ["3000000000"])
    #expect(p99.contains("1 point at 0 or below not shown (log scale)"))
    #expect(p99.contains(">1G</text>"))
    let throughput = try #require(charts.first { $0.id == "throughput" }).svg()
    #expect(throughput.contains(">1e13</text>"))
    // CPU is linear from 0: both points drawn, the axis reaching past 950%.
    let cpu = try #require(charts.first { $0.id == "server-cpu" }).svg()
    #expect(Self.elements("circle", in: cpu).count == 2)
    #expect(cpu.contains("data-value=\"1000\""))
    for svg in [p99, throughput, cpu] {
      for circle in Self.elements("circle", in: svg) {
        let cy = Double(circle["cy"]!)!
        #expect(cy >= LineChart.top - 0.01 && cy <= LineChart.height - LineChart.bottom + 0.01)
      }
    }
  }

  @Test func aMissingSideOrNoDataStillDraws() throws {
    let empty = ReportValue.object([("scenario", .string("W1")), ("ok", .bool(false))])
    let charts = PlotReport.charts(try PlotData(reports: [empty]))
    #expect(charts.count == 3)
    for chart in charts { #expect(chart.svg().contains(">no data</text>")) }
    #expect(throws: PlotData.ReadError.notAReport("report 1")) {
      try PlotData(reports: [.object([("rate", .int(1))])])
    }
    #expect(throws: PlotData.ReadError.noReports) { try PlotData(reports: []) }
    let b2 = ReportValue.object([("scenario", .string("B2"))])
    #expect(throws: PlotData.ReadError.mixedScenarios(["W1", "B2"])) { try PlotData(reports: [empty, b2]) }
  }

  @Test func runsOfOneSeriesAreMedianedAndLabelsAreSeriesOfTheirOwn() throws {
    func run(_ p99: Double, label: String) -> ReportValue {
      Self.side(
        "pagesync",
        steps: [("r100", Self.step(rate: 100, p99: p99, updates: 1, cpu: 1, distribution: [(50, p99 / 2)]))]
      ).labelled(label)
    }
    let data = try PlotData(reports: [
      run(1, label: "old"), run(5, label: "new"), run(3, label: "old"), run(8, label: "old"),
    ])
    #expect(data.series.map(\.name) == ["pagesync (old)", "pagesync (new)"])
    #expect(data.series[0].steps[0].p99Ms == 3)
    #expect(data.series[0].steps[0].runs == 3)
    #expect(data.series[0].steps[0].distribution == [.init(percentile: 50, ms: 1.5)])
    #expect(data.series[1].steps[0].p99Ms == 5)
    let chart = try #require(PlotReport.charts(data).first { $0.id == "p99" }).svg()
    // The second build is drawn dashed, in the same colour as its system.
    #expect(chart.contains("stroke-dasharray=\"6 4\""))
  }

  @Test func xLabelsNeitherOverlapNorPassTheEdge() throws {
    // Seven decades of percentiles: "99.99999%" at the right edge, labels ~70 px wide every ~77 px.
    let points = LatencyDistribution.percentiles(count: 10_000_000).map {
      LineChart.Point(x: 100 / (100 - $0), y: 1)
    }
    let chart = LineChart(
      id: "p", title: "t", x: .init("percentile", .logarithmic, ticks: .percentile),
      y: .init("ms", .logarithmic),
      series: [.init(name: "s", points: points, colour: 0)])
    let svg = chart.svg()
    var extents: [(Double, Double)] = []
    for tail in svg.split(separator: "<g class=\"tick x-tick\"").dropFirst() {
      let group = tail[..<tail.firstRange(of: "</g>")!.lowerBound]
      guard let text = Self.elements("text", in: String(group)).first, let x = Double(text["x"] ?? "") else {
        continue
      }
      let label = group.firstMatch(of: /<text [^>]*>([^<]*)</).map { String($0.1) } ?? ""
      let width = LineChart.textWidth(label)
      extents.append(text["text-anchor"] == "end" ? (x - width, x) : (x - width / 2, x + width / 2))
    }
    #expect(extents.count >= 5, "most decades labelled")
    for (before, after) in zip(extents, extents.dropFirst()) { #expect(after.0 > before.1, "\(extents)") }
    #expect(extents.allSatisfy { $0.1 <= LineChart.width })
  }
}
