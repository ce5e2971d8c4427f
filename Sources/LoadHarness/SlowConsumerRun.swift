import EventLoop
import LoadCore

#if canImport(Glibc)
  import Glibc
#endif

/// Sizes of a slow-consumer run (B5).
public struct SlowConsumerOptions: Sendable {
  /// Healthy device streams on the hot page.
  public var healthy = 100
  /// Batches per second on the hot page, in both phases.
  public var rate = 500.0
  /// Seconds of writing per phase; the slow device stalls for the second phase and its drain. Keep it under the
  /// broker's `ping_interval` (30 s): a device that answers no ping for that long is dropped as dead, by design.
  public var seconds = 20.0
  public var writers = 4
  public var drainSeconds = 10.0
  /// More pages in the slow device's subscription set (ids of 64 characters), written in the background in both
  /// phases so that its pending notifications outgrow the socket and the broker's `pending_bytes_per_connection`.
  public var coldPages = 1000
  /// Background batches per second over the cold pages, and mutations per batch (0: no background writes).
  public var coldRate = 20.0
  public var coldBatch = 100
  /// A control run: the "slow" device keeps reading, so the second phase costs one more device of the same size
  /// and nothing else. The difference to a real run is what the stall itself costs.
  public var control = false
  public init() {}
}

/// B5: the B1 generator on one hot page, twice at the same rate: first with healthy devices only, then with one
/// more device that stops reading its socket (the kernel's buffers fill, then the broker's queue). The slow
/// device also subscribes to `coldPages` pages a background writer changes in both phases, so that what it is owed
/// outgrows every buffer; a *twin* device with the same subscriptions keeps reading, and measures what the slow
/// one would have been sent. Then the slow device reads again and must end on the hot page's final time (and every
/// cold page's). Reports the healthy devices' p99 in both phases, the broker's RSS while the device was stalled
/// against the twin's bytes, and what the slow device got when it came back.
///
/// Threading: the run's loop only.
final class SlowConsumerRun: ScenarioRun {
  private let loop: Loop
  private let target: PagesyncFanOut
  private let options: SlowConsumerOptions
  private let server: ServerProbe
  private let progress: ProgressLine
  private let metrics: BrokerMetricsReader
  private var run: FanOutRun?
  /// Reports every entry: the hot page's times and the cold pages' (a frame may name both).
  private lazy var slow = DeviceStream(
    reporting: .entries { [weak self] id, time in self?.slowSaw(id, time) })
  private let twin = DeviceStream()
  private let coldWriters: BrokerWriterPool
  private let coldPages: [String]
  private var coldTick: LoadTick?
  private var coldFinal: [String: UInt64] = [:]
  private var coldFailures = 0
  private var coldSent = 0
  private var coldAcked = 0
  private var coldPendingAtStall = 0
  private var coldPendingAtResume = 0
  private var slowCold: [String: UInt64] = [:]
  private var twinBytesAtStall = 0
  private var twinBytesAtResume = 0
  private var slowFrames = 0
  private var slowLast: UInt64 = 0
  private var framesBeforeResume = 0
  private var bytesBeforeResume = 0
  private var stalledAt: UInt64 = 0
  private var resumedAt: UInt64 = 0
  private var caughtUpAt: UInt64?
  private var coalescedBefore: Double?
  private var coalescedAfter: Double?
  private var waitTimer: LoopTimer?

  init(
    loop: Loop, target: PagesyncFanOut, options: SlowConsumerOptions, server: ServerProbe,
    progress: ProgressLine
  ) {
    self.loop = loop
    self.server = server
    self.target = target
    self.options = options
    self.progress = progress
    metrics = BrokerMetricsReader(loop: loop, endpoint: target.endpoint)
    coldWriters = BrokerWriterPool(endpoint: target.endpoint)
    let prefix = "\(target.pages[0])-cold-"
    coldPages = (0..<options.coldPages).map { index in
      let name = prefix + String(index) + "-"
      return name + String(repeating: "x", count: max(0, 64 - name.count))
    }
  }

  func start(_ completion: @escaping (Result<ReportValue, LoadError>) -> Void) {
    var fanOut = FanOutOptions()
    fanOut.subscribers = options.healthy
    fanOut.rate = options.rate
    fanOut.seconds = options.seconds
    fanOut.writers = options.writers
    fanOut.drainSeconds = options.drainSeconds
    let run = FanOutRun(
      loop: loop, target: target, options: fanOut, scenario: "B5",
      stepping: .fixed([(name: "without_slow", rate: options.rate), (name: "with_slow", rate: options.rate)]),
      server: server, progress: progress)
    self.run = run
    run.beforeStep = { [unowned self] index, done in
      index == 0 ? startCold(done) : stall(done)
    }
    run.afterSteps = { [unowned self] done in resume(done) }
    run.extraReport = { [unowned self] in extraReport() }
    run.start { [self] result in
      metrics.close()
      slow.drop()
      twin.drop()
      coldTick?.close()
      coldWriters.close()
      waitTimer?.close()
      self.run = nil
      completion(result)
    }
  }

