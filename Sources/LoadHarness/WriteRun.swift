import EventLoop
import LoadCore

/// Sizes of a durable-writes run (W1).
public struct WriteOptions: Sendable {
  /// Batches per second, open loop (ignored with `saturate`).
  public var rate = 1000.0
  /// set_title mutations per batch.
  public var batchSize = 10
  /// Pages the mutations spread over (created first).
  public var pages = 100
  public var seconds = 10.0
  /// Writer connections, each a client of its own.
  public var writers = 8
  /// Closed loop instead: every writer keeps `depth` batches in flight, as fast as the broker answers.
  public var saturate = false
  public var depth = 4

  public init() {}
}

/// W1: batches of set_title mutations posted at a fixed open-loop rate (ack latency from the scheduled send) or,
/// with `saturate`, as fast as answers come back (latency from the actual send: a closed loop has no schedule).
/// Every answer comes after the batch is durable (the broker's group commit), so this measures durable writes.
///
/// Threading: the run's loop only.
final class WriteRun: ScenarioRun {
  private let loop: Loop
  private let endpoint: BrokerEndpoint
  private let options: WriteOptions
  private let server: ServerProbe
  private let progress: ProgressLine
  private let nonce: String
  private let writers: BrokerWriterPool
  private let pages: RunPages
  private var tick: LoadTick?
  private var window: MeasurementWindow?
  private var ackLatency = LatencyRecorder()
  private var sent = 0
  private var acked = 0
  private var failed = 0
  private var rejected = 0
  private var firstFailure: String?
  private var endsAt: UInt64 = 0
  private var lastAnswerAt: UInt64 = 0
  private var nextPage = 0
  private var completion: ((Result<ReportValue, LoadError>) -> Void)?

  init(
    loop: Loop, endpoint: BrokerEndpoint, options: WriteOptions, server: ServerProbe, progress: ProgressLine,
    nonce: String
  ) {
    self.loop = loop
    self.endpoint = endpoint
    self.options = options
    self.server = server
    self.progress = progress
    self.nonce = nonce
    writers = BrokerWriterPool(endpoint: endpoint)
    pages = RunPages(prefix: "load-w1-\(nonce)", count: options.pages)
  }

  func start(_ completion: @escaping (Result<ReportValue, LoadError>) -> Void) {
    self.completion = completion
    writers.open(
      loop: loop, count: options.writers, clientPrefix: "load-\(nonce)-w1", creating: pages, title: "W1"
    ) { [self] result in
      if case .failure(let error) = result { return finish(.failure(error)) }
      startWriting()
    }
  }

  private func startWriting() {
    let window = MeasurementWindow(server: server)
    self.window = window
    endsAt = window.startedAt + UInt64(options.seconds * 1e9)
    let tick = LoadTick(
      schedule: options.saturate
        ? nil
        : OpenLoopSchedule(
          rate: options.rate, start: window.startedAt + 2_000_000, duration: endsAt - window.startedAt))
    self.tick = tick
    if options.saturate {
      for _ in 0..<(options.writers * options.depth) { sendClosedLoop() }
    }
    tick.start(
      loop: loop,
      due: { [weak self] _, scheduledAt in self?.send(measuredFrom: scheduledAt) },
      tick: { [weak self] now in
        guard let self else { return }
        let writingDone = options.saturate ? now >= endsAt : tick.isFinished
        if writingDone, acked + failed == sent { complete(now: now) }
      },
      everySecond: { [weak self] now in
        guard let self else { return }
        progress.update(
          "pagesync W1 \(Int(window.seconds(until: now)))s: sent \(sent) acked \(acked) "
            + "p99 \(ReportValue.number(ackLatency.summary.p99).json) ms")
      })
  }

  private func sendClosedLoop() {
    guard HostProcess.now() < endsAt else { return }
    send(measuredFrom: HostProcess.now()) { [weak self] in self?.sendClosedLoop() }
  }

  private func send(measuredFrom start: UInt64, then next: (() -> Void)? = nil) {
    let mutations = (0..<options.batchSize).map { _ in
      nextPage = (nextPage + 1) % options.pages
      return MutationFields.setTitle(page: pages.id(nextPage), time: writers.nextTime(), title: "w\(sent)")
    }
    sent += 1
    writers.send(mutations) { [weak self] result in
      guard let self else { return }
      let now = HostProcess.now()
      switch result {
      case .success(let answer):
        acked += 1
        rejected += answer.rejected
        lastAnswerAt = now
        ackLatency.record(nanoseconds: now - min(now, start))
      case .failure(let error):
        failed += 1
        if firstFailure == nil { firstFailure = error.description }
      }
      next?()
    }
  }

  private func complete(now: UInt64) {
    guard let window, let tick else { return }
    let elapsed = max(Double(lastAnswerAt - min(lastAnswerAt, window.startedAt)) / 1e9, 1e-9)
    let generator = window.generator(
      now: now, lag: options.saturate ? nil : tick.lag.summary, target: "pagesync",
      closedLoop: options.saturate)
    var notes = generator.notes
    if failed > 0 { notes.append("\(failed) batches failed: \(firstFailure ?? "")") }
    if rejected > 0 { notes.append("\(rejected) mutations rejected") }
    let report = ReportValue.object(
      [
        ("scenario", .string("W1")), ("target", .string("pagesync")),
        ("mode", .string(options.saturate ? "saturation" : "open-loop")),
        ("rate", .number(options.saturate ? 0 : options.rate)), ("batch_size", .int(options.batchSize)),
        ("pages", .int(options.pages)), ("seconds", .number(options.seconds)),
        ("writers", .int(options.writers)),
        (
          "batches",
          .object([
            ("sent", .int(sent)), ("acked", .int(acked)), ("failed", .int(failed)),
            ("acked_per_s", .number(Double(acked) / elapsed)),
            ("mutations_per_s", .number(Double(acked * options.batchSize) / elapsed)),
            ("rejected_mutations", .int(rejected)), ("ack_latency", ackLatency.reportValue),
          ])
        ),
        generator.section,
      ]
        + window.closingSections(now: now, bytesSent: writers.bytesSent, bytesReceived: writers.bytesReceived)
        + verdict(ok: failed == 0 && rejected == 0 && acked == sent, notes: notes))
    finish(.success(report))
  }

  private func finish(_ result: Result<ReportValue, LoadError>) {
    guard let completion else { return }
    self.completion = nil
    tick?.close()
    tick = nil
    progress.clear()
    writers.close()
    completion(result)
  }
}
