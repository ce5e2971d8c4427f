/// What the plots of a report show, read from saved reports (`--json`): for each system (pagesync, redis; and
/// each build when the reports carry a `label`), its steps with the median of every figure across the runs.
///
/// A report is one system's (`run`) or both (`compare`: `pagesync` and `redis`); a rising run has `steps`
/// (`r100`, `r200`, ...), another is one step with its figures at the top. Latency is the delivery latency where
/// the scenario delivers (B1, B2, B3, B5), else the batches' answers (W1).
public struct PlotData: Sendable {
  /// One step of one system, as a median across the runs that reached it.
  public struct Step: Sendable {
    public var name: String
    /// Offered batches per second.
    public var rate: Double
    public var p99Ms: Double?
    /// Updates delivered per second (or mutations or batches answered per second where nothing is delivered).
    public var throughput: Double?
    public var serverCPUPercent: Double?
    public var harnessCPUPercent: Double?
    public var lagP99Ms: Double?
    /// The generator thread's CPU and the busiest reader thread's, % of a core, and the readers' lag p99 (nil
    /// for a report of the single-threaded harness).
    public var generatorCPUPercent: Double?
    public var busiestReaderCPUPercent: Double?
    public var readerLagP99Ms: Double?
    /// The latency distribution: at each percentile, the median across runs.
    public var distribution: [LatencyDistribution.Point]
    public var runs: Int
    /// Runs in which this step was harness-limited (`HarnessFigures.isLimited`).
    public var harnessLimitedRuns: Int

    /// The step's harness figures (medians), as the notes word them.
    public var harness: HarnessFigures {
      HarnessFigures(
        generatorCPUPercent: generatorCPUPercent, harnessCPUPercent: harnessCPUPercent, lagP99Ms: lagP99Ms,
        busiestReaderCPUPercent: busiestReaderCPUPercent, readerLagP99Ms: readerLagP99Ms)
    }
  }

  /// One system in one build.
  public struct Series: Sendable {
    /// `pagesync`, `redis` (or the report's `target`).
    public var system: String
    /// The build, from the reports' `label` (`--label`); nil when they have none.
    public var label: String?
    public var steps: [Step]
    public var runs: Int
    public var correctRuns: Int
    /// The reports' distinct notes.
    public var notes: [String]

    /// `pagesync`, or `pagesync (old)` with a label.
    public var name: String { label.map { "\(system) (\($0))" } ?? system }
  }

  /// Why saved reports cannot be plotted.
  public enum ReadError: Error, Equatable, CustomStringConvertible {
    /// Not a report of a load run (no `scenario`).
    case notAReport(String)
    /// Reports of several scenarios: one plot page shows one.
    case mixedScenarios([String])
    /// No report at all.
    case noReports

    public var description: String {
      switch self {
      case .notAReport(let what): "\(what) is not a pagesync-load report (no \"scenario\")"
      case .mixedScenarios(let names):
        "the reports are of several scenarios (\(names.joined(separator: ", "))): render one at a time"
      case .noReports: "no report to render"
      }
    }
  }

  public var scenario: String
  public var series: [Series]
  /// What the latency is: `delivery` or `ack`.
  public var latencyKind: String
  /// What `throughput` counts (`updates delivered/s`, ...).
  public var throughputKind: String
  /// The p99 limit a rising run reports (`saturation.p99_limit_ms`), drawn as a guide.
  public var p99LimitMs: Double?
  /// The 1-minute load averages at the start and end of every run.
  public var loadAverages: [Double]
  public var cores: Int?
  public var runs: Int

  /// The rule for "harness-limited", as the report states it (`HarnessFigures`): the generator's thread or the
  /// busiest reader thread used `busyHarnessPercent` or more of a core, or either fell behind (lag p99 above
  /// `keptScheduleMs`).
  public static var harnessRule: String { HarnessFigures.rule }

  /// The plot data of `reports` (one or more runs of one scenario, `run` or `compare`, any builds).
  public init(reports: [ReportValue]) throws(ReadError) {
    guard !reports.isEmpty else { throw .noReports }
    var scenarios: [String] = []
    // Each system's runs, by (system, label), in order of appearance.
    var groups: [(system: String, label: String?, runs: [ReportValue])] = []
    var loads: [Double] = []
    var cores: Int?
    for (index, report) in reports.enumerated() {
      guard let scenario = report["scenario"]?.string else { throw .notAReport("report \(index + 1)") }
      if !scenarios.contains(scenario) { scenarios.append(scenario) }
      let label = report["label"]?.string
      var sides: [(String, ReportValue)] = []
      if let ours = report["pagesync"], let theirs = report["redis"] {
        sides = [("pagesync", ours), ("redis", theirs)]
      } else {
        sides = [(report["target"]?.string ?? "pagesync", report)]
      }
      for (system, side) in sides {
        if let at = groups.firstIndex(where: { $0.system == system && $0.label == label }) {
          groups[at].runs.append(side)
        } else {
          groups.append((system, label, [side]))
        }
        for path in ["machine.loadavg_1m_start", "machine.loadavg_1m_end"] {
          if let value = side[path]?.numeric { loads.append(value) }
        }
        if cores == nil, let count = side["machine.cores"]?.numeric { cores = Int(count) }
      }
    }
    guard scenarios.count == 1 else { throw .mixedScenarios(scenarios) }
    scenario = scenarios[0]
    let first = groups[0].runs[0]
    let firstStep = PlotData.stepObjects(first).first?.1 ?? first
    latencyKind = firstStep["delivery.latency"] != nil ? "delivery" : "ack"
    throughputKind =
      firstStep["delivery.updates_per_s"] != nil
      ? "updates delivered/s"
      : firstStep["batches.mutations_per_s"] != nil ? "mutations/s" : "batches answered/s"
    p99LimitMs = first["saturation.p99_limit_ms"]?.numeric
    loadAverages = loads
    self.cores = cores
    runs = reports.count
    series = groups.map { group in
      PlotData.series(system: group.system, label: group.label, runs: group.runs)
    }
  }

