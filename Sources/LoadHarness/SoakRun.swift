import EventLoop
import LoadCore
import Web

/// Sizes of a soak (B7).
public struct SoakOptions: Sendable {
  /// The devices and their pages; `seconds` is the soak's length, `writers` the writer connections.
  public var density: DensityOptions = {
    var options = DensityOptions()
    options.pagesPerDevice = 100
    options.pool = 10_000
    options.seconds = 60
    return options
  }()
  /// Batches per second (one page change each), open loop, for the whole soak.
  public var writeRate = 100.0
  /// Percent of the devices that disconnect and come back per minute.
  public var churnPercentPerMinute = 10.0
  /// Seconds between two readings of the broker's RSS and descriptors.
  public var sampleSeconds = 1.0
  /// After the soak, how long the broker may take to hold exactly the harness's subscriptions.
  public var settleSeconds = 10.0

  public init() {}
}

/// B7: devices subscribed, a steady open-loop write rate, and churn: on a seeded schedule (`ChurnSchedule`) a
/// device drops its stream and comes back at once with a new one, subscribing its set again. The broker's RSS
/// and open descriptors (/proc/PID/fd) are sampled throughout; their slopes say whether they stay flat. At the
/// end the broker's `pagesync_broker_subscriptions` (GET /metrics) must equal the subscriptions the harness holds:
/// a dropped stream's subscriptions must all go.
///
/// Threading: the run's loop only.
final class SoakRun: ScenarioRun {
  private let loop: Loop
  private let endpoint: BrokerEndpoint
  private let options: SoakOptions
  private let layout: DensityLayout
  private let server: ServerProbe
  private let progress: ProgressLine
  private let nonce: String
  private let pages: RunPages
  private let writers: BrokerWriterPool
  private let churn: ChurnSchedule
  private var nextChurn = 0
  private var devices: [DeviceStream] = []
  /// Whether device i's current stream answered `subscribed`.
  private var subscribed: [Bool] = []
  private let metrics: BrokerMetricsReader
  private var tick: LoadTick?
  private var window: MeasurementWindow?
  private var rss = SampleSeries()
  private var descriptors = SampleSeries()
  private var brokerSeries = SampleSeries()
  private var ackLatency = LatencyRecorder()
  private var acked = 0
  private var failed = 0
  private var firstFailure: String?
  private var reconnects = 0
  private var skippedChurn = 0
  private var lostStreams = 0
  private var notifications = 0
  private var resubscribeLatency = LatencyRecorder()
  private var completion: ((Result<ReportValue, LoadError>) -> Void)?
  private var settling = false

  init(
    loop: Loop, endpoint: BrokerEndpoint, options: SoakOptions, layout: DensityLayout, server: ServerProbe,
    progress: ProgressLine, nonce: String, seed: UInt64
  ) {
    self.loop = loop
    self.endpoint = endpoint
    self.options = options
    self.layout = layout
    self.server = server
    self.progress = progress
    self.nonce = nonce
    pages = RunPages(prefix: "load-b7-\(nonce)", count: layout.pool)
    writers = BrokerWriterPool(endpoint: endpoint)
    metrics = BrokerMetricsReader(loop: loop, endpoint: endpoint)
    churn = ChurnSchedule(
      devices: layout.devices, percentPerMinute: options.churnPercentPerMinute,
      seconds: options.density.seconds,
      seed: seed)
  }

  private var startedAt: UInt64 { window?.startedAt ?? 0 }

  private var heldSubscriptions: Int { subscribed.filter { $0 }.count * layout.pagesPerDevice }

  func start(_ completion: @escaping (Result<ReportValue, LoadError>) -> Void) {
    self.completion = completion
    progress.update("pagesync B7: creating \(layout.pool) pages")
    writers.open(
      loop: loop, count: options.density.writers, clientPrefix: "load-\(nonce)-b7", creating: pages,
      title: "D"
    ) { [self] result in
      if case .failure(let error) = result { return finish(.failure(error)) }
      // Opened before the first descriptor count, so that the count does not grow by it afterwards.
      metrics.open { result in
        if case .failure(let error) = result { return self.finish(.failure(error)) }
        self.connectAll()
      }
    }
  }

  private func connectAll() {
    devices = (0..<layout.devices).map { _ in DeviceStream() }
    subscribed = Array(repeating: false, count: layout.devices)
    forEachConcurrently(
      layout.devices, concurrency: options.density.connectConcurrency,
      { [self] index, done in open(index, done) },
      onProgress: { [self] count in progress.update("pagesync B7: subscribed \(count)/\(layout.devices)") },
      then: { [self] result in
        if case .failure(let error) = result { return finish(.failure(error)) }
        soak()
      })
  }