  /// Before the first phase: creates the cold pages, opens the twin on the slow device's set, and starts the
  /// background writer (it runs through both phases).
  private func startCold(_ done: @escaping (Result<Void, LoadError>) -> Void) {
    guard !coldPages.isEmpty else { return done(.success(())) }
    coldWriters.open(loop: loop, count: 1, clientPrefix: "\(target.pages[0])-cold") { [self] result in
      if case .failure = result { return done(result) }
      let creates = coldPages.map {
        MutationFields.createPage(page: $0, time: coldWriters.nextTime(), title: "cold")
      }
      BatchChunks.send(creates, chunk: 1000, through: coldWriters) { [self] result in
        if case .failure(let error) = result { return done(.failure(error)) }
        twin.open(loop: loop, endpoint: target.endpoint, pages: [target.pages[0]] + coldPages) {
          [self] result in
          if case .failure = result { return done(result) }
          guard options.coldRate > 0, options.coldBatch > 0 else { return done(.success(())) }
          let tick = LoadTick(
            schedule: OpenLoopSchedule(
              rate: options.coldRate, start: HostProcess.now(), duration: UInt64.max / 4))
          coldTick = tick
          var next = 0
          tick.start(
            loop: loop,
            due: { [weak self] _, _ in
              guard let self else { return }
              let mutations = (0..<options.coldBatch).map { _ in
                next += 1
                let page = coldPages[next % coldPages.count]
                return MutationFields.setTitle(page: page, time: coldWriters.nextTime(), title: "c\(next)")
              }
              coldSent += 1
              coldWriters.send(mutations) { [weak self] result in
                guard let self else { return }
                switch result {
                case .success(let answer):
                  coldAcked += 1
                  coldFinal.merge(answer.pages) { max($0, $1) }
                case .failure: coldFailures += 1
                }
              }
            }, tick: { _ in }, everySecond: { _ in })
          done(.success(()))
        }
      }
    }
  }

  /// Opens the slow device on the hot page and the cold ones and stops reading. Its receive buffer is left as it
  /// is: shrinking it (SO_RCVBUF) also shrinks the TCP window for good, and the device then crawls at a few KB/s
  /// once it reads again, a harness artefact. So the kernel absorbs the first few hundred KB; the background
  /// writer must owe the device more than that for the broker's queue to fill (see `bytes_saved_by_coalescing`).
  private func stall(_ done: @escaping (Result<Void, LoadError>) -> Void) {
    slow.open(loop: loop, endpoint: target.endpoint, pages: [target.pages[0]] + coldPages) { [self] result in
      if case .failure = result { return done(result) }
      guard let socket = slow.socket else {
        return done(.failure(.connectFailed("slow device: no socket")))
      }
      socket.pauseReading()
      framesBeforeResume = slowFrames
      stalledAt = HostProcess.now()
      twinBytesAtStall = twin.bytesReceived
      coldPendingAtStall = coldWriters.pending
      metrics.read { [self] reading in
        coalescedBefore = try? reading.get().notificationsCoalesced
        done(.success(()))
      }
    }
  }

  private func slowSaw(_ page: Substring, _ time: UInt64) {
    if page == target.pages[0] {
      slowFrames += 1
      slowLast = max(slowLast, time)
    } else {
      slowCold[String(page), default: 0] = max(slowCold[String(page)] ?? 0, time)
    }
  }

  /// After the stalled phase: reads again, and waits until the slow device knows the final time (or the drain
  /// bound passes).
  private func resume(_ done: @escaping () -> Void) {
    // The background writer stops here, so that the cold pages' final times are known.
    coldTick?.close()
    coldTick = nil
    coldPendingAtResume = coldWriters.pending
    metrics.read { [self] reading in
      twinBytesAtResume = twin.bytesReceived
      coalescedAfter = try? reading.get().notificationsCoalesced
      bytesBeforeResume = slow.bytesReceived
      framesBeforeResume = slowFrames
      resumedAt = HostProcess.now()
      slow.socket?.resumeReading()
      progress.update("pagesync B5: the slow device reads again")
      let timer = LoopTimer(loop: loop)
      waitTimer = timer
      let deadline = resumedAt + UInt64(options.drainSeconds * 1e9)
      timer.start(after: 1, repeatEvery: 10) { [weak self] in
        guard let self, let run else { return }
        let now = HostProcess.now()
        let final = run.finalToken(of: 0)
        if final > 0, slowLast == final, coldWrong == 0, coldWriters.pending == 0 {
          caughtUpAt = now
        } else if now < deadline {
          return
        }
        timer.close()
        waitTimer = nil
        done()
      }
    }
  }

  /// Cold pages whose final time the slow device does not know (yet).
  private var coldWrong: Int { coldFinal.filter { slowCold[$0.key] != $0.value }.count }

