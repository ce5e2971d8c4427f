import EventLoop
import LoadCore

/// Sizes of a fan-out run (B1).
public struct FanOutOptions: Sendable {
  public var subscribers = 1000
  /// Batches per second, open loop.
  public var rate = 1000.0
  public var seconds = 10.0
  /// Writer connections (batches go to the one with the fewest in flight).
  public var writers = 4
  /// Subscriptions opened at once while connecting.
  public var connectConcurrency = 64
  /// How long after the last batch every subscriber may take to see the final state.
  public var drainSeconds = 10.0

  public init() {}
}

/// The fan-out generator, the same code against every target: subscribers first, then an open-loop writer, then
/// a drain until every subscriber knows the final state (or the drain bound passes, and the run says who did not).
///
/// States: preparing → connecting (waves of `connectConcurrency`) → writing (a 1 ms tick sends every batch due)
/// → draining (a 10 ms check of the ledger) → done.
///
/// Threading: the run's loop only.
final class FanOutRun {
  private let loop: Loop
  private let target: FanOutTarget
  private let options: FanOutOptions
  private let server: ServerProbe
  private let progress: ProgressLine
  private var ledger: DeliveryLedger
  private var schedule: OpenLoopSchedule?
  private var lag = LatencyRecorder()
  private var ackLatency = LatencyRecorder()
  private var acked = 0
  private var unchanged = 0
  private var failed = 0
  private var firstFailure: String?
  private var connected = 0
  private var nextToConnect = 0
  private var lastFrameAt: UInt64 = 0
  private var tick: LoopTimer?
  private var completion: ((Result<ReportValue, LoadError>) -> Void)?
  private var finished = false

  init(loop: Loop, target: FanOutTarget, options: FanOutOptions, server: ServerProbe, progress: ProgressLine)
  {
    self.loop = loop
    self.target = target
    self.options = options
    self.server = server
    self.progress = progress
    ledger = DeliveryLedger(mode: target.mode, subscribers: options.subscribers)
  }

  func start(_ completion: @escaping (Result<ReportValue, LoadError>) -> Void) {
    self.completion = completion
    target.prepare { [self] result in
      if case .failure(let error) = result { return finish(.failure(error)) }
      for _ in 0..<min(options.connectConcurrency, options.subscribers) { connectNext() }
      if options.subscribers == 0 { startWriting() }
    }
  }

  private func connectNext() {
    guard nextToConnect < options.subscribers, !finished else { return }
    let index = nextToConnect
    nextToConnect += 1
    target.subscribe(
      index: index,
      onToken: { [weak self] token in
        guard let self else { return }
        let now = HostProcess.now()
        lastFrameAt = now
        ledger.received(subscriber: index, token: token, at: now)
      },
      { [self] result in
        if case .failure(let error) = result { return finish(.failure(error)) }
        connected += 1
        progress.update("\(target.label) B1: subscribed \(connected)/\(options.subscribers)")
        if connected == options.subscribers { startWriting() } else { connectNext() }
      })
  }

  private var startedAt: UInt64 = 0
  private var cpuBefore = 0.0
  private var serverBefore: ProcessSample?
  private var machine = MachineProbe()

  private func startWriting() {
    serverBefore = server.sample()
    machine = MachineProbe()
    cpuBefore = HostProcess.ownCPUSeconds()
    startedAt = HostProcess.now()
    // Start a little ahead so the first batch is not already late when the tick first runs.
    schedule = OpenLoopSchedule(
      rate: options.rate, start: startedAt + 2_000_000, duration: UInt64(options.seconds * 1e9))
    let timer = LoopTimer(loop: loop)
    tick = timer
    var lastProgress = startedAt
    timer.start(after: 1, repeatEvery: 1) { [weak self] in
      guard let self else { return }
      let now = HostProcess.now()
      sendDue(now: now)
      if now - lastProgress >= 1_000_000_000 {
        lastProgress = now
        report(now: now)
      }
    }
  }

  private func sendDue(now: UInt64) {
    guard var schedule else { return }
    let due = schedule.take(now: now)
    self.schedule = schedule
    for batch in due {
      let scheduledAt = schedule.scheduledTime(of: batch)
      lag.record(nanoseconds: now - min(now, scheduledAt))
      target.publish(batch: batch) { [weak self] result in
        guard let self else { return }
        let answeredAt = HostProcess.now()
        switch result {
        case .success(let token?):
          acked += 1
          ackLatency.record(nanoseconds: answeredAt - min(answeredAt, scheduledAt))
          ledger.acknowledged(token: token, scheduledAt: scheduledAt)
        case .success(nil):
          acked += 1
          unchanged += 1
        case .failure(let error):
          failed += 1
          if firstFailure == nil { firstFailure = error.description }
        }
      }
    }
    if schedule.isFinished { drain(now: now, allAnswered: acked + failed == schedule.total) }
  }