  /// Opens device `index`'s stream (a new one) and subscribes its set.
  private func open(_ index: Int, _ done: @escaping (Result<Void, LoadError>) -> Void) {
    let device = DeviceStream(reporting: .entries { [weak self] _, _ in self?.notifications += 1 })
    devices[index] = device
    subscribed[index] = false
    // Weak: the device holds this closure (a strong capture kept every device alive past the run).
    device.onLost = { [weak self, weak device] reason in
      guard let self, let device, devices[index] === device else { return }
      lostStreams += 1
      subscribed[index] = false
      if firstFailure == nil { firstFailure = "device \(index) lost its stream: \(reason)" }
    }
    device.open(loop: loop, endpoint: endpoint, pages: layout.pages(of: index).map(pages.id)) {
      [self] result in
      if case .success = result, devices[index] === device { subscribed[index] = true }
      done(result)
    }
  }

  private func soak() {
    let window = MeasurementWindow(server: server)
    self.window = window
    sample(now: window.startedAt)
    let tick = LoadTick(
      schedule: OpenLoopSchedule(
        rate: options.writeRate, start: window.startedAt + 2_000_000,
        duration: UInt64(options.density.seconds * 1e9)))
    self.tick = tick
    var lastSample = window.startedAt
    let sampleEvery = UInt64(options.sampleSeconds * 1e9)
    tick.start(
      loop: loop,
      due: { [weak self] batch, scheduledAt in self?.send(batch: batch, scheduledAt: scheduledAt) },
      tick: { [weak self] now in
        guard let self, let tick = self.tick else { return }
        churnDue(now: now)
        if now - lastSample >= sampleEvery {
          lastSample = now
          sample(now: now)
        }
        if tick.isFinished, nextChurn == churn.events.count, acked + failed == tick.schedule?.total, !settling
        {
          settling = true
          settle(deadline: now + UInt64(options.settleSeconds * 1e9))
        }
      },
      everySecond: { [weak self] now in
        guard let self else { return }
        progress.update(
          "pagesync B7 \(Int(window.seconds(until: now)))s: acked \(acked) reconnects \(reconnects) "
            + "rss \(rss.last.map { Int($0) / 1_048_576 } ?? 0) MB fds \(descriptors.last.map { Int($0) } ?? 0)"
        )
      })
  }

  private func sample(now: UInt64) {
    // Also reads /metrics: the broker's subscriptions over time.
    if !metrics.isReading, !settling {
      metrics.read { [weak self] result in
        if case .success(let figures) = result, let count = figures.subscriptions, let self {
          brokerSeries.record(at: HostProcess.now() - startedAt, value: Double(count))
        }
      }
    }
    guard let pid = server.pid else { return }
    if let reading = server.sample() { rss.record(at: now - startedAt, value: Double(reading.residentBytes)) }
    if let count = Descriptors.openCount(pid: pid) {
      descriptors.record(at: now - startedAt, value: Double(count))
    }
  }

  private func send(batch: Int, scheduledAt: UInt64) {
    writers.update(page: pages.id(batch % layout.pool), batch: batch) { [weak self] result in
      guard let self else { return }
      let answeredAt = HostProcess.now()
      switch result {
      case .success:
        acked += 1
        ackLatency.record(nanoseconds: answeredAt - min(answeredAt, scheduledAt))
      case .failure(let error):
        failed += 1
        if firstFailure == nil { firstFailure = error.description }
      }
    }
  }

  private func churnDue(now: UInt64) {
    while nextChurn < churn.events.count, startedAt + churn.events[nextChurn].at <= now {
      let index = churn.events[nextChurn].device
      nextChurn += 1
      // A device still coming back from an earlier turn is left alone (counted).
      guard subscribed[index] else {
        skippedChurn += 1
        continue
      }
      reconnects += 1
      devices[index].drop()
      subscribed[index] = false
      let droppedAt = HostProcess.now()
      open(index) { [weak self] result in
        guard let self else { return }
        switch result {
        case .success: resubscribeLatency.record(nanoseconds: HostProcess.now() - droppedAt)
        case .failure(let error):
          failed += 1
          if firstFailure == nil { firstFailure = "device \(index) could not come back: \(error)" }
        }
      }
    }
  }

  /// After the soak: every device subscribed again, then /metrics polled until the broker holds exactly the
  /// harness's subscriptions and streams (or the deadline).
  private func settle(deadline: UInt64) {
    let settled = { [self] (figures: BrokerMetrics) in
      !subscribed.contains(false) && figures.subscriptions == heldSubscriptions
        && figures.deviceStreams == layout.devices
    }
    metrics.poll(every: 50, until: settled, deadline: deadline) { [self] result in
      switch result {
      case .failure(let error): finish(.failure(error))
      case .success(let figures): complete(metrics: figures)
      }
    }
  }

