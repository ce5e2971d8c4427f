import EventLoop
import LoadCore
import SeededRandom
import Web

/// Sizes of a reconnect storm (B4).
public struct ReconnectOptions: Sendable {
  /// The devices and their pages (`devices`, `pagesPerDevice`, `pool`, `connectConcurrency` for the first
  /// connection); the write rate and drain are not used.
  public var density = DensityOptions()
  /// Percent of the pool changed while the devices are away.
  public var changedPercent = 1.0
  /// Devices returning at once (0: all of them together).
  public var stormConcurrency = 0

  public init() {}
}

/// B4: every device is connected and subscribed, knowing each page at its creation time; all drop at once; 1% of
/// the pages change; then every device returns at once and does what a daemon does: opens its stream and an HTTP
/// connection, subscribes its whole set, and once `subscribed`, sends one `POST /v1/catchup` with its time map.
/// Timed from the storm's start until the last device's catch-up answer; each answer must name exactly the
/// device's changed pages at their new times (missed: a changed page not named; needless: a page named that did
/// not change, a fetch the device would make for nothing).
///
/// Threading: the run's loop only.
final class ReconnectRun: ScenarioRun {
  private let loop: Loop
  private let endpoint: BrokerEndpoint
  private let options: ReconnectOptions
  private let layout: DensityLayout
  private let server: ServerProbe
  private let progress: ProgressLine
  private let nonce: String
  private let seed: UInt64
  private let pages: RunPages
  private let writers: BrokerWriterPool
  private var created: [UInt64] = []
  private var epoch = ""
  private var changed: [Int: UInt64] = [:]
  private var devices: [DeviceStream] = []
  private var connections: [HTTPClientConnection] = []
  private let metrics: BrokerMetricsReader
  private var completion: ((Result<ReportValue, LoadError>) -> Void)?

  init(
    loop: Loop, endpoint: BrokerEndpoint, options: ReconnectOptions, layout: DensityLayout,
    server: ServerProbe,
    progress: ProgressLine, nonce: String, seed: UInt64
  ) {
    self.loop = loop
    self.endpoint = endpoint
    self.options = options
    self.layout = layout
    self.server = server
    self.progress = progress
    self.nonce = nonce
    self.seed = seed
    pages = RunPages(prefix: "load-b4-\(nonce)", count: layout.pool)
    writers = BrokerWriterPool(endpoint: endpoint)
    metrics = BrokerMetricsReader(loop: loop, endpoint: endpoint)
  }

  func start(_ completion: @escaping (Result<ReportValue, LoadError>) -> Void) {
    self.completion = completion
    progress.update("pagesync B4: creating \(layout.pool) pages")
    writers.open(loop: loop, count: 1, clientPrefix: "load-\(nonce)-b4", creating: pages, title: "D") {
      [self] result in
      switch result {
      case .failure(let error): finish(.failure(error))
      case .success(let (times, epoch)):
        created = times
        self.epoch = epoch
        // Opened ahead: a broker that refuses it fails the run before any device connects.
        metrics.open { result in
          if case .failure(let error) = result { return self.finish(.failure(error)) }
          self.connectFirstTime()
        }
      }
    }
  }

  /// The state before the storm: every device connected and subscribed.
  private func connectFirstTime() {
    let first = (0..<layout.devices).map { _ in DeviceStream() }
    forEachConcurrently(
      layout.devices, concurrency: options.density.connectConcurrency,
      { [self] index, done in
        first[index].open(loop: loop, endpoint: endpoint, pages: layout.pages(of: index).map(pages.id), done)
      },
      onProgress: { [self] count in progress.update("pagesync B4: subscribed \(count)/\(layout.devices)") },
      then: { [self] result in
        if case .failure(let error) = result { return finish(.failure(error)) }
        // Every device loses its network at once.
        for device in first { device.drop() }
        // The changes start once the broker noticed the drops (or after 30 s).
        metrics.poll(
          every: 20, until: { $0.subscriptions == 0 }, deadline: HostProcess.now() + 30_000_000_000
        ) { [self] result in
          if case .failure(let error) = result { return finish(.failure(error)) }
          changeWhileAway()
        }
      })
  }

