/// The plots of a load run as one self-contained HTML page: inline SVG, an inline style sheet, no script and no
/// URL (nothing is fetched), so it opens from a file anywhere and can be attached to an issue as is.
///
/// The page: delivery p99 against the offered rate (each system a line; one point without a sweep), the latency
/// distribution of each step as a percentile curve (HdrHistogram's plot: 1/(1−p) on a log scale), throughput and
/// the server's CPU per step, a table of each system's steps, and the run's notes (load average, which side was
/// harness-limited and by what rule, the reports' own notes).
public enum PlotReport {
  /// The charts of `data`, in page order.
  public static func charts(_ data: PlotData) -> [LineChart] {
    let systems = distinct(data.series.map(\.system))
    let labels = distinct(data.series.map { $0.label ?? "" })
    func style(_ series: PlotData.Series) -> (colour: Int, dashed: Bool) {
      (systems.firstIndex(of: series.system) ?? 0, (labels.firstIndex(of: series.label ?? "") ?? 0) > 0)
    }
    let latency = data.latencyKind == "delivery" ? "delivery" : "answer"
    let rateAxis = LineChart.Axis("offered rate (batches/s)", .logarithmic)
    func perStep(_ figure: (PlotData.Step) -> Double?, unit: String) -> [LineChart.Series] {
      data.series.map { series in
        let points = series.steps.compactMap { step -> LineChart.Point? in
          guard let value = figure(step) else { return nil }
          return LineChart.Point(
            x: step.rate, y: value,
            note:
              "\(series.name) at \(PlotScale.label(step.rate)) batches/s: \(ReportValue.format(value)) \(unit)"
          )
        }
        let (colour, dashed) = style(series)
        return LineChart.Series(name: series.name, points: points, colour: colour, dashed: dashed)
      }
    }
    var charts = [
      LineChart(
        id: "p99", title: "\(data.scenario): \(latency) p99 by offered rate", x: rateAxis,
        y: LineChart.Axis("\(latency) latency p99 (ms)", .logarithmic),
        series: perStep(\.p99Ms, unit: "ms p99"),
        guides: data.p99LimitMs.map {
          [LineChart.Guide(y: $0, label: "p99 limit \(ReportValue.format($0)) ms")]
        }
          ?? []),
      LineChart(
        id: "throughput", title: "\(data.scenario): throughput by offered rate", x: rateAxis,
        y: LineChart.Axis(data.throughputKind, .logarithmic), series: perStep(\.throughput, unit: "/s")),
      LineChart(
        id: "server-cpu", title: "\(data.scenario): server CPU by offered rate", x: rateAxis,
        y: LineChart.Axis("server CPU (% of a core)", .linear), series: perStep(\.serverCPUPercent, unit: "%")
      ),
    ]
    // One percentile plot per offered rate, every system's curve on it.
    let rates = distinct(data.series.flatMap { $0.steps.map(\.rate) }).sorted()
    for rate in rates {
      let curves = data.series.map { series -> LineChart.Series in
        let step = series.steps.first { $0.rate == rate && !$0.distribution.isEmpty }
        let points = (step?.distribution ?? []).map { point in
          LineChart.Point(
            x: 100 / (100 - point.percentile), y: point.ms,
            note:
              "\(series.name): p\(ReportValue.format(point.percentile, places: 9)) = \(ReportValue.format(point.ms)) ms"
          )
        }
        let (colour, dashed) = style(series)
        return LineChart.Series(name: series.name, points: points, colour: colour, dashed: dashed)
      }
      guard curves.contains(where: { !$0.points.isEmpty }) else { continue }
      charts.append(
        LineChart(
          id: "percentiles-\(Int(rate))",
          title: "\(data.scenario): \(latency) latency by percentile at \(PlotScale.label(rate)) batches/s",
          x: LineChart.Axis("percentile", .logarithmic, ticks: .percentile),
          y: LineChart.Axis("\(latency) latency (ms)", .logarithmic), series: curves))
    }
    return charts
  }

