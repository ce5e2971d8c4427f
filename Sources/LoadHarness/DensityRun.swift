import EventLoop
import LoadCore

/// Sizes of a density run (B3), shared by the reconnect storm (B4) and the soak (B7) for their device sets.
public struct DensityOptions: Sendable {
  /// Device streams.
  public var devices = 1000
  /// Pages each device subscribes to.
  public var pagesPerDevice = 1000
  /// Pages the devices draw from (`DensityLayout`); nil: `pagesPerDevice` (every device the same pages).
  public var pool: Int?
  /// Notifications per second to devices while writing (page changes × subscribers per page).
  public var updatesPerSecond = 50_000.0
  /// Seconds of writing.
  public var seconds = 10.0
  /// Writer connections, each a client of its own.
  public var writers = 4
  /// How long after the last batch every device may take to know every page's final time.
  public var drainSeconds = 10.0
  /// Device streams being opened at once.
  public var connectConcurrency = 64
  /// Seconds between the last `subscribed` answer and the RSS reading that memory per subscription uses.
  public var settleSeconds = 1.0

  public init() {}

  var layout: DensityLayout? {
    DensityLayout(devices: devices, pagesPerDevice: pagesPerDevice, pool: pool ?? pagesPerDevice)
  }
}

/// B3: `devices` streams connect, then all subscribe their `pagesPerDevice` pages at once (one frame each): the
/// bulk-subscribe rate (subscriptions until the last `subscribed` answer) and the broker's RSS growth per
/// subscription. Then an open-loop writer changes pages at the rate that gives `updatesPerSecond` notifications
/// (batch k changes pool page k mod pool), and each notification is timed from its batch's scheduled send; the
/// run drains until every device knows the final time of every changed page it subscribes to.
///
/// Threading: the run's loop only.
final class DensityRun: ScenarioRun {
  private let loop: Loop
  private let target: DensityTarget
  private let options: DensityOptions
  private let layout: DensityLayout
  private let server: ServerProbe
  private let progress: ProgressLine
  private var ledger: DensityLedger
  private var ackLatency = LatencyRecorder()
  private var acked = 0
  private var failed = 0
  private var firstFailure: String?
  private var tick: LoadTick?
  private var window: MeasurementWindow?
  private var completion: ((Result<ReportValue, LoadError>) -> Void)?
  private var subscribeFigures: [(String, ReportValue)] = []
  private var lastNotificationAt: UInt64 = 0

  init(
    loop: Loop, target: DensityTarget, options: DensityOptions, layout: DensityLayout, server: ServerProbe,
    progress: ProgressLine
  ) {
    self.loop = loop
    self.target = target
    self.options = options
    self.layout = layout
    self.server = server
    self.progress = progress
    ledger = DensityLedger(layout: layout)
  }

  func start(_ completion: @escaping (Result<ReportValue, LoadError>) -> Void) {
    self.completion = completion
    progress.update("\(target.label) B3: preparing \(layout.pool) pages")
    target.prepare { [self] result in
      if case .failure(let error) = result { return finish(.failure(error)) }
      connectDevices()
    }
  }

  private func connectDevices() {
    forEachConcurrently(
      layout.devices, concurrency: options.connectConcurrency,
      { [self] index, done in
        target.connect(
          device: index,
          onEntry: { [weak self] page, time in
            guard let self else { return }
            let now = HostProcess.now()
            lastNotificationAt = now
            ledger.received(device: index, page: page, token: time, at: now)
          }, done)
      },
      onProgress: { [self] count in
        progress.update("\(target.label) B3: connected \(count)/\(layout.devices)")
      },
      then: { [self] result in
        if case .failure(let error) = result { return finish(.failure(error)) }
        bulkSubscribe()
      })
  }