  /// While the devices are away, `changedPercent` of the pool changes (pages chosen by the seed).
  private func changeWhileAway() {
    var generator = SplitMix64(seed: seed)
    let count = min(layout.pool, Int((Double(layout.pool) * options.changedPercent / 100).rounded()))
    let chosen = generator.choose(count, of: layout.pool)
    let edits = chosen.map {
      MutationFields.setTitle(page: pages.id($0), time: writers.nextTime(), title: "away")
    }
    BatchChunks.send(edits, chunk: 1000, through: writers) { [self] result in
      switch result {
      case .failure(let error): finish(.failure(error))
      case .success(let answer):
        for page in chosen {
          guard let time = answer.pages[pages.id(page)] else {
            return finish(.failure(.setupFailed("the edits did not change page \(page)")))
          }
          changed[page] = time
        }
        storm()
      }
    }
  }

  private var restoredLatency = LatencyRecorder()
  private var resubscribedLatency = LatencyRecorder()
  private var missed = 0
  private var needless = 0
  private var wrongTime = 0
  private var gone = 0
  private var expectedChanged = 0
  private var reportedChanged = 0
  private var exactDevices = 0
  private var lastResubscribedAt: UInt64 = 0
  private var catchUpBytes = 0
  /// The harness's TLS handshakes when the storm began (`--tls`).
  private var handshakesBeforeStorm = TLSHandshakeTally()

  /// Every device returns; each subscribes, then catches up, on connections of its own.
  private func storm() {
    let messages = (0..<layout.devices).map {
      DeviceStream.subscribeMessage(layout.pages(of: $0).map(pages.id))
    }
    let maps = (0..<layout.devices).map { device in
      CatchUp.requestBody(epoch: epoch, times: layout.pages(of: device).map { (pages.id($0), created[$0]) })
    }
    devices = (0..<layout.devices).map { _ in DeviceStream() }
    connections = []
    let window = MeasurementWindow(server: server)
    let startedAt = window.startedAt
    handshakesBeforeStorm = endpoint.tls?.handshakes ?? TLSHandshakeTally()
    forEachConcurrently(
      layout.devices, concurrency: options.stormConcurrency,
      { [self] index, done in
        returnDevice(index, message: messages[index], map: maps[index], startedAt: startedAt, done)
      },
      onProgress: { [self] count in progress.update("pagesync B4: restored \(count)/\(layout.devices)") },
      then: { [self] result in
        if case .failure(let error) = result { return finish(.failure(error)) }
        finish(.success(report(window: window, doneAt: HostProcess.now())))
      })
  }

  private func report(window: MeasurementWindow, doneAt: UInt64) -> ReportValue {
    let startedAt = window.startedAt
    let ok = missed == 0 && needless == 0 && wrongTime == 0 && gone == 0 && exactDevices == layout.devices
    var notes: [String] = []
    if !ok {
      notes.append(
        "\(layout.devices - exactDevices) devices were told something else than their changed pages: "
          + "\(missed) missed, \(needless) needless, \(wrongTime) at a wrong time, \(gone) gone")
    }
    let harnessCPU = window.harnessCPUPercent(now: doneAt)
    if harnessCPU >= GeneratorVerdict.busyHarnessPercent {
      notes.append("the harness used \(Int(harnessCPU))% of a core: it may be the bottleneck")
    }
    func ms(_ from: UInt64, _ to: UInt64) -> ReportValue { .number(Double(to - min(to, from)) / 1e6) }
    return ReportValue.object(
      [
        ("scenario", .string("B4")), ("target", .string("pagesync")),
        ("devices", .int(layout.devices)), ("pages_per_device", .int(layout.pagesPerDevice)),
        ("page_pool", .int(layout.pool)), ("subscriptions", .int(layout.subscriptions)),
        ("changed_pages", .int(changed.count)), ("storm_concurrency", .int(options.stormConcurrency)),
        (
          "time",
          .object([
            ("all_resubscribed_ms", ms(startedAt, lastResubscribedAt)),
            ("all_restored_ms", ms(startedAt, doneAt)),
            ("resubscribed", resubscribedLatency.summary.reportValue),
            ("restored", restoredLatency.summary.reportValue),
          ])
        ),
        (
          "catchup",
          .object([
            ("requests", .int(layout.devices)), ("expected_changed", .int(expectedChanged)),
            ("reported_changed", .int(reportedChanged)), ("missed", .int(missed)),
            ("needless", .int(needless)),
            ("wrong_time", .int(wrongTime)), ("gone", .int(gone)), ("exact_devices", .int(exactDevices)),
          ])
        ),
        ("harness_cpu_pct", .number(harnessCPU)),
      ] + stormTLS(at: doneAt) + window.serverAndMachine(now: doneAt) + [
        (
          "wire",
          .object([
            ("stream_bytes", .int(devices.reduce(0) { $0 + $1.bytesSent + $1.bytesReceived })),
            ("catchup_bytes", .int(catchUpBytes)),
          ])
        )
      ] + verdict(ok: ok, notes: notes))
  }