  /// The named steps of one system's report: `steps` in order, or the whole report as one step named "".
  static func stepObjects(_ report: ReportValue) -> [(String, ReportValue)] {
    if case .object(let steps)? = report["steps"], !steps.isEmpty { return steps }
    return [("", report)]
  }

  /// One run's step, read.
  struct Sample {
    var name: String
    var rate: Double
    var p99Ms: Double?
    var throughput: Double?
    var serverCPUPercent: Double?
    var harnessCPUPercent: Double?
    var lagP99Ms: Double?
    var harness: HarnessFigures
    var distribution: [LatencyDistribution.Point]
  }

  static func samples(_ report: ReportValue) -> [Sample] {
    stepObjects(report).map { name, step in
      let latency = step["delivery.latency"] ?? step["batches.ack_latency"]
      let throughput =
        step["delivery.updates_per_s"] ?? step["batches.mutations_per_s"] ?? step["batches.acked_per_s"]
      // One step's server CPU is the run's (a single-step report has no per-step section).
      let cpu = step["server.cpu_pct"] ?? report["server.cpu_pct"]
      return Sample(
        name: name, rate: step["rate"]?.numeric ?? report["rate"]?.numeric ?? 0,
        p99Ms: latency?["p99_ms"]?.numeric, throughput: throughput?.numeric, serverCPUPercent: cpu?.numeric,
        harnessCPUPercent: step["generator.harness_cpu_pct"]?.numeric,
        lagP99Ms: step["generator.lag_p99_ms"]?.numeric, harness: HarnessFigures(step: step),
        distribution: latency?["distribution"].flatMap(LatencyDistribution.points) ?? [])
    }
  }

  static func series(system: String, label: String?, runs: [ReportValue]) -> Series {
    let all = runs.map(samples)
    // Steps by name in the order first seen (runs of a rising sweep reach different last steps).
    var names: [String] = []
    for run in all { for sample in run where !names.contains(sample.name) { names.append(sample.name) } }
    let steps = names.map { name -> Step in
      let reached = all.compactMap { run in run.first { $0.name == name } }
      func median(_ figure: (Sample) -> Double?) -> Double? { PlotData.median(reached.compactMap(figure)) }
      var percentiles: [Double] = []
      for sample in reached {
        for point in sample.distribution where !percentiles.contains(point.percentile) {
          percentiles.append(point.percentile)
        }
      }
      let distribution = percentiles.sorted().compactMap { percentile -> LatencyDistribution.Point? in
        let values = reached.compactMap { sample in
          sample.distribution.first { $0.percentile == percentile }?.ms
        }
        return PlotData.median(values).map { LatencyDistribution.Point(percentile: percentile, ms: $0) }
      }
      return Step(
        name: name, rate: median(\.rate) ?? 0, p99Ms: median(\.p99Ms), throughput: median(\.throughput),
        serverCPUPercent: median(\.serverCPUPercent), harnessCPUPercent: median(\.harnessCPUPercent),
        lagP99Ms: median(\.lagP99Ms), generatorCPUPercent: median(\.harness.generatorCPUPercent),
        busiestReaderCPUPercent: median(\.harness.busiestReaderCPUPercent),
        readerLagP99Ms: median(\.harness.readerLagP99Ms), distribution: distribution, runs: reached.count,
        harnessLimitedRuns: reached.filter(\.harness.isLimited).count)
    }
    var notes: [String] = []
    for run in runs {
      if let note = run["notes"]?.string, !note.isEmpty, !notes.contains(note) { notes.append(note) }
    }
    let correct = runs.filter { if case .bool(true)? = $0["ok"] { true } else { false } }.count
    return Series(
      system: system, label: label, steps: steps, runs: runs.count, correctRuns: correct, notes: notes)
  }

  /// The median (the mean of the middle two of an even count), nil for none. Non-finite values are ignored.
  static func median(_ values: [Double]) -> Double? {
    let sorted = values.filter(\.isFinite).sorted()
    guard !sorted.isEmpty else { return nil }
    let middle = sorted.count / 2
    return sorted.count % 2 == 1 ? sorted[middle] : (sorted[middle - 1] + sorted[middle]) / 2
  }
}