  /// Every device sends its whole set in one frame, in one loop turn; timed until the last answer.
  private func bulkSubscribe() {
    for device in 0..<layout.devices {
      target.prepareSubscribe(device: device, pages: layout.pages(of: device))
    }
    let rssBefore = server.sample()
    var answered = 0
    var added = 0
    var failedSubscribe: LoadError?
    let sentAt = HostProcess.now()
    for index in 0..<layout.devices {
      target.subscribe(device: index) { [self] result in
        switch result {
        case .failure(let error): failedSubscribe = failedSubscribe ?? error
        case .success(let count): added += count
        }
        answered += 1
        if answered % 100 == 0 {
          progress.update("\(target.label) B3: subscribed \(answered)/\(layout.devices)")
        }
        guard answered == layout.devices else { return }
        let answeredAt = HostProcess.now()
        if let failedSubscribe { return finish(.failure(failedSubscribe)) }
        // Let the broker finish what it does after answering before reading its memory.
        let settle = LoopTimer(loop: loop)
        settle.start(after: UInt64(options.settleSeconds * 1000)) { [self] in
          settle.close()
          let rssAfter = server.sample()
          recordSubscribe(
            sentAt: sentAt, answeredAt: answeredAt, added: added, before: rssBefore, after: rssAfter)
          startWriting()
        }
      }
    }
  }

  private func recordSubscribe(
    sentAt: UInt64, answeredAt: UInt64, added: Int, before: ProcessSample?, after: ProcessSample?
  ) {
    let elapsed = answeredAt - sentAt
    var fields: [(String, ReportValue)] = [
      ("subscriptions", .int(layout.subscriptions)), ("added", .int(added)),
      ("seconds", .number(Double(elapsed) / 1e9)),
      (
        "per_s",
        .number(
          DensityFigures.subscriptionsPerSecond(subscriptions: layout.subscriptions, nanoseconds: elapsed))
      ),
    ]
    if let before, let after {
      fields += [
        ("rss_before_bytes", .int(before.residentBytes)), ("rss_after_bytes", .int(after.residentBytes)),
        (
          "bytes_per_subscription",
          .number(
            DensityFigures.bytesPerSubscription(
              rssBefore: before.residentBytes, rssAfter: after.residentBytes,
              subscriptions: layout.subscriptions))
        ),
      ]
      // Over the subscribe and the settle: whether the server's CPU was the limit.
      fields.append(("server_cpu_seconds", .number(after.cpuSeconds - before.cpuSeconds)))
    }
    subscribeFigures = fields
  }

  private func startWriting() {
    let window = MeasurementWindow(server: server)
    self.window = window
    let tick = LoadTick(
      schedule: OpenLoopSchedule(
        rate: layout.pageChangesPerSecond(forUpdates: options.updatesPerSecond),
        start: window.startedAt + 2_000_000, duration: UInt64(options.seconds * 1e9)))
    self.tick = tick
    tick.start(
      loop: loop,
      due: { [weak self] batch, scheduledAt in self?.send(batch: batch, scheduledAt: scheduledAt) },
      tick: { [weak self] now in
        guard let self, let tick = self.tick, tick.isFinished, let total = tick.schedule?.total else {
          return
        }
        drain(now: now, allAnswered: acked + failed == total)
      },
      everySecond: { [weak self] now in
        guard let self, let tick = self.tick else { return }
        progress.update(
          "\(target.label) B3 \(Int(window.seconds(until: now)))s: sent \(tick.schedule?.issued ?? 0) "
            + "acked \(acked) notifications \(ledger.notifications) "
            + "lag p99 \(ReportValue.number(tick.lag.summary.p99).json) ms")
      })
  }

  private func send(batch: Int, scheduledAt: UInt64) {
    let page = batch % layout.pool
    target.publish(batch: batch, page: page) { [weak self] result in
      guard let self else { return }
      let answeredAt = HostProcess.now()
      switch result {
      case .success(let token):
        acked += 1
        ackLatency.record(nanoseconds: answeredAt - min(answeredAt, scheduledAt))
        if let token { ledger.acknowledged(token: token, page: page, scheduledAt: scheduledAt) }
      case .failure(let error):
        failed += 1
        if firstFailure == nil { firstFailure = error.description }
      }
    }
  }