  /// The notes: load average, the harness-limited verdict and its rule, correctness, the reports' notes.
  public static func notes(_ data: PlotData) -> [String] {
    var notes: [String] = []
    if let low = data.loadAverages.min(), let high = data.loadAverages.max() {
      let cores = data.cores.map { " on \($0) cores" } ?? ""
      notes.append(
        "1-minute load average at the start and end of the runs: \(ReportValue.format(low, places: 2))"
          + (high > low ? "–\(ReportValue.format(high, places: 2))" : "") + cores
          + (data.cores.map {
            high > Double($0) ? " (above the core count: other work competed for the CPUs)" : ""
          }
            ?? ""))
    }
    var limited: [String] = []
    for series in data.series {
      let steps = series.steps.filter { $0.harnessLimitedRuns > 0 }
      guard !steps.isEmpty else { continue }
      let list = steps.map { step in
        let name = step.name.isEmpty ? "\(PlotScale.label(step.rate)) batches/s" : step.name
        let runs = series.runs > 1 ? "\(step.harnessLimitedRuns) of \(step.runs) runs, " : ""
        let waited = step.harness.busyThread ? "" : ", no harness thread busy: they waited for a core"
        return "\(name) (\(runs)\(step.harness.summary)\(waited))"
      }
      limited.append("\(series.name) at \(list.joined(separator: ", "))")
    }
    notes.append(
      limited.isEmpty
        ? "harness-limited: no side, at no step"
        : "harness-limited: " + limited.joined(separator: "; "))
    notes.append("rule: " + PlotData.harnessRule)
    for series in data.series {
      notes.append("\(series.name): correct in \(series.correctRuns) of \(series.runs) runs")
      for note in series.notes { notes.append("\(series.name) report: \(note)") }
    }
    return notes
  }

  /// The whole page.
  public static func html(_ data: PlotData) -> String {
    let names = data.series.map(\.name).joined(separator: ", ")
    let title = "pagesync-load \(data.scenario): \(names)"
    var page = Markup()
    page.append(markup: "<!DOCTYPE html>\n")
    page.open("html", [("lang", "en")])
    page.open("head")
    page.empty("meta", [("charset", "utf-8")])
    page.element("title", text: title)
    page.element(
      "style",
      text: """
        body{font-family:sans-serif;margin:24px;color:#1f2328;background:#ffffff}
        .charts{display:flex;flex-wrap:wrap;gap:16px}
        svg.chart{border:1px solid #d0d7de}
        table{border-collapse:collapse;margin:8px 0 16px}
        th,td{padding:3px 10px;border-bottom:1px solid #d8dee4;text-align:right}
        th:first-child,td:first-child{text-align:left}
        """.split(separator: "\n").joined())
    page.close("head")
    page.open("body")
    page.element("h1", text: title)
    page.element(
      "p",
      text: data.runs == 1
        ? "One run. Every figure is the run's own."
        : "\(data.runs) reports; each point is the median across the runs that reached it.")
    page.open("section", [("class", "charts")])
    for chart in charts(data) { page.append(markup: chart.svg()) }
    page.close("section")
    page.element("h2", text: "Steps")
    for series in data.series {
      page.element("h3", text: series.name)
      page.open("table", [("data-series", series.name)])
      page.open("tr")
      for header in [
        "step", "offered/s", "runs", "\(data.latencyKind) p99 ms", data.throughputKind, "server CPU %",
        "harness CPU %", "lag p99 ms", "generator thread CPU %", "busiest reader CPU %", "reader lag p99 ms",
        "harness-limited",
      ] { page.element("th", text: header) }
      page.close("tr")
      for step in series.steps {
        page.open("tr")
        func cell(_ value: Double?, places: Int = 3) -> String {
          value.map { ReportValue.format($0, places: places) } ?? "-"
        }
        let limited = step.harnessLimitedRuns == 0 ? "no" : "yes (\(step.harnessLimitedRuns) of \(step.runs))"
        let cells: [String] = [
          step.name.isEmpty ? "-" : step.name, ReportValue.format(step.rate), String(step.runs),
          cell(step.p99Ms),
          cell(step.throughput, places: 0), cell(step.serverCPUPercent, places: 1),
          cell(step.harnessCPUPercent, places: 1), cell(step.lagP99Ms),
          cell(step.generatorCPUPercent, places: 1),
          cell(step.busiestReaderCPUPercent, places: 1), cell(step.readerLagP99Ms), limited,
        ]
        for cell in cells { page.element("td", text: cell) }
        page.close("tr")
      }
      page.close("table")
    }
    page.element("h2", text: "Notes")
    page.open("ul", [("class", "notes")])
    for note in notes(data) { page.element("li", text: note) }
    page.close("ul")
    page.close("body")
    page.close("html")
    page.append(markup: "\n")
    return page.text
  }

  static func distinct<T: Equatable>(_ values: [T]) -> [T] {
    var seen: [T] = []
    for value in values where !seen.contains(value) { seen.append(value) }
    return seen
  }
}