  private func complete(metrics figures: BrokerMetrics) {
    guard let tick, let window else { return }
    tick.close()
    let now = HostProcess.now()
    sample(now: now)
    let harnessCPU = window.harnessCPUPercent(now: now)
    let lag = tick.lag.summary
    let held = heldSubscriptions
    let brokerSubscriptions = figures.subscriptions ?? -1
    let leaked = brokerSubscriptions - held
    let descriptorsFlat = descriptors.first == descriptors.last
    var notes: [String] = []
    if leaked != 0 {
      notes.append(
        "the broker holds \(brokerSubscriptions) subscriptions, the harness \(held): \(leaked) leaked or lost"
      )
    }
    if figures.deviceStreams != layout.devices {
      notes.append(
        "the broker counts \(figures.deviceStreams ?? -1) device streams, the harness \(layout.devices)")
    }
    if !descriptorsFlat, server.pid != nil {
      notes.append(
        "the broker's open descriptors went from \(Int(descriptors.first ?? 0)) to \(Int(descriptors.last ?? 0))"
      )
    }
    if !GeneratorVerdict.keptSchedule(lagP99Ms: lag.p99) {
      notes.append("the generator fell behind its schedule (lag p99 \(ReportValue.number(lag.p99).json) ms)")
    }
    if harnessCPU >= GeneratorVerdict.busyHarnessPercent {
      notes.append("the harness used \(Int(harnessCPU))% of a core: it may be the bottleneck")
    }
    if failed > 0 || lostStreams > 0 {
      notes.append("\(failed) failures, \(lostStreams) streams lost: \(firstFailure ?? "")")
    }
    func series(_ values: SampleSeries, unit: String) -> ReportValue {
      .object([
        ("samples", .int(values.samples.count)), ("first_\(unit)", .number(values.first ?? 0)),
        ("last_\(unit)", .number(values.last ?? 0)), ("min_\(unit)", .number(values.minimum ?? 0)),
        ("max_\(unit)", .number(values.maximum ?? 0)),
        ("slope_\(unit)_per_min", .number(values.slopePerMinute)),
        ("later_half_slope_\(unit)_per_min", .number(values.laterHalfSlopePerMinute)),
      ])
    }
    let sampledSubscriptions = ReportValue.object([
      ("samples", .int(brokerSeries.samples.count)), ("metrics_reconnects", .int(metrics.reconnects)),
      ("min", .number(brokerSeries.minimum ?? 0)),
      ("max", .number(brokerSeries.maximum ?? 0)),
    ])
    let ok =
      leaked == 0 && figures.deviceStreams == layout.devices && failed == 0 && lostStreams == 0
      && (descriptorsFlat || server.pid == nil)
    let rssReport = series(rss, unit: "bytes")
    let fdsReport = series(descriptors, unit: "fds")
    let report = ReportValue.object(
      [
        ("scenario", .string("B7")), ("target", .string("pagesync")),
        ("devices", .int(layout.devices)), ("pages_per_device", .int(layout.pagesPerDevice)),
        ("page_pool", .int(layout.pool)), ("seconds", .number(options.density.seconds)),
        (
          "churn",
          .object([
            ("percent_per_min", .number(options.churnPercentPerMinute)),
            ("scheduled", .int(churn.events.count)),
            ("reconnects", .int(reconnects)), ("skipped", .int(skippedChurn)),
            ("lost_streams", .int(lostStreams)),
            ("resubscribe", resubscribeLatency.summary.reportValue),
          ])
        ),
        (
          "writes",
          .object([
            ("rate", .number(options.writeRate)), ("scheduled", .int(tick.schedule?.total ?? 0)),
            ("acked", .int(acked)),
            ("failed", .int(failed)), ("ack_latency", ackLatency.summary.reportValue),
            ("notifications", .int(notifications)),
          ])
        ),
        (
          "subscriptions",
          .object([
            ("harness", .int(held)), ("broker", .int(brokerSubscriptions)), ("leaked", .int(leaked)),
            ("broker_device_streams", .int(figures.deviceStreams ?? -1)),
          ])
        ),
        ("rss", rssReport), ("fds", fdsReport),
        ("broker_subscriptions_sampled", sampledSubscriptions),
        (
          "generator",
          .object([("lag_p99_ms", .number(lag.p99)), ("harness_cpu_pct", .number(harnessCPU))])
        ),
      ] + window.serverAndMachine(now: now) + verdict(ok: ok, notes: notes))
    finish(.success(report))
  }

  private func finish(_ result: Result<ReportValue, LoadError>) {
    guard let completion else { return }
    self.completion = nil
    tick?.close()
    tick = nil
    progress.clear()
    writers.close()
    metrics.close()
    for device in devices { device.drop() }
    completion(result)
  }
}
