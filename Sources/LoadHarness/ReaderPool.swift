import Dispatch
import EventLoop
import LoadCore

#if canImport(Glibc)
  import Glibc
#endif

/// One subscriber's connection, owned by a reader thread and used on its loop only.
protocol FanOutSubscriber: AnyObject {
  var bytesSent: Int { get }
  var bytesReceived: Int { get }
  /// The socket, for the bytes it holds unread (`FIONREAD`); nil once closed.
  var fileDescriptor: Int32? { get }
  func close()
}

/// Opens a target's subscribers on any loop: a value every reader thread holds (the broker's endpoint and pages,
/// or redis-server's address and channels), so that both systems' subscribers are read the same way.
protocol FanOutSubscriberSource: Sendable {
  /// Opens a subscriber of `channel` on `loop`; `onToken` gets each notification's token (on `loop`'s thread);
  /// `done` once it is subscribed.
  func open(
    loop: Loop, channel: Int, onToken: @escaping (UInt64) -> Void,
    _ done: @escaping (Result<FanOutSubscriber, LoadError>) -> Void)
}

/// A value handed across threads that only one thread uses at a time: a closure of the run's loop sent to a reader
/// and back, or a reader's state created on its thread.
struct ThreadHandoff<Value>: @unchecked Sendable {
  let value: Value
}

/// What one reader thread measured over a step.
struct ReaderStepFigures: Sendable {
  var tally = DeliveryTally()
  /// How late the reader's 5 ms timer ran: how long what arrived waited for the reader.
  var lag = LatencyRecorder()
  /// The most bytes its sockets held unread at one sample (every 100 ms).
  var backlogPeakBytes = 0
  var lastFrameAt: UInt64 = 0
}

/// The subscribers of a fan-out run, read on `threads` threads of their own (`--reader-threads`), each with its
/// own loop, its share of the subscribers (`ReaderSplit`) and its own `DeliveryLedger`; the run's loop keeps the
/// generator (the writers' schedule) and tells each reader the acknowledged batches of its subscribers' pages.
/// At the end of a step the readers' tallies are merged (counts added, HdrHistograms merged), and each thread's
/// CPU (`/proc/self/task/TID/stat`) and backlog (its loop's lag, its sockets' unread bytes) are reported.
///
/// Threading: every method on the run's loop. A reader's state lives on its thread; what it publishes for the run's
/// loop (`ReaderStatus`) is behind a lock; `endStep` and `close` wait for the readers (they answer at once).
final class ReaderPool {
  let split: ReaderSplit
  private let mode: DeliveryLedger.Mode
  private let loop: Loop
  private let readers: [Reader]
  private let threadsByChannel: [[Int]]
  private var pending: [[ReaderAck]]
  private var sent: [Int]
  private var runAcknowledged = 0
  private var announcedAcknowledged = 0
  private var step = 0
  private var cpuBefore: [UInt64] = []
  private var generatorCPUBefore: UInt64 = 0
  private var stepStartedAt: UInt64 = 0
  private let generatorThread = ThreadCPU.currentThreadID()
  private var closed = false

  init(
    loop: Loop, split: ReaderSplit, mode: DeliveryLedger.Mode, source: any FanOutSubscriberSource
  ) throws(LoadError) {
    self.loop = loop
    self.split = split
    self.mode = mode
    var readers: [Reader] = []
    for index in 0..<split.threads {
      do {
        readers.append(try Reader(index: index, source: source))
      } catch {
        for reader in readers { reader.shutdown() }
        throw .setupFailed("reader thread: \(error)")
      }
    }
    self.readers = readers
    threadsByChannel = split.threadsByChannel()
    pending = Array(repeating: [], count: split.threads)
    sent = Array(repeating: 0, count: split.threads)
  }

  /// Opens subscriber `index` on its reader's thread; `done` on the run's loop once it is subscribed.
  func subscribe(index: Int, _ done: @escaping (Result<Void, LoadError>) -> Void) {
    let (thread, local) = split.place(of: index)
    let channel = index % split.channels
    let reply = ThreadHandoff(value: done)
    readers[thread].open(local: local, channel: channel) { [loop] result in
      loop.execute { reply.value(result) }
    }
  }

