import EventLoop
import LoadCore

#if canImport(Glibc)
  import Glibc
#endif

/// Sizes of an idle-density run (B6).
public struct IdleDensityOptions: Sendable {
  /// Device streams to open; nil: as many as the descriptor limit allows.
  public var connections: Int?
  /// Streams opened at once.
  public var concurrency = 64
  /// Seconds to wait with every stream open before the "after" RSS sample (the broker settles its buffers).
  public var settleSeconds = 2.0
  /// Descriptors kept free for the harness's own use (loop, pipes of the server, the metrics connection).
  public var reserve = 64
  /// What the target counts as met, bytes of broker RSS per idle connection.
  public var targetBytes = 8 * 1024.0

  public init() {}
}

/// B6: opens as many idle device streams as the budget allows (each subscribed to one page, then silent), and
/// measures the broker's RSS per connection: (RSS after − RSS before) / connections, "before" taken after a
/// warm-up tenth (at most 100) so that first-use allocations do not count as per-connection cost (the figure from
/// the broker's start is reported too). Checks that every stream is open and that the broker counts them
/// (`/metrics`), and says what limited the count.
///
/// Threading: the run's loop only.
final class IdleDensityRun: ScenarioRun {
  private let loop: Loop
  private let endpoint: BrokerEndpoint
  private let options: IdleDensityOptions
  private let budget: ConnectionBudget
  private let descriptorLimit: (soft: Int, hard: Int)
  private let server: ServerProbe
  private let progress: ProgressLine
  private let page: String
  private let metrics: BrokerMetricsReader
  private var devices: [DeviceStream] = []
  private var timer: LoopTimer?
  private var completion: ((Result<ReportValue, LoadError>) -> Void)?

  init(
    loop: Loop, endpoint: BrokerEndpoint, options: IdleDensityOptions, budget: ConnectionBudget,
    descriptorLimit: (soft: Int, hard: Int), server: ServerProbe, progress: ProgressLine, nonce: String
  ) {
    self.loop = loop
    self.endpoint = endpoint
    self.options = options
    self.budget = budget
    self.descriptorLimit = descriptorLimit
    self.server = server
    self.progress = progress
    page = "load-b6-\(nonce)"
    metrics = BrokerMetricsReader(loop: loop, endpoint: endpoint)
  }

  func start(_ completion: @escaping (Result<ReportValue, LoadError>) -> Void) {
    self.completion = completion
    let window = MeasurementWindow(server: server)
    devices.reserveCapacity(budget.connections)
    // A first tenth (at most 100) warms the broker up (first-use allocations: the store's read path, buffers);
    // the figure is the slope over the rest.
    let warmUp = min(100, budget.connections / 10)
    open(count: warmUp) { [self] warmed, failure in
      if let failure { return finish(.failure(failure)) }
      let baseline = server.sample()
      let harnessBaseline = HostProcess.sample(pid: getpid())
      open(count: budget.connections - warmed) { [self] opened, failure in
        let openedAt = HostProcess.now()
        progress.update("pagesync B6: \(warmed + opened) streams open, settling")
        let timer = LoopTimer(loop: loop)
        self.timer = timer
        timer.start(after: UInt64(options.settleSeconds * 1000)) { [self] in
          timer.close()
          self.timer = nil
          metrics.read { [self] reading in
            report(
              window: window, baseline: baseline, harnessBaseline: harnessBaseline, warmUp: warmed,
              opened: warmed + opened, failure: failure, openedAt: openedAt,
              counted: (try? reading.get())?.deviceStreams)
          }
        }
      }
    }
  }

  private func open(count: Int, _ done: @escaping (Int, LoadError?) -> Void) {
    let already = devices.count
    let waves = ConnectionWaves(
      count: count,
      open: { [self] _, done in
        let device = DeviceStream()
        devices.append(device)
        device.open(loop: loop, endpoint: endpoint, pages: [page], done)
      },
      progress: { [self] opened in
        progress.update("pagesync B6: \(already + opened)/\(budget.connections) streams open")
      })
    waves.start(concurrency: options.concurrency) { opened, failure in
      _ = waves
      done(opened, failure)
    }
  }