  private func extraReport() -> (fields: [(String, ReportValue)], ok: Bool, notes: [String]) {
    guard let run, run.steps.count == 2 else { return ([], false, ["the run did not reach both phases"]) }
    let without = run.steps[0].latency.p99
    let with = run.steps[1].latency.p99
    let change = without > 0 ? (with - without) / without * 100 : 0
    let final = run.finalToken(of: 0)
    let correct = final > 0 && slowLast == final && coldWrong == 0 && coldFailures == 0
    let twinBytes = twinBytesAtResume - twinBytesAtStall
    let stalledFor = Double(resumedAt - min(resumedAt, stalledAt)) / 1e9
    var notes: [String] = []
    if !correct {
      notes.append(
        "the slow device did not reach the final times (hot page: \(slowLast) of \(final), cold pages wrong: "
          + "\(coldWrong), background batches failed: \(coldFailures)) within \(options.drainSeconds) s of reading again"
      )
    }
    let afterResume = slow.bytesReceived - bytesBeforeResume
    let saved = max(0, twinBytes - afterResume)
    if saved == 0, !options.control {
      notes.append(
        "the slow device read as many bytes as the twin: the kernel's buffers held all it was owed, so the "
          + "broker never had to coalesce for it (stall longer or write more: --seconds, --cold-rate)")
    }
    let backlog = max(coldPendingAtStall, coldPendingAtResume)
    if Double(backlog) > options.coldRate {
      notes.append(
        "the broker fell more than a second behind the background writes (\(backlog) batches unanswered): "
          + "the phases ran with a growing backlog, so their p99 does not isolate the slow device")
    }
    if change > 10 {
      notes.append(
        "healthy p99 rose \(Int(change))% from the first phase; the target (within 10%) compares it with the same "
          + "phase of a --control run, which rises too (docs/benchmarks.md, B5)")
    }
    let stalledRSS = run.steps[1].rss
    let calmRSS = run.steps[0].rss
    if stalledRSS.lateGrowth > 1 << 20 {
      notes.append(
        "broker RSS still grew \(stalledRSS.lateGrowth / 1024) KiB in the second half of the stall: not levelling off"
      )
    }
    let coalesced: ReportValue =
      if let before = coalescedBefore, let after = coalescedAfter {
        .int(Int(after - before))
      } else {
        .string("unknown (no /metrics)")
      }
    let fields: [(String, ReportValue)] = [
      (
        "healthy_p99_ms",
        .object([
          ("without_slow", .number(without)), ("with_slow", .number(with)), ("change_pct", .number(change)),
        ])
      ),
      (
        "slow",
        .object([
          ("control", .bool(options.control)), ("stalled_seconds", .number(stalledFor)),
          ("subscriptions", .int(1 + coldPages.count)),
          ("hot_updates_while_stalled", .int(run.steps[1].result.acked)),
          ("twin_bytes_while_stalled", .int(twinBytes)),
          ("broker_coalesced_while_stalled", coalesced),
          ("frames_after_resume", .int(slowFrames - framesBeforeResume)),
          ("bytes_after_resume", .int(afterResume)), ("bytes_saved_by_coalescing", .int(saved)),
          ("final_time", .int(Int(final))), ("last_time_seen", .int(Int(slowLast))),
          ("cold_pages_written", .int(coldFinal.count)), ("cold_pages_wrong", .int(coldWrong)),
          ("correct", .bool(correct)), ("open_at_end", .bool(slow.isOpen)),
          ("caught_up_ms", .number(caughtUpAt.map { Double($0 - resumedAt) / 1e6 } ?? -1)),
        ])
      ),
      (
        "background",
        .object([
          ("mutations_per_s_offered", .number(options.coldRate * Double(options.coldBatch))),
          ("batches_sent", .int(coldSent)), ("batches_acked", .int(coldAcked)),
          ("unanswered_at_stall", .int(coldPendingAtStall)),
          ("unanswered_at_resume", .int(coldPendingAtResume)),
        ])
      ),
      (
        "server_rss_growth",
        .object([
          ("without_slow_bytes", .int(calmRSS.growth)), ("with_slow_bytes", .int(stalledRSS.growth)),
          ("difference_bytes", .int(stalledRSS.growth - calmRSS.growth)),
        ])
      ),
      (
        "server_rss_while_stalled",
        .object([
          ("first_bytes", .int(stalledRSS.first)), ("peak_bytes", .int(stalledRSS.peak)),
          ("last_bytes", .int(stalledRSS.last)), ("growth_bytes", .int(stalledRSS.growth)),
          ("late_growth_bytes", .int(stalledRSS.lateGrowth)), ("samples", .int(stalledRSS.samples.count)),
          ("growth_over_twin_bytes", .number(Double(stalledRSS.growth) / Double(max(twinBytes, 1)))),
        ])
      ),
    ]
    return (fields, correct, notes)
  }
}
