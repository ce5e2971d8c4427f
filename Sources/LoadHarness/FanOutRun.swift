import EventLoop
import LoadCore

/// Sizes of a fan-out run (B1, B2, B5).
public struct FanOutOptions: Sendable {
  public var subscribers = 1000
  /// Pages the subscribers spread over: subscriber `i` watches page `i % pages`, batch `k` updates page
  /// `k % pages` (B1: 1; B2: one per subscriber).
  public var pages = 1
  /// Batches per second, open loop (the one rate of a single-step run).
  public var rate = 1000.0
  /// Seconds of writing per step.
  public var seconds = 10.0
  /// Writer connections (batches go to the one with the fewest in flight).
  public var writers = 4
  /// Subscriptions opened at once while connecting.
  public var connectConcurrency = 64
  /// How long after a step's last batch every subscriber may take to see the final state.
  public var drainSeconds = 10.0
  /// B2: rising rates from `rate` (× `factor` per step, up to `maximumRate`) until the target stops keeping up.
  public var rising = false
  public var factor = 2.0
  public var maximumRate = 64_000.0
  /// Threads reading the subscribers' sockets (`ReaderPool`), the same for every target; the writers' schedule
  /// keeps the run's loop to itself.
  public var readerThreads = ReaderSplit.defaultThreads(cores: HostProcess.cores)

  public init() {}
}

/// The fan-out generator, the same code against every target: subscribers first, then one or more steps of an
/// open-loop writer, each followed by a drain until every subscriber knows the final state of its page (or the
/// drain bound passes, and the step says who did not).
///
/// Steps: one (B1), rising rates until the target stops keeping up (B2, `RateSteps`), or fixed phases with a hook
/// before each (B5: the same rate without and with a slow device).
///
/// States: preparing → connecting (`ConnectionWaves`) → [hook → writing (`LoadTick`) → draining (a 10 ms check of
/// the ledger)]… → after-steps hook → done.
///
/// Threading: the run's loop only.
final class FanOutRun: ScenarioRun {
  /// What a step measured, for the report and for B5's comparison of phases.
  struct Step {
    var name: String
    var result: RateSteps.StepResult
    var latency: LatencySummary
    /// The server's RSS through the step (its drain included).
    var rss: MemorySeries
    var fields: [(String, ReportValue)]
    var notes: [String]
    /// The generator's own notes (lag, harness CPU), kept apart: a multi-step report summarizes them.
    var generatorNotes: [String]
    var lagP99Ms: Double
    var harnessCPUPercent: Double
    /// What the generator and the readers measured, for the harness-limited rule.
    var harness: HarnessFigures
    /// The server's CPU over the step and its drain (`{"measured": false}` for a server the harness did not
    /// start): a multi-step report gives it per step.
    var server: ReportValue
    var ok: Bool
  }

  /// How the steps follow each other.
  enum Stepping {
    /// Named steps at fixed rates (B1: one; B5: two).
    case fixed([(name: String, rate: Double)])
    /// Rising until saturation (B2).
    case rising(RateSteps)
  }

  private let loop: Loop
  private let target: FanOutTarget
  private let options: FanOutOptions
  private let scenario: String
  private let server: ServerProbe
  private let progress: ProgressLine
  private var stepping: Stepping
  /// Runs before step `index` (B5 opens and stalls its slow device before the second).
  var beforeStep: ((Int, @escaping (Result<Void, LoadError>) -> Void) -> Void)?
  /// Runs after the last step, before the report (B5 lets its slow device read again).
  var afterSteps: ((@escaping () -> Void) -> Void)?
  /// More report fields, whether they are correct, and notes (B5's slow device).
  var extraReport: (() -> (fields: [(String, ReportValue)], ok: Bool, notes: [String]))?

  private(set) var steps: [Step] = []
  private var readers: ReaderPool?
  /// The newest acknowledged token of each channel in the current step.
  private var finalTokens: [UInt64]
  private var tick: LoadTick?
  private var window: MeasurementWindow?
  private var runWindow: MeasurementWindow?
  private var stepRate = 0.0
  private var stepName = ""
  private var ackLatency = LatencyRecorder()
  private var acked = 0
  private var unchanged = 0
  private var failed = 0
  private var firstFailure: String?
  private var nextBatch = 0
  private var firstAckAt: UInt64 = 0
  private var lastAckAt: UInt64 = 0
  private var drainDeadline: UInt64?
  private var lastDrainCheck: UInt64 = 0
  private var lastServerSample: UInt64 = 0
  private var rss = MemorySeries()
  private var completion: ((Result<ReportValue, LoadError>) -> Void)?

  init(
    loop: Loop, target: FanOutTarget, options: FanOutOptions, scenario: String, stepping: Stepping,
    server: ServerProbe, progress: ProgressLine
  ) {
    self.loop = loop
    self.target = target
    self.options = options
    self.scenario = scenario
    self.stepping = stepping
    self.server = server
    self.progress = progress
    finalTokens = Array(repeating: 0, count: target.channels)
  }