  private var drainDeadline: UInt64?
  private var lastDrainCheck: UInt64 = 0

  /// After the last batch: done once every batch is answered and every subscriber settled, or at the bound.
  private func drain(now: UInt64, allAnswered: Bool) {
    let deadline = drainDeadline ?? now + UInt64(options.drainSeconds * 1e9)
    drainDeadline = deadline
    // The settled check walks every subscriber: every 10 ms is plenty.
    guard now - lastDrainCheck >= 10_000_000 || now >= deadline else { return }
    lastDrainCheck = now
    if (allAnswered && ledger.isSettled) || now >= deadline { complete(now: now) }
  }

  private func report(now: UInt64) {
    let elapsed = Double(now - startedAt) / 1e9
    let sent = schedule?.issued ?? 0
    progress.update(
      "\(target.label) B1 \(Int(elapsed))s: sent \(sent) acked \(acked) frames \(ledger.frames) "
        + "lag p99 \(ReportValue.number(lag.summary.p99).json) ms")
  }

  private func complete(now: UInt64) {
    tick?.close()
    tick = nil
    let serverAfter = server.sample()
    let cpu = HostProcess.ownCPUSeconds() - cpuBefore
    let wall = Double(now - startedAt) / 1e9
    let writeWindow = options.seconds
    let deliveryWindow = max(Double(lastFrameAt > startedAt ? lastFrameAt - startedAt : 0) / 1e9, 1e-9)
    let lagSummary = lag.summary
    let harnessCPU = cpu / max(wall, 1e-9) * 100
    let keptSchedule = lagSummary.p99 <= 2
    var notes: [String] = []
    if !keptSchedule {
      notes.append(
        "the generator fell behind its schedule (lag p99 \(ReportValue.number(lagSummary.p99).json) ms): "
          + "latencies include that lag, and the offered rate was lower than asked")
    }
    if harnessCPU >= 85 {
      notes.append(
        "the harness used \(Int(harnessCPU))% of a core: it may be the bottleneck, not the \(target.label) server"
      )
    }
    let lost = options.subscribers - ledger.completeSubscribers
    if lost > 0 {
      notes.append("\(lost) subscribers did not see the final state within \(options.drainSeconds) s")
    }
    if failed > 0 { notes.append("\(failed) batches failed: \(firstFailure ?? "")") }
    let total = schedule?.total ?? 0
    let report = ReportValue.object([
      ("scenario", .string("B1")), ("target", .string(target.label)),
      ("subscribers", .int(options.subscribers)), ("rate", .number(options.rate)),
      ("seconds", .number(options.seconds)), ("writers", .int(options.writers)),
      (
        "batches",
        .object([
          ("scheduled", .int(total)), ("acked", .int(acked)), ("failed", .int(failed)),
          ("unchanged", .int(unchanged)), ("acked_per_s", .number(Double(acked) / writeWindow)),
          ("ack_latency", ackLatency.summary.reportValue),
        ])
      ),
      (
        "delivery",
        .object([
          ("mode", .string(ledger.mode.rawValue)), ("frames", .int(ledger.frames)),
          ("frames_per_s", .number(Double(ledger.frames) / deliveryWindow)),
          ("frames_per_subscriber", .number(Double(ledger.frames) / Double(max(options.subscribers, 1)))),
          ("complete_subscribers", .int(ledger.completeSubscribers)), ("lost_subscribers", .int(lost)),
          ("regressions", .int(ledger.regressions)), ("unmatched_frames", .int(ledger.unmatchedFrames)),
          ("latency", ledger.latency.summary.reportValue),
        ])
      ),
      (
        "generator",
        .object([
          ("lag_p99_ms", .number(lagSummary.p99)), ("lag_max_ms", .number(lagSummary.max)),
          ("kept_schedule", .bool(keptSchedule)), ("harness_cpu_pct", .number(harnessCPU)),
        ])
      ),
      ("server", server.report(before: serverBefore, after: serverAfter, wallSeconds: wall)),
      ("machine", machine.report),
      (
        "wire",
        .object([("bytes_sent", .int(target.bytesSent)), ("bytes_received", .int(target.bytesReceived))])
      ),
      ("ok", .bool(lost == 0 && failed == 0 && ledger.unmatchedFrames == 0)),
      ("notes", .string(notes.joined(separator: "; "))),
    ])
    finish(.success(report))
  }

  private func finish(_ result: Result<ReportValue, LoadError>) {
    guard !finished else { return }
    finished = true
    tick?.close()
    tick = nil
    progress.clear()
    target.closeAll()
    let completion = self.completion
    self.completion = nil
    completion?(result)
  }
}