  /// A new step: every reader starts a new ledger for its subscribers, and the threads' CPU is sampled.
  func beginStep() {
    step += 1
    runAcknowledged = 0
    announcedAcknowledged = 0
    pending = Array(repeating: [], count: split.threads)
    sent = Array(repeating: 0, count: split.threads)
    for (thread, reader) in readers.enumerated() {
      reader.reset(
        step: step,
        ledger: DeliveryLedger(
          mode: mode, subscriberChannels: split.channels(on: thread), channels: split.channels))
    }
    stepStartedAt = HostProcess.now()
    cpuBefore = readers.map { ThreadCPU.ticks(of: $0.threadID) }
    generatorCPUBefore = ThreadCPU.ticks(of: generatorThread)
  }

  /// The batch sent as `token` on `channel` was acknowledged: for the readers of that channel (`flush` sends it).
  func acknowledged(token: UInt64, scheduledAt: UInt64, channel: Int) {
    runAcknowledged += 1
    for thread in threadsByChannel[channel] {
      pending[thread].append(ReaderAck(token: token, scheduledAt: scheduledAt, channel: channel))
    }
  }

  /// Sends the acknowledgements gathered since the last flush, one message per reader (every tick of the
  /// generator: a reader matches a frame that came first when its batch's answer arrives).
  func flush() {
    let announce = announcedAcknowledged != runAcknowledged
    announcedAcknowledged = runAcknowledged
    for thread in 0..<readers.count where !pending[thread].isEmpty || announce {
      let acks = pending[thread]
      pending[thread] = []
      sent[thread] += acks.count
      readers[thread].apply(acks, runAcknowledged: runAcknowledged > 0)
    }
  }

  /// Frames received so far this step, all threads together (for the progress line).
  var frames: Int { readers.reduce(0) { $0 + $1.status.frames } }

  /// Whether every subscriber knows its page's final state: every reader has applied every acknowledgement sent
  /// to it in this step and counts all its subscribers complete.
  var isSettled: Bool {
    guard runAcknowledged > 0 else { return false }
    for (thread, reader) in readers.enumerated() {
      let status = reader.status
      guard status.step == step, status.applied == sent[thread], status.complete == split.count(on: thread)
      else { return false }
    }
    return true
  }

  /// The step's figures: the readers' tallies merged, each thread's CPU and backlog.
  func endStep() -> ReaderStep {
    flush()
    let now = HostProcess.now()
    let seconds = Double(now - min(now, stepStartedAt)) / 1e9
    let figures = readers.map { $0.figures() }
    let ticks = Int(sysconf(Int32(_SC_CLK_TCK)))
    let cpu = zip(readers, cpuBefore).map { reader, before in
      ThreadStat.percent(
        ticks: ThreadCPU.ticks(of: reader.threadID) &- before, ticksPerSecond: ticks, seconds: seconds)
    }
    let generatorCPU = ThreadStat.percent(
      ticks: ThreadCPU.ticks(of: generatorThread) &- generatorCPUBefore, ticksPerSecond: ticks,
      seconds: seconds)
    var lag = LatencyRecorder()
    for figure in figures { lag.merge(figure.lag) }
    return ReaderStep(
      tally: DeliveryTally.merged(figures.map(\.tally)), lastFrameAt: figures.map(\.lastFrameAt).max() ?? 0,
      threadCPUPercent: cpu, threadFrames: figures.map(\.tally.frames),
      threadSubscribers: (0..<split.threads).map { split.count(on: $0) }, lag: lag.summary,
      backlogPeakBytes: figures.map(\.backlogPeakBytes).max() ?? 0, generatorCPUPercent: generatorCPU)
  }

  /// Bytes the subscribers wrote and read, all threads together.
  func bytes() -> (sent: Int, received: Int) {
    readers.map { $0.bytes() }.reduce((0, 0)) { ($0.0 + $1.0, $0.1 + $1.1) }
  }

  /// Closes every subscriber and joins the threads.
  func close() {
    guard !closed else { return }
    closed = true
    for reader in readers { reader.shutdown() }
  }
}

/// A step's reading, all threads: what `FanOutRun` reports.
struct ReaderStep {
  var tally: DeliveryTally
  var lastFrameAt: UInt64
  var threadCPUPercent: [Double]
  var threadFrames: [Int]
  var threadSubscribers: [Int]
  var lag: LatencySummary
  var backlogPeakBytes: Int
  var generatorCPUPercent: Double

  var busiestCPUPercent: Double { threadCPUPercent.max() ?? 0 }