  /// B1 and B2's stepping from the options: one step at `rate`, or rising from it.
  static func stepping(for options: FanOutOptions) -> Stepping {
    options.rising
      ? .rising(RateSteps(start: options.rate, factor: options.factor, maximum: options.maximumRate))
      : .fixed([(name: "", rate: options.rate)])
  }

  func start(_ completion: @escaping (Result<ReportValue, LoadError>) -> Void) {
    self.completion = completion
    target.prepare { [self] result in
      if case .failure(let error) = result { return finish(.failure(error)) }
      let readers: ReaderPool
      do throws(LoadError) {
        readers = try ReaderPool(
          loop: loop,
          split: ReaderSplit(
            threads: options.readerThreads, subscribers: options.subscribers, channels: target.channels),
          mode: target.mode, source: target.subscriberSource)
      } catch {
        return finish(.failure(error))
      }
      self.readers = readers
      let waves = ConnectionWaves(
        count: options.subscribers,
        open: { index, done in readers.subscribe(index: index, done) },
        progress: { [self] connected in
          progress.update("\(target.label) \(scenario): subscribed \(connected)/\(options.subscribers)")
        })
      waves.start(concurrency: options.connectConcurrency) { [self] _, failure in
        _ = waves
        if let failure { return finish(.failure(failure)) }
        runWindow = MeasurementWindow(server: server)
        nextStep()
      }
    }
  }

  private var nextRate: (name: String, rate: Double)? {
    switch stepping {
    case .fixed(let list): steps.count < list.count ? list[steps.count] : nil
    case .rising(let rates): rates.nextRate.map { (name: "r\(Int($0))", rate: $0) }
    }
  }

  private func nextStep() {
    // Nil once the run finished (a failure in a hook, the watchdog): no step after that.
    guard completion != nil else { return }
    guard let (name, rate) = nextRate else {
      guard let afterSteps else { return complete() }
      return afterSteps { [weak self] in self?.complete() }
    }
    let begin = { [self] in startWriting(name: name, rate: rate) }
    guard let beforeStep else { return begin() }
    beforeStep(steps.count) { [weak self] result in
      guard let self else { return }
      if case .failure(let error) = result { return finish(.failure(error)) }
      begin()
    }
  }

  private func startWriting(name: String, rate: Double) {
    readers?.beginStep()
    finalTokens = Array(repeating: 0, count: target.channels)
    ackLatency = LatencyRecorder()
    (acked, unchanged, failed, firstFailure) = (0, 0, 0, nil)
    (firstAckAt, lastAckAt, drainDeadline, lastDrainCheck) = (0, 0, nil, 0)
    rss = MemorySeries()
    stepRate = rate
    stepName = name
    let window = MeasurementWindow(server: server)
    self.window = window
    // Start a little ahead so the first batch is not already late when the tick first runs.
    let tick = LoadTick(
      schedule: OpenLoopSchedule(
        rate: rate, start: window.startedAt + 2_000_000, duration: UInt64(options.seconds * 1e9)))
    self.tick = tick
    tick.start(
      loop: loop,
      due: { [weak self] _, scheduledAt in self?.send(scheduledAt: scheduledAt) },
      tick: { [weak self] now in self?.ticked(now: now) },
      everySecond: { [weak self] now in self?.report(name: name, now: now) })
  }

  private func send(scheduledAt: UInt64) {
    let batch = nextBatch
    nextBatch += 1
    let channel = batch % target.channels
    target.publish(batch: batch, channel: channel) { [weak self] result in
      guard let self else { return }
      let answeredAt = HostProcess.now()
      switch result {
      case .success(let token?):
        acked += 1
        if firstAckAt == 0 { firstAckAt = answeredAt }
        lastAckAt = answeredAt
        ackLatency.record(nanoseconds: answeredAt - min(answeredAt, scheduledAt))
        finalTokens[channel] = max(finalTokens[channel], token)
        readers?.acknowledged(token: token, scheduledAt: scheduledAt, channel: channel)
      case .success(nil):
        acked += 1
        unchanged += 1
        if firstAckAt == 0 { firstAckAt = answeredAt }
        lastAckAt = answeredAt
      case .failure(let error):
        failed += 1
        if firstFailure == nil { firstFailure = error.description }
      }
    }
  }

