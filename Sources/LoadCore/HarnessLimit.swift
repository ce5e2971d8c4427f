/// Whether the harness, not the server, may have set a step's figures: the one rule the reports, their notes and
/// the plots page apply. Every figure is measured during the step:
///
/// - the generator (the writers' schedule, on its own thread): its thread used `busyHarnessPercent` or more of a
///   core, or it fell behind its schedule (lag p99 above `keptScheduleMs`);
/// - the readers (the subscribers' sockets, on `--reader-threads` threads): the busiest reader thread used
///   `busyHarnessPercent` or more of a core, or frames waited in the harness (a reader's loop ran late: its lag
///   p99 above `keptScheduleMs`, so a delivery's latency includes that wait).
///
/// A report of the single-threaded harness has no thread figures: there the process's CPU
/// (`generator.harness_cpu_pct`) stands for the generator and the readers together.
public struct HarnessFigures: Sendable, Equatable {
  /// The generator thread's CPU, % of a core (`generator.thread_cpu_pct`).
  public var generatorCPUPercent: Double?
  /// The whole harness process's CPU, % of a core (`generator.harness_cpu_pct`).
  public var harnessCPUPercent: Double?
  /// The generator's lag p99 (`generator.lag_p99_ms`).
  public var lagP99Ms: Double?
  /// The busiest reader thread's CPU, % of a core (`readers.busiest_cpu_pct`).
  public var busiestReaderCPUPercent: Double?
  /// The readers' loop lag p99 (`readers.lag_p99_ms`): how late a reader got to what was waiting for it.
  public var readerLagP99Ms: Double?

  public init(
    generatorCPUPercent: Double? = nil, harnessCPUPercent: Double? = nil, lagP99Ms: Double? = nil,
    busiestReaderCPUPercent: Double? = nil, readerLagP99Ms: Double? = nil
  ) {
    self.generatorCPUPercent = generatorCPUPercent
    self.harnessCPUPercent = harnessCPUPercent
    self.lagP99Ms = lagP99Ms
    self.busiestReaderCPUPercent = busiestReaderCPUPercent
    self.readerLagP99Ms = readerLagP99Ms
  }

  /// The figures of a step object of a report (`generator`, `readers`).
  public init(step: ReportValue) {
    self.init(
      generatorCPUPercent: step["generator.thread_cpu_pct"]?.numeric,
      harnessCPUPercent: step["generator.harness_cpu_pct"]?.numeric,
      lagP99Ms: step["generator.lag_p99_ms"]?.numeric,
      busiestReaderCPUPercent: step["readers.busiest_cpu_pct"]?.numeric,
      readerLagP99Ms: step["readers.lag_p99_ms"]?.numeric)
  }

  /// What limited the step: `generator`, `readers`, both, or none (empty).
  public var limitedBy: [String] {
    let busy = GeneratorVerdict.busyHarnessPercent
    let late = { (lag: Double?) in !GeneratorVerdict.keptSchedule(lagP99Ms: lag ?? 0) }
    var by: [String] = []
    // The single-threaded harness read in the generator's thread: its process CPU stands for both.
    let generatorCPU = generatorCPUPercent ?? harnessCPUPercent ?? 0
    if generatorCPU >= busy || late(lagP99Ms) { by.append("generator") }
    if (busiestReaderCPUPercent ?? 0) >= busy || late(readerLagP99Ms) { by.append("readers") }
    return by
  }

  public var isLimited: Bool { !limitedBy.isEmpty }

  /// Whether a harness thread was busy (`busyHarnessPercent` or more of a core): the harness's own work limited
  /// it. A limited step without one fell behind while no thread of the harness was busy: its threads waited for
  /// a core the machine's other work held (a load average above the core count says so too).
  public var busyThread: Bool {
    let busy = GeneratorVerdict.busyHarnessPercent
    return (generatorCPUPercent ?? harnessCPUPercent ?? 0) >= busy || (busiestReaderCPUPercent ?? 0) >= busy
  }

  /// The rule in words, for the notes.
  public static var rule: String {
    let busy = ReportValue.format(GeneratorVerdict.busyHarnessPercent)
    let late = ReportValue.format(GeneratorVerdict.keptScheduleMs)
    return "a side is harness-limited at a step when the generator's thread used \(busy)% or more of a core "
      + "(generator.thread_cpu_pct; a single-threaded harness: generator.harness_cpu_pct) or the generator fell "
      + "behind its schedule (generator.lag_p99_ms above \(late) ms), or when the busiest reader thread used "
      + "\(busy)% or more of a core (readers.busiest_cpu_pct) or frames waited for a reader "
      + "(readers.lag_p99_ms above \(late) ms): there the figure may be the harness's, not the server's"
  }

  /// The figures in a few words, for a note: `generator 40% of a core, lag p99 0.1 ms; readers up to 97%, ...`.
  public var summary: String {
    var parts: [String] = []
    let generatorCPU = generatorCPUPercent ?? harnessCPUPercent ?? 0
    parts.append(
      "generator \(ReportValue.format(generatorCPU, places: 0))% of a core, lag p99 "
        + "\(ReportValue.format(lagP99Ms ?? 0)) ms")
    if let busiest = busiestReaderCPUPercent {
      parts.append(
        "busiest reader \(ReportValue.format(busiest, places: 0))% of a core, reader lag p99 "
          + "\(ReportValue.format(readerLagP99Ms ?? 0)) ms")
    }
    return parts.joined(separator: "; ")
  }

  /// The notes of a run's steps (one step named "" for a single-step run): which fell behind their schedule, and
  /// which were harness-limited, by what and with what figures.
  public static func notes(steps: [(name: String, figures: HarnessFigures)], target: String) -> [String] {
    var notes: [String] = []
    let behind = steps.filter { !GeneratorVerdict.keptSchedule(lagP99Ms: $0.figures.lagP99Ms ?? 0) }
    if let worst = behind.compactMap(\.figures.lagP99Ms).max() {
      let lag = "lag p99 up to \(ReportValue.number(worst).json) ms"
      let which =
        steps.count == 1
        ? " (\(lag))"
        : " in \(behind.count) of \(steps.count) steps (\(behind.map(\.name).joined(separator: ", ")); \(lag))"
      notes.append("the generator fell behind its schedule\(which): latencies include that lag")
    }
    let limited = steps.filter { $0.figures.isLimited }
    if !limited.isEmpty {
      let list = limited.map { step in
        let at = step.name.isEmpty ? "" : "\(step.name): "
        let waited = step.figures.busyThread ? "" : ", no harness thread busy: they waited for a core"
        return "\(at)\(step.figures.limitedBy.joined(separator: " and ")) (\(step.figures.summary)\(waited))"
      }
      notes.append(
        "harness-limited: " + list.joined(separator: "; ")
          + " — there the figures may be the harness's, not the \(target) server's")
    }
    return notes
  }
}