  private var drainDeadline: UInt64?
  private var lastDrainCheck: UInt64 = 0

  private func drain(now: UInt64, allAnswered: Bool) {
    let deadline = drainDeadline ?? now + UInt64(options.drainSeconds * 1e9)
    drainDeadline = deadline
    // The check walks every subscription: every 100 ms is plenty.
    guard now - lastDrainCheck >= 100_000_000 || now >= deadline else { return }
    lastDrainCheck = now
    if (allAnswered && ledger.staleSubscriptions == 0) || now >= deadline { complete(now: now) }
  }

  private func complete(now: UInt64) {
    guard let tick, let window else { return }
    tick.close()
    let harnessCPU = window.harnessCPUPercent(now: now)
    let lagSummary = tick.lag.summary
    let keptSchedule = GeneratorVerdict.keptSchedule(lagP99Ms: lagSummary.p99)
    let stale = ledger.staleSubscriptions
    let complete = ledger.completeDevices
    let total = tick.schedule?.total ?? 0
    var notes: [String] = []
    if !keptSchedule {
      notes.append(
        "the generator fell behind its schedule (lag p99 \(ReportValue.number(lagSummary.p99).json) ms): "
          + "latencies include that lag")
    }
    if harnessCPU >= GeneratorVerdict.busyHarnessPercent {
      notes.append("the harness used \(Int(harnessCPU))% of a core: it may be the bottleneck")
    }
    if stale > 0 {
      notes.append(
        "\(layout.devices - complete) devices (\(stale) subscriptions) did not know a page's final time "
          + "\(options.drainSeconds) s after the last batch")
    }
    if failed > 0 { notes.append("\(failed) batches failed: \(firstFailure ?? "")") }
    let notifying = max(window.seconds(until: lastNotificationAt), 1e-9)
    let report = ReportValue.object(
      [
        ("scenario", .string("B3")), ("target", .string(target.label)),
        ("devices", .int(layout.devices)), ("pages_per_device", .int(layout.pagesPerDevice)),
        ("page_pool", .int(layout.pool)), ("subscriptions", .int(layout.subscriptions)),
        ("subscribe", .object(subscribeFigures)),
        (
          "writes",
          .object([
            ("updates_per_s_asked", .number(options.updatesPerSecond)),
            ("batches_per_s", .number(layout.pageChangesPerSecond(forUpdates: options.updatesPerSecond))),
            ("seconds", .number(options.seconds)), ("scheduled", .int(total)), ("acked", .int(acked)),
            ("failed", .int(failed)), ("ack_latency", ackLatency.reportValue),
          ])
        ),
        (
          "delivery",
          .object([
            ("notifications", .int(ledger.notifications)),
            ("notifications_per_s", .number(Double(ledger.notifications) / notifying)),
            ("complete_devices", .int(complete)), ("stale_subscriptions", .int(stale)),
            ("regressions", .int(ledger.regressions)), ("strays", .int(ledger.strays)),
            ("unmatched", .int(ledger.unmatchedNotifications)),
            ("latency", ledger.latency.reportValue),
          ])
        ),
        MeasurementWindow.generatorSection(
          lag: lagSummary, harnessCPUPercent: harnessCPU, keptSchedule: keptSchedule),
      ] + window.closingSections(now: now, bytesSent: target.bytesSent, bytesReceived: target.bytesReceived)
        + verdict(
          ok: stale == 0 && failed == 0 && ledger.unmatchedNotifications == 0 && ledger.strays == 0,
          notes: notes))
    finish(.success(report))
  }

  private func finish(_ result: Result<ReportValue, LoadError>) {
    guard let completion else { return }
    self.completion = nil
    tick?.close()
    tick = nil
    progress.clear()
    target.closeAll()
    completion(result)
  }
}