  private func ticked(now: UInt64) {
    readers?.flush()
    if server.pid != nil, now - lastServerSample >= 250_000_000, let sample = server.sample() {
      lastServerSample = now
      rss.record(at: now, bytes: sample.residentBytes)
    }
    guard let tick, tick.isFinished, let total = tick.schedule?.total else { return }
    // After the last batch: done once every batch is answered and every subscriber settled, or at the bound.
    let deadline = drainDeadline ?? now + UInt64(options.drainSeconds * 1e9)
    drainDeadline = deadline
    // The settled check walks every subscriber: every 10 ms is plenty.
    guard now - lastDrainCheck >= 10_000_000 || now >= deadline else { return }
    lastDrainCheck = now
    if (acked + failed == total && readers?.isSettled == true) || now >= deadline { stepDone(now: now) }
  }

  private func report(name: String, now: UInt64) {
    let elapsed = window.map { $0.seconds(until: now) } ?? 0
    let sent = tick?.schedule?.issued ?? 0
    let step = name.isEmpty ? "" : " \(name)"
    progress.update(
      "\(target.label) \(scenario)\(step) \(Int(elapsed))s: sent \(sent) acked \(acked) frames \(readers?.frames ?? 0) "
        + "lag p99 \(ReportValue.number(tick?.lag.summary.p99 ?? 0).json) ms")
  }

  private func stepDone(now: UInt64) {
    guard let tick, let window, let readers else { return }
    let reading = readers.endStep()
    let ledger = reading.tally
    let lastFrameAt = reading.lastFrameAt
    tick.close()
    self.tick = nil
    let total = tick.schedule?.total ?? 0
    let start = window.startedAt + 2_000_000
    func rate(_ count: Int, until end: UInt64) -> Double {
      Double(count) / max(options.seconds, Double(end - min(end, start)) / 1e9)
    }
    let lost = options.subscribers - ledger.completeSubscribers
    let settled = lost == 0 && acked + failed == total
    // Answers per second in steady state: from the first answer to the last, so that latency does not count as
    // lower throughput (a backlog does: it stretches the span).
    let answerSpan = Double(lastAckAt - min(lastAckAt, firstAckAt)) / 1e9
    let ackedPerSecond =
      acked >= 2 && answerSpan > 0 ? Double(acked - 1) / answerSpan : Double(acked) / options.seconds
    // Each update of a page reaches the subscribers of that page; counted in full only once every subscriber knows
    // its page's final time, otherwise by the share of subscribers that do.
    let perPage = Double(options.subscribers) / Double(target.channels)
    let share = Double(ledger.completeSubscribers) / Double(max(options.subscribers, 1))
    let updatesPerSecond =
      ackedPerSecond * Double(acked - unchanged) / Double(max(acked, 1)) * perPage * share
    let latency = ledger.latency.summary
    let result = RateSteps.StepResult(
      rate: stepRate, scheduled: total, acked: acked, ackedPerSecond: ackedPerSecond,
      deliveredPerSecond: updatesPerSecond, p99Ms: latency.p99, settled: settled)
    let harnessCPU = window.harnessCPUPercent(now: now)
    let harness = HarnessFigures(
      generatorCPUPercent: reading.generatorCPUPercent, harnessCPUPercent: harnessCPU,
      lagP99Ms: tick.lag.summary.p99, busiestReaderCPUPercent: reading.busiestCPUPercent,
      readerLagP99Ms: reading.lag.p99)
    let generator = MeasurementWindow.generatorSection(
      lag: tick.lag.summary, harnessCPUPercent: harnessCPU,
      keptSchedule: GeneratorVerdict.keptSchedule(lagP99Ms: tick.lag.summary.p99),
      threadCPUPercent: reading.generatorCPUPercent)
    var notes: [String] = []
    if lost > 0 {
      notes.append("\(lost) subscribers did not see the final state within \(options.drainSeconds) s")
    }
    if failed > 0 { notes.append("\(failed) batches failed: \(firstFailure ?? "")") }
    let fields: [(String, ReportValue)] = [
      (
        "batches",
        .object([
          ("scheduled", .int(total)), ("acked", .int(acked)), ("failed", .int(failed)),
          ("unchanged", .int(unchanged)), ("acked_per_s", .number(result.ackedPerSecond)),
          ("ack_latency", ackLatency.reportValue),
        ])
      ),
      (
        "delivery",
        .object([
          ("mode", .string(target.mode.rawValue)), ("frames", .int(ledger.frames)),
          ("frames_per_s", .number(rate(ledger.frames, until: lastFrameAt))),
          ("frames_per_subscriber", .number(Double(ledger.frames) / Double(max(options.subscribers, 1)))),
          ("updates_per_s", .number(updatesPerSecond)),
          ("complete_subscribers", .int(ledger.completeSubscribers)), ("lost_subscribers", .int(lost)),
          ("regressions", .int(ledger.regressions)), ("unmatched_frames", .int(ledger.unmatchedFrames)),
          ("latency", ledger.latency.reportValue),
        ])
      ),
      generator, reading.section,
      (
        "harness",
        .object([
          ("limited", .bool(harness.isLimited)), ("by", .string(harness.limitedBy.joined(separator: ", "))),
          ("busy_thread", .bool(harness.busyThread)),
        ])
      ),
      (
        "server_rss",
        .object([
          ("first_bytes", .int(rss.first)), ("peak_bytes", .int(rss.peak)), ("last_bytes", .int(rss.last)),
        ])
      ),
    ]
    let ok = lost == 0 && failed == 0 && ledger.unmatchedFrames == 0
    steps.append(
      Step(
        name: stepName, result: result, latency: latency, rss: rss, fields: fields, notes: notes,
        generatorNotes: HarnessFigures.notes(steps: [("", harness)], target: target.label),
        lagP99Ms: tick.lag.summary.p99, harnessCPUPercent: harnessCPU, harness: harness,
        server: server.report(
          before: window.serverBefore, after: server.sample(), wallSeconds: window.seconds(until: now)),
        ok: ok))
    if case .rising(var rates) = stepping {
      rates.record(result)
      stepping = .rising(rates)
    }
    nextStep()
  }