  /// `readers`: the threads, their CPU and share, and their backlog.
  var section: (String, ReportValue) {
    (
      "readers",
      .object([
        ("threads", .int(threadCPUPercent.count)),
        ("cpu_pct", .array(threadCPUPercent.map { .number($0) })),
        ("busiest_cpu_pct", .number(busiestCPUPercent)),
        ("subscribers", .array(threadSubscribers.map { .int($0) })),
        ("frames", .array(threadFrames.map { .int($0) })),
        ("lag_p99_ms", .number(lag.p99)), ("lag_max_ms", .number(lag.max)),
        ("backlog_peak_bytes", .int(backlogPeakBytes)),
      ])
    )
  }
}

/// An acknowledged batch, as a reader needs it.
struct ReaderAck: Sendable {
  var token: UInt64
  var scheduledAt: UInt64
  var channel: Int
}

/// What a reader publishes for the run's loop: enough to see progress and settlement.
struct ReaderStatus: Sendable {
  var step = 0
  /// Acknowledgements applied this step.
  var applied = 0
  var complete = 0
  var frames = 0
}

/// A thread's CPU time in clock ticks, from `/proc/self/task/TID/stat` (0 if unreadable).
enum ThreadCPU {
  /// The calling thread's kernel id, from `/proc/thread-self` (a link to `PID/task/TID`); 0 if unreadable.
  static func currentThreadID() -> pid_t {
    var buffer = [CChar](repeating: 0, count: 64)
    let count = readlink("/proc/thread-self", &buffer, buffer.count - 1)
    guard count > 0 else { return 0 }
    let link = String(decoding: buffer[..<count].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    return link.split(separator: "/").last.flatMap { pid_t($0) } ?? 0
  }

  static func ticks(of thread: pid_t) -> UInt64 {
    guard thread > 0, let text = readSmallFile("/proc/self/task/\(thread)/stat") else { return 0 }
    return ThreadStat.ticks(of: text) ?? 0
  }

  private static func readSmallFile(_ path: String) -> String? {
    let fd = open(path, O_RDONLY | O_CLOEXEC)
    guard fd >= 0 else { return nil }
    defer { _ = Glibc.close(fd) }
    var buffer = [UInt8](repeating: 0, count: 1024)
    let count = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
    guard count > 0 else { return nil }
    return String(decoding: buffer[..<count], as: UTF8.self)
  }
}

/// One reader thread: its loop, its subscribers and ledger (on the thread only), its published status (locked).
final class Reader: @unchecked Sendable {
  // @unchecked: `state` is created and used on `thread` only; `published` is guarded by `lock`; `threadID` is
  // written once before `init` returns.
  private let thread: LoopThread
  private let lock = Lock()
  private var published = ReaderStatus()
  private var state: ReaderState?
  private(set) var threadID: pid_t = 0

  init(index: Int, source: any FanOutSubscriberSource) throws(LoopError) {
    thread = try LoopThread()
    thread.start()
    threadID = sync { [self] in
      state = ReaderState(loop: thread.loop, source: source, publish: { [self] status in publish(status) })
      return ThreadCPU.currentThreadID()
    }
  }

  var status: ReaderStatus { lock.withLock { published } }

  private func publish(_ status: ReaderStatus) { lock.withLock { published = status } }

  func open(local: Int, channel: Int, _ done: @escaping @Sendable (Result<Void, LoadError>) -> Void) {
    thread.execute { [self] in state?.open(local: local, channel: channel, done) }
  }

  func reset(step: Int, ledger: DeliveryLedger) {
    thread.execute { [self] in state?.reset(step: step, ledger: ledger) }
  }

  func apply(_ acks: [ReaderAck], runAcknowledged: Bool) {
    thread.execute { [self] in state?.apply(acks, runAcknowledged: runAcknowledged) }
  }

  func figures() -> ReaderStepFigures { sync { [self] in state?.figures() ?? ReaderStepFigures() } }

  func bytes() -> (Int, Int) {
    let pair = sync { [self] in [state?.bytesSent ?? 0, state?.bytesReceived ?? 0] }
    return (pair[0], pair[1])
  }

  /// Closes the subscribers, then the loop, and joins the thread.
  func shutdown() {
    sync { [self] in
      state?.close()
      state = nil
    }
    do { try thread.shutdown() } catch {
      HostProcess.writeError("pagesync-load: a reader thread's loop did not close cleanly: \(error)\n")
    }
  }