  private func report(
    window: MeasurementWindow, baseline: ProcessSample?, harnessBaseline: ProcessSample?, warmUp: Int,
    opened: Int, failure: LoadError?, openedAt: UInt64, counted: Int?
  ) {
    let now = HostProcess.now()
    let after = server.sample()
    let harnessAfter = HostProcess.sample(pid: getpid())
    let stillOpen = devices.filter(\.isOpen).count
    let broker = MemoryPerItem(
      beforeBytes: baseline?.residentBytes ?? 0, afterBytes: after?.residentBytes ?? 0, count: opened - warmUp
    )
    let fromStart = MemoryPerItem(
      beforeBytes: window.serverBefore?.residentBytes ?? 0, afterBytes: after?.residentBytes ?? 0,
      count: opened)
    let harness = MemoryPerItem(
      beforeBytes: harnessBaseline?.residentBytes ?? 0, afterBytes: harnessAfter?.residentBytes ?? 0,
      count: opened - warmUp)
    let limitedBy =
      if let failure { "connect failed after \(opened): \(failure)" } else { budget.limitedBy.rawValue }
    var notes: [String] = []
    if failure != nil { notes.append("stopped at the first connection that failed: \(limitedBy)") }
    if stillOpen != opened { notes.append("\(opened - stillOpen) streams closed while idle") }
    let measured = baseline != nil && after != nil
    if !measured { notes.append("the broker was not started by the harness: its memory is not measured") }
    let connectSeconds = Double(openedAt - window.startedAt) / 1e9
    let report = ReportValue.object(
      [
        ("scenario", .string("B6")), ("target", .string("pagesync")),
        ("connections_planned", .int(budget.connections)), ("connections_opened", .int(opened)),
        ("connections_open_at_end", .int(stillOpen)),
        ("broker_counted_streams", counted.map { .int($0) } ?? .string("unknown")),
        ("limited_by", .string(limitedBy)),
        (
          "fd_limit",
          .object([("soft", .int(descriptorLimit.soft)), ("hard", .int(descriptorLimit.hard))])
        ),
        ("connect_seconds", .number(connectSeconds)),
        ("connects_per_s", .number(Double(opened) / max(connectSeconds, 1e-9))),
        (
          "memory",
          .object([
            ("broker_rss_at_start_bytes", .int(fromStart.beforeBytes)),
            ("warm_up_connections", .int(warmUp)),
            ("broker_rss_before_bytes", .int(broker.beforeBytes)),
            ("broker_rss_after_bytes", .int(broker.afterBytes)),
            ("broker_bytes_per_connection", .number(broker.bytesPerItem)),
            ("broker_bytes_per_connection_from_start", .number(fromStart.bytesPerItem)),
            ("target_bytes_per_connection", .number(options.targetBytes)),
            ("meets_target", .bool(measured && broker.meets(targetBytes: options.targetBytes))),
            ("harness_bytes_per_connection", .number(harness.bytesPerItem)),
          ])
        ),
      ] + window.closingSections(now: now, bytesSent: bytesSent, bytesReceived: bytesReceived)
        + verdict(
          ok: failure == nil && opened == budget.connections && stillOpen == opened
            && (counted == nil || counted == opened),
          notes: notes))
    finish(.success(report))
  }

  private var bytesSent: Int { devices.reduce(0) { $0 + $1.bytesSent } }
  private var bytesReceived: Int { devices.reduce(0) { $0 + $1.bytesReceived } }

  private func finish(_ result: Result<ReportValue, LoadError>) {
    guard let completion else { return }
    self.completion = nil
    progress.clear()
    timer?.close()
    metrics.close()
    for device in devices { device.drop() }
    completion(result)
  }
}

/// The process's descriptor limit, raised to its hard limit (a child started afterwards, the broker, inherits it).
enum DescriptorLimit {
  static func raiseToHard() -> (soft: Int, hard: Int) {
    var limit = rlimit()
    guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 else { return (1024, 1024) }
    if limit.rlim_cur < limit.rlim_max {
      var raised = limit
      raised.rlim_cur = limit.rlim_max
      if setrlimit(Int32(RLIMIT_NOFILE.rawValue), &raised) == 0 { limit = raised }
    }
    func clamp(_ value: rlim_t) -> Int { value > rlim_t(Int32.max) ? Int(Int32.max) : Int(value) }
    return (clamp(limit.rlim_cur), clamp(limit.rlim_max))
  }
}