  /// The final time every subscriber of `channel` must see, in the last step (B5's slow device checks against it).
  func finalToken(of channel: Int) -> UInt64 { finalTokens[channel] }

  private func complete() {
    let now = HostProcess.now()
    guard let runWindow, let last = steps.last else {
      return finish(.failure(.setupFailed("the run ended without a step")))
    }
    let header: [(String, ReportValue)] = [
      ("scenario", .string(scenario)), ("target", .string(target.label)),
      ("subscribers", .int(options.subscribers)), ("pages", .int(target.channels)),
    ]
    let subscriberBytes = readers?.bytes() ?? (sent: 0, received: 0)
    let closing = runWindow.closingSections(
      now: now, bytesSent: target.bytesSent + subscriberBytes.sent,
      bytesReceived: target.bytesReceived + subscriberBytes.received)
    let extra = extraReport?() ?? (fields: [], ok: true, notes: [])
    var body: [(String, ReportValue)]
    var notes: [String]
    var ok: Bool
    switch stepping {
    case .fixed(let list) where list.count == 1:
      // One step: its figures at the top level (B1's shape).
      body =
        [
          ("rate", .number(last.result.rate)), ("seconds", .number(options.seconds)),
          ("writers", .int(options.writers)),
        ] + last.fields
      notes = last.generatorNotes + last.notes
      ok = last.ok
    case .fixed:
      body = [("seconds", .number(options.seconds)), ("writers", .int(options.writers))] + stepSections()
      notes = stepNotes()
      ok = steps.allSatisfy(\.ok)
    case .rising(let rates):
      body =
        [
          ("seconds", .number(options.seconds)), ("writers", .int(options.writers)),
          ("saturation", saturation(rates)),
        ] + stepSections()
      // A step that did not keep up is what a rising run looks for (the last one): its lost deliveries are the
      // backlog the drain bound cut off. Any earlier step must be correct.
      notes = stepNotes()
      ok = steps.dropLast().allSatisfy(\.ok) && (last.ok || !last.result.keptUp)
    }
    finish(
      .success(
        .object(
          header + body + extra.fields + closing + verdict(ok: ok && extra.ok, notes: notes + extra.notes))))
  }

  /// One generator note for all steps, then each step's own notes under its name.
  private func stepNotes() -> [String] {
    HarnessFigures.notes(steps: steps.map { ($0.name, $0.harness) }, target: target.label)
      + steps.flatMap { step in step.notes.map { "\(step.name): \($0)" } }
  }

  private func stepSections() -> [(String, ReportValue)] {
    [
      (
        "steps",
        .object(
          steps.map { step in
            (
              step.name,
              .object([("rate", .number(step.result.rate))] + step.fields + [("server", step.server)])
            )
          })
      )
    ]
  }

  private func saturation(_ rates: RateSteps) -> ReportValue {
    func figure(_ step: RateSteps.StepResult?) -> ReportValue { .number(step?.deliveredPerSecond ?? 0) }
    return .object([
      ("p99_limit_ms", .number(rates.p99LimitMs)),
      ("updates_per_s_at_p99_limit", figure(rates.atLatencyLimit)),
      ("rate_at_p99_limit", .number(rates.atLatencyLimit?.rate ?? 0)),
      ("updates_per_s_kept_up", figure(rates.lastKeptUp)),
      ("rate_kept_up", .number(rates.lastKeptUp?.rate ?? 0)),
      ("rate_not_kept_up", .number(rates.firstNotKeptUp?.rate ?? 0)),
      ("stopped_by", .string(rates.limit.rawValue)),
    ])
  }

  private func finish(_ result: Result<ReportValue, LoadError>) {
    guard let completion else { return }
    self.completion = nil
    tick?.close()
    tick = nil
    progress.clear()
    target.closeAll()
    readers?.close()
    completion(result)
  }
}