  /// Runs `body` on the thread and waits for its result (the reader answers at once: it never waits for the
  /// run's loop).
  private func sync<T: Sendable>(_ body: @escaping @Sendable () -> T) -> T {
    let answer = Answer<T>()
    thread.execute { answer.put(body()) }
    return answer.take()
  }
}

/// One value handed from a reader thread to a waiting caller.
private final class Answer<T: Sendable>: @unchecked Sendable {
  // @unchecked: `value` is written before `ready` is signalled and read after it is waited for.
  private let ready = DispatchSemaphore(value: 0)
  private var value: T?

  func put(_ value: T) {
    self.value = value
    ready.signal()
  }

  func take() -> T {
    ready.wait()
    return value!
  }
}

/// A reader's state, on its thread only: its subscribers, the step's ledger, and its 5 ms timer (loop lag,
/// backlog samples, the status it publishes).
private final class ReaderState {
  private let loop: Loop
  private let source: any FanOutSubscriberSource
  private let publish: (ReaderStatus) -> Void
  private var subscribers: [FanOutSubscriber?] = []
  private var ledger = DeliveryLedger(mode: .coalescing, subscriberChannels: [], channels: 1)
  private var step = 0
  private var applied = 0
  private var measured = ReaderStepFigures()
  private var timer: LoopTimer?
  private var lastTick: UInt64 = 0
  private var ticks = 0
  private static let tickMs: UInt64 = 5

  init(loop: Loop, source: any FanOutSubscriberSource, publish: @escaping (ReaderStatus) -> Void) {
    self.loop = loop
    self.source = source
    self.publish = publish
    let timer = LoopTimer(loop: loop)
    self.timer = timer
    lastTick = HostProcess.now()
    timer.start(after: Self.tickMs, repeatEvery: Self.tickMs) { [weak self] in self?.tick() }
  }

  func open(local: Int, channel: Int, _ done: @escaping @Sendable (Result<Void, LoadError>) -> Void) {
    if subscribers.count <= local {
      subscribers.append(contentsOf: repeatElement(nil, count: local + 1 - subscribers.count))
    }
    source.open(
      loop: loop, channel: channel,
      onToken: { [weak self] token in
        guard let self else { return }
        let now = HostProcess.now()
        measured.lastFrameAt = now
        ledger.received(subscriber: local, token: token, at: now)
      },
      { [weak self] result in
        switch result {
        case .success(let subscriber):
          self?.subscribers[local] = subscriber
          done(.success(()))
        case .failure(let error): done(.failure(error))
        }
      })
  }

  func reset(step: Int, ledger: DeliveryLedger) {
    self.step = step
    self.ledger = ledger
    applied = 0
    measured = ReaderStepFigures()
    publishStatus()
  }

  func apply(_ acks: [ReaderAck], runAcknowledged: Bool) {
    ledger.runAcknowledged = runAcknowledged
    for ack in acks {
      ledger.acknowledged(token: ack.token, scheduledAt: ack.scheduledAt, channel: ack.channel)
    }
    applied += acks.count
  }

  func figures() -> ReaderStepFigures {
    var figures = measured
    figures.tally = DeliveryTally(ledger)
    return figures
  }

  var bytesSent: Int { subscribers.reduce(0) { $0 + ($1?.bytesSent ?? 0) } }
  var bytesReceived: Int { subscribers.reduce(0) { $0 + ($1?.bytesReceived ?? 0) } }

  func close() {
    timer?.close()
    timer = nil
    for subscriber in subscribers { subscriber?.close() }
    subscribers = []
  }

  /// Every 5 ms: how late this tick is (the loop was busy reading), every 10 ms the status, every 100 ms the
  /// sockets' unread bytes.
  private func tick() {
    let now = HostProcess.now()
    let expected = lastTick + Self.tickMs * 1_000_000
    measured.lag.record(nanoseconds: now - min(now, expected))
    lastTick = now
    ticks += 1
    if ticks % 2 == 0 { publishStatus() }
    if ticks % 20 == 0 { measured.backlogPeakBytes = max(measured.backlogPeakBytes, unreadBytes()) }
  }

  private func publishStatus() {
    publish(
      ReaderStatus(step: step, applied: applied, complete: ledger.completeSubscribers, frames: ledger.frames))
  }

  private func unreadBytes() -> Int {
    var total = 0
    for subscriber in subscribers {
      guard let fd = subscriber?.fileDescriptor else { continue }
      var count: Int32 = 0
      if ioctl(fd, UInt(FIONREAD), &count) == 0 { total += Int(count) }
    }
    return total
  }
}
