import ByteBuffers
import EventLoop
import LoadCore
import Web

/// The start of a measured window, and the report sections every run ends with: how the generator did, the
/// server's RSS and CPU, the machine's load and the bytes on the wire. One place, so every scenario reports them
/// the same way.
struct MeasurementWindow {
  let server: ServerProbe
  let serverBefore: ProcessSample?
  let machine = MachineProbe()
  let cpuBefore = HostProcess.ownCPUSeconds()
  let startedAt = HostProcess.now()

  init(server: ServerProbe) {
    self.server = server
    serverBefore = server.sample()
  }

  func seconds(until now: UInt64) -> Double { Double(now - min(now, startedAt)) / 1e9 }

  /// This process's CPU since the window started, in % of one core.
  func harnessCPUPercent(now: UInt64) -> Double {
    (HostProcess.ownCPUSeconds() - cpuBefore) / max(seconds(until: now), 1e-9) * 100
  }

  /// `generator`: lag of an open-loop schedule (nil: no schedule) and the harness's CPU, with its notes.
  func generator(now: UInt64, lag: LatencySummary?, target: String, closedLoop: Bool = false)
    -> (section: (String, ReportValue), notes: [String])
  {
    let harnessCPU = harnessCPUPercent(now: now)
    let lagP99 = lag?.p99 ?? 0
    let kept = closedLoop || GeneratorVerdict.keptSchedule(lagP99Ms: lagP99)
    let notes = GeneratorVerdict.notes(
      lagP99Ms: lagP99, harnessCPUPercent: harnessCPU, closedLoop: closedLoop, target: target)
    return (Self.generatorSection(lag: lag, harnessCPUPercent: harnessCPU, keptSchedule: kept), notes)
  }

  /// `generator` from figures already taken (a run that words its own notes from them).
  /// `threadCPUPercent`: the generator's own thread, where the readers have threads of their own (fan-out runs).
  static func generatorSection(
    lag: LatencySummary?, harnessCPUPercent: Double, keptSchedule: Bool, threadCPUPercent: Double? = nil
  ) -> (String, ReportValue) {
    (
      "generator",
      .object(
        [
          ("lag_p99_ms", .number(lag?.p99 ?? 0)), ("lag_max_ms", .number(lag?.max ?? 0)),
          ("kept_schedule", .bool(keptSchedule)), ("harness_cpu_pct", .number(harnessCPUPercent)),
        ] + (threadCPUPercent.map { [("thread_cpu_pct", ReportValue.number($0))] } ?? []))
    )
  }

  /// `server` and `machine` over the window.
  func serverAndMachine(now: UInt64) -> [(String, ReportValue)] {
    [
      (
        "server",
        server.report(before: serverBefore, after: server.sample(), wallSeconds: seconds(until: now))
      ),
      ("machine", machine.report),
    ]
  }

  /// `server`, `machine` and `wire`.
  func closingSections(now: UInt64, bytesSent: Int, bytesReceived: Int) -> [(String, ReportValue)] {
    serverAndMachine(now: now) + [
      ("wire", .object([("bytes_sent", .int(bytesSent)), ("bytes_received", .int(bytesReceived))]))
    ]
  }
}

/// The fields every report ends with: whether the run was correct (the exit status follows it) and the
/// harness's notes on it, in one line.
func verdict(ok: Bool, notes: [String]) -> [(String, ReportValue)] {
  [("ok", .bool(ok)), ("notes", .string(notes.joined(separator: "; ")))]
}

/// The writer's clock: a 1 ms tick that hands out every batch an open-loop schedule says is due (and records how
/// late it was), or, without a schedule (closed loop), just ticks.
///
/// Threading: the run's loop only.
final class LoadTick {
  private(set) var schedule: OpenLoopSchedule?
  private(set) var lag = LatencyRecorder()
  private var timer: LoopTimer?

  init(schedule: OpenLoopSchedule?) { self.schedule = schedule }

  /// Every batch handed out (true without a schedule).
  var isFinished: Bool { schedule?.isFinished ?? true }

  /// Starts ticking: `due` for each batch that has come due (its index and scheduled time), then `tick` with the
  /// time, and `everySecond` about once a second (progress lines).
  func start(
    loop: Loop, due: @escaping (Int, UInt64) -> Void, tick: @escaping (UInt64) -> Void,
    everySecond: @escaping (UInt64) -> Void
  ) {
    let timer = LoopTimer(loop: loop)
    self.timer = timer
    var lastSecond = HostProcess.now()
    timer.start(after: 1, repeatEvery: 1) { [weak self] in
      guard let self else { return }
      let now = HostProcess.now()
      if var schedule {
        let batches = schedule.take(now: now)
        self.schedule = schedule
        for batch in batches {
          let scheduledAt = schedule.scheduledTime(of: batch)
          lag.record(nanoseconds: now - min(now, scheduledAt))
          due(batch, scheduledAt)
        }
      }
      if now - lastSecond >= 1_000_000_000 {
        lastSecond = now
        everySecond(now)
      }
      tick(now)
    }
  }

  func close() {
    timer?.close()
    timer = nil
  }
}

/// Opens `count` things (device streams, subscriber connections) at most `concurrency` at a time: each one that
/// opens starts the next. Reports progress after each, and ends with how many opened and the first failure, if
/// any (after which no more are started).
///
/// Threading: the run's loop only.
final class ConnectionWaves {
  private let count: Int
  private let open: (Int, @escaping (Result<Void, LoadError>) -> Void) -> Void
  private let progress: (Int) -> Void
  private var done: ((Int, LoadError?) -> Void)?
  private var next = 0
  private var opened = 0
  private var inFlight = 0
  private var failure: LoadError?

  init(
    count: Int, open: @escaping (Int, @escaping (Result<Void, LoadError>) -> Void) -> Void,
    progress: @escaping (Int) -> Void
  ) {
    self.count = count
    self.open = open
    self.progress = progress
  }

  func start(concurrency: Int, _ done: @escaping (_ opened: Int, _ failure: LoadError?) -> Void) {
    self.done = done
    guard count > 0 else { return finishIfIdle() }
    for _ in 0..<min(concurrency, count) { openNext() }
  }

  private func openNext() {
    guard next < count, failure == nil else { return finishIfIdle() }
    let index = next
    next += 1
    inFlight += 1
    open(index) { [self] result in
      inFlight -= 1
      switch result {
      case .success:
        opened += 1
        progress(opened)
      case .failure(let error):
        if failure == nil { failure = error }
      }
      openNext()
    }
  }

  private func finishIfIdle() {
    guard inFlight == 0, let done else { return }
    self.done = nil
    done(opened, failure)
  }
}

/// Runs `body` for indices `0..<count` with at most `concurrency` in flight (0: all at once), as `ConnectionWaves`
/// does; `done` once every one completed, or with the first failure once those in flight have ended.
func forEachConcurrently(
  _ count: Int, concurrency: Int,
  _ body: @escaping (Int, @escaping (Result<Void, LoadError>) -> Void) -> Void,
  onProgress: ((Int) -> Void)? = nil,
  then done: @escaping (Result<Void, LoadError>) -> Void
) {
  let waves = ConnectionWaves(count: count, open: body, progress: onProgress ?? { _ in })
  waves.start(concurrency: concurrency > 0 ? concurrency : count) { _, failure in
    _ = waves
    done(failure.map { .failure($0) } ?? .success(()))
  }
}