  /// `--tls`: the storm's handshakes (a stream and a catch-up connection per device) and how many resumed a
  /// session from before the drop instead of paying a full handshake.
  private func stormTLS(at: UInt64) -> [(String, ReportValue)] {
    guard let now = endpoint.tls?.handshakes else { return [] }
    return [
      (
        "storm_tls",
        .object([
          ("handshakes", .int(now.completed - handshakesBeforeStorm.completed)),
          ("resumed", .int(now.resumed - handshakesBeforeStorm.resumed)),
        ])
      )
    ]
  }

  /// One device's return: stream and HTTP connection opened together, subscribe, then catch up.
  private func returnDevice(
    _ index: Int, message: String, map: String, startedAt: UInt64,
    _ done: @escaping (Result<Void, LoadError>) -> Void
  ) {
    var http: HTTPClientConnection?
    var subscribed = false
    func catchUpWhenReady() {
      guard subscribed, let http else { return }
      endpoint.post(http, "/v1/catchup", body: map) { [self] result in
        switch result {
        case .failure(let error): done(.failure(error))
        case .success(let object):
          let now = HostProcess.now()
          restoredLatency.record(nanoseconds: now - startedAt)
          catchUpBytes += http.bytesRead + http.bytesWritten
          let answer = CatchUp.Answer(object)
          var expected: [String: UInt64] = [:]
          for page in layout.pages(of: index) {
            if let time = changed[page] { expected[pages.id(page)] = time }
          }
          let check = CatchUpCheck(expected: expected, reported: answer.changed)
          missed += check.missing
          needless += check.needless
          wrongTime += check.wrongTime
          gone += answer.gone
          expectedChanged += expected.count
          reportedChanged += answer.changed.count
          if answer.isExact(check) { exactDevices += 1 }
          http.close()
          done(.success(()))
        }
      }
    }
    endpoint.connectHTTP(loop: loop) { [self] result in
      switch result {
      case .failure(let error): done(.failure(.connectFailed("catch-up connection: \(error)")))
      case .success(let connection):
        connections.append(connection)
        http = connection
        catchUpWhenReady()
      }
    }
    let device = devices[index]
    device.connect(loop: loop, endpoint: endpoint) { [self] result in
      if case .failure(let error) = result { return done(.failure(error)) }
      device.subscribe(message: message) { result in
        if case .failure(let error) = result { return done(.failure(error)) }
        let now = HostProcess.now()
        self.resubscribedLatency.record(nanoseconds: now - startedAt)
        self.lastResubscribedAt = max(self.lastResubscribedAt, now)
        subscribed = true
        catchUpWhenReady()
      }
    }
  }

  private func finish(_ result: Result<ReportValue, LoadError>) {
    guard let completion else { return }
    self.completion = nil
    progress.clear()
    writers.close()
    metrics.close()
    for device in devices { device.drop() }
    for connection in connections { connection.close() }
    completion(result)
  }
}
