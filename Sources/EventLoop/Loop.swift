import CLibUV

#if canImport(Glibc)
  import Glibc
#endif

/// One libuv event loop, run by one thread.
///
/// ```
///   created ──run()──▶ running ──(no live handle | stop())──▶ idle ──close()──▶ closed
///                         ▲                                       │
///                         └───────────────── run() ───────────────┘
/// ```
///
/// Threading: every handle of this loop is created, used and closed on the thread that calls `run()` (or, before
/// the loop first runs, on the thread that creates it). Only `execute(_:)` and `Wakeup.signal()` may be called from
/// other threads; they wake the loop through one `uv_async_t` (repeated sends coalesce).
///
/// Writes are coalesced per loop turn: `ByteStream.write` only queues, and a check handle (which runs after the
/// poll phase of every turn) flushes each stream that has data queued, all its buffers in one vectored write, once
/// a turn: what a drain callback queues in that flush goes out the next turn, so one busy stream cannot keep the
/// loop from the others' I/O. An idle handle is active only while something is queued, so a write queued outside
/// the poll phase (in a timer or close callback) still goes out without waiting for I/O.
public final class Loop: @unchecked Sendable {
  // @unchecked: all state except `tasks` (guarded by `taskLock`) is touched only on the loop thread.

  let uv: UnsafeMutablePointer<uv_loop_t>
  private let taskLock = Lock()
  private var tasks: [@Sendable () -> Void] = []
  private var wakeup: Wakeup!
  private var flushCheck: FlushCheck!
  private var dirtyStreams: [ByteStream] = []
  /// `runNextTurn`'s work: what was asked for in this turn, and what runs at this turn's check.
  private var workAsked: [() -> Void] = []
  private var workDue: [() -> Void] = []
  /// One read buffer for every stream of the loop: libuv calls alloc and then read for one stream at a time,
  /// and readers consume or copy the bytes inside their read callback.
  let readBuffer: UnsafeMutableRawBufferPointer
  private var offloadCompletions: [UInt64: (any Sendable) -> Void] = [:]
  private var nextOffloadID: UInt64 = 0
  private var isClosed = false

  /// Bytes read from, and handed to the kernel for, every `ByteStream` of this loop since it was made (closed
  /// streams included): a server's traffic on the wire, for metrics. Loop thread only; plain adds, no atomics.
  public internal(set) var streamBytesRead = 0
  public internal(set) var streamBytesWritten = 0

  /// Size of the loop's shared read buffer: the most one read callback delivers.
  public static let readBufferSize = 64 * 1024

  /// Turns completed so far (counted at each turn's check phase): for work that is bounded per turn
  /// (`Listener.maxAcceptsPerTurn`). Loop thread only.
  public internal(set) var turns: UInt64 = 0

  public init() throws(LoopError) {
    uv = .allocate(capacity: 1)
    let result = uv_loop_init(uv)
    if result != 0 {
      uv.deallocate()
      throw LoopError(code: result, operation: "uv_loop_init")
    }
    readBuffer = .allocate(byteCount: Loop.readBufferSize, alignment: 16)
    uv.pointee.data = Unmanaged.passUnretained(self).toOpaque()
    wakeup = Wakeup(loop: self) { [unowned self] in self.runTasks() }
    wakeup.keepsLoopAlive = false
    flushCheck = FlushCheck(loop: self)
  }

  deinit {
    if !isClosed {
      // The owner never called close(): handles may still point at us, so the loop memory is leaked
      // on purpose rather than freed under them.
      return
    }
    readBuffer.deallocate()
    uv.deallocate()
  }

  /// Runs the loop until it has nothing left to do (no active, referenced handle or request) or `stop()` is
  /// called. The internal wake-up does not keep it running unless `keepsRunningWhenIdle` is set.
  public func run() {
    uv_run(uv, UV_RUN_DEFAULT)
  }

  /// Runs one turn: waits for I/O if something is active, handles it, returns.
  public func runOnce() {
    uv_run(uv, UV_RUN_ONCE)
  }

  /// Runs one turn without waiting for I/O.
  public func runNoWait() {
    uv_run(uv, UV_RUN_NOWAIT)
  }

  /// Makes `run()` return after the current turn. Loop thread only; from another thread use
  /// `execute { loop.stop() }`.
  public func stop() { uv_stop(uv) }

  /// Whether `run()` keeps waiting for `execute` tasks when no other handle is active. Set it for a loop that
  /// serves a thread (see `LoopThread`); clear it to let `run()` return once everything else is closed.
  public var keepsRunningWhenIdle: Bool {
    get { wakeup.keepsLoopAlive }
    set { wakeup.keepsLoopAlive = newValue }
  }

  /// The loop's cached time in milliseconds (monotonic), updated at the start of each turn.
  public var now: UInt64 { uv_now(uv) }

  /// Refreshes `now` from the clock.
  public func updateTime() { uv_update_time(uv) }

  /// Schedules `task` to run on the loop thread. Thread-safe. Tasks run in submission order.
  public func execute(_ task: @escaping @Sendable () -> Void) {
    taskLock.withLock { tasks.append(task) }
    wakeup.signal()
  }

  private func runTasks() {
    while true {
      let batch = taskLock.withLock { () -> [@Sendable () -> Void] in
        let batch = tasks
        tasks = []
        return batch
      }
      if batch.isEmpty { return }
      for task in batch { task() }
    }
  }

  // MARK: Per-turn work

  /// Runs `body` in the next turn, after that turn's poll for I/O (at its check phase, before the writes are
  /// flushed): for work that yields the loop to everyone else's I/O first (a connection that reached its share
  /// of a turn). Not a timer of 0 ms: libuv before 1.48 runs a timer restarted at 0 in its own callback again at
  /// once, in the same turn, so a timer that yields by rescheduling itself never yields. The loop does not wait
  /// for I/O while work is owed; owed work does not keep `run()` going by itself (the handle it is for does), and
  /// `close()` drops what is still owed. Loop thread only.
  public func runNextTurn(_ body: @escaping () -> Void) {
    flushCheck.arm()
    workAsked.append(body)
  }

  func scheduleFlush(_ stream: ByteStream) {
    if dirtyStreams.isEmpty { flushCheck.arm() }
    dirtyStreams.append(stream)
  }

  /// The check phase of every turn: the work owed from the turn before, then the writes.
  func endTurn() {
    turns &+= 1
    if !workDue.isEmpty {
      let due = workDue
      workDue = []
      for body in due { body() }
    }
    // What this turn asked for runs at the next one's check, after its poll.
    if !workAsked.isEmpty { swap(&workAsked, &workDue) }
    flushDirtyStreams()
  }

  func flushDirtyStreams() {
    // One pass a turn. A flush that completes synchronously runs drain callbacks, and those may read on and
    // queue more: an HTTP connection parses the pipelined requests it held back and answers them. Against a
    // peer whose kernel buffers take everything, going on until nothing is dirty kept the loop in this phase
    // for seconds (8 connections pipelining `GET /metrics` answered some 2,000 requests before the loop polled
    // again). What a drain queued goes out next turn, after every other stream's I/O; the idle handle stays
    // armed meanwhile, so that turn polls without waiting.
    let streams = dirtyStreams
    dirtyStreams = []
    for stream in streams { stream.flushIfScheduled() }
    if dirtyStreams.isEmpty && workDue.isEmpty && workAsked.isEmpty { flushCheck.disarm() }
  }

  // MARK: Offloading work to other threads

  /// Runs `job` on `worker` and then `completion` with its result on this loop's thread.
  ///
  /// Call on the loop thread. `completion` never leaves the loop thread, so it may capture loop-bound objects;
  /// only `job` and its result cross threads.
  public func offload<T: Sendable>(
    to worker: WorkerThread, _ job: @escaping @Sendable () -> T, then completion: @escaping (T) -> Void
  ) {
    let id = nextOffloadID
    nextOffloadID += 1
    offloadCompletions[id] = { completion($0 as! T) }
    worker.submit { [self] in
      let result = job()
      self.execute { self.completeOffload(id, result) }
    }
  }

  private func completeOffload(_ id: UInt64, _ result: any Sendable) {
    guard let completion = offloadCompletions.removeValue(forKey: id) else { return }
    completion(result)
  }

  /// Offloaded jobs whose completion has not run yet.
  public var pendingOffloads: Int { offloadCompletions.count }

  // MARK: Shutdown

  /// The type of every open handle, including the loop's own three (wake-up, flush check and its idle).
  public var liveHandleTypes: [String] {
    final class Box { var names: [String] = [] }
    let box = Box()
    uv_walk(
      uv,
      { h, arg in
        let box = Unmanaged<Box>.fromOpaque(arg!).takeUnretainedValue()
        box.names.append(String(cString: uv_handle_type_name(h!.pointee.type)))
      }, Unmanaged.passUnretained(box).toOpaque())
    return box.names
  }

  /// Closes every handle of the loop that is not already closing, the way its owner would (`LoopHandle.close`).
  /// For shutdown paths that cannot reach every owner; owners should close their own handles.
  public func closeAllHandles() {
    var handles: [LoopHandle] = []
    withUnsafeMutablePointer(to: &handles) { list in
      uv_walk(
        uv,
        { h, arg in
          let list = arg!.assumingMemoryBound(to: [LoopHandle].self)
          guard uv_is_closing(h) == 0, let data = h!.pointee.data else { return }
          list.pointee.append(Unmanaged<LoopHandle>.fromOpaque(data).takeUnretainedValue())
        }, list)
    }
    for handle in handles where handle !== wakeup && handle !== flushCheck { handle.close() }
  }

  /// Closes the loop: closes its own handles, runs the loop until their close callbacks ran, and releases
  /// libuv's resources. Throws (and leaves the loop usable, with its own handles reopened) if a handle that
  /// someone else owns is still open: that is a leak in the owner. Loop thread only, with the loop not running.
  public func close() throws(LoopLifecycleError) {
    guard !isClosed else { return }
    // Let pending close callbacks of user handles run first.
    uv_run(uv, UV_RUN_NOWAIT)
    var others = liveHandleTypes
    for own in ["async", "check", "idle"] {
      if let i = others.firstIndex(of: own) { others.remove(at: i) }
    }
    if !others.isEmpty { throw .handlesStillOpen(handles: others) }
    runTasks()
    // Work owed to handles that are all closed now; their closures may hold what they were for.
    workAsked = []
    workDue = []
    wakeup.close()
    flushCheck.close()
    uv_run(uv, UV_RUN_DEFAULT)
    // The two handles hold the loop strongly; drop them to break the cycle.
    wakeup = nil
    flushCheck = nil
    let result = uv_loop_close(uv)
    precondition(result == 0, "uv_loop_close failed after every handle closed: \(result)")
    isClosed = true
  }
}

/// The loop's check handle (flushes queued writes after each poll phase) and its idle companion (keeps the poll
/// from blocking while a flush is pending). Neither keeps the loop alive by itself.
final class FlushCheck: LoopHandle {
  private let idle: UnsafeMutablePointer<uv_idle_t>
  private var armed = false

  init(loop: Loop) {
    // The idle handle is embedded as plain memory owned by this object and closed with it.
    idle = .allocate(capacity: 1)
    super.init(loop: loop, type: UV_CHECK)
    uv_check_init(loop.uv, pointer(as: uv_check_t.self))
    uv_idle_init(loop.uv, idle)
    register()
    idle.pointee.data = nil  // not a LoopHandle: closeAllHandles skips it, willClose closes it
    uv_check_start(pointer(as: uv_check_t.self)) { h in
      LoopHandle.object(h, as: FlushCheck.self).loop.endTurn()
    }
    uv_unref(handle)
    uv_unref(UnsafeMutableRawPointer(idle).assumingMemoryBound(to: uv_handle_t.self))
  }

  func arm() {
    guard !armed else { return }
    armed = true
    uv_idle_start(idle) { _ in }
  }

  func disarm() {
    guard armed else { return }
    armed = false
    uv_idle_stop(idle)
  }

  override func willClose() {
    let idle = self.idle
    uv_close(UnsafeMutableRawPointer(idle).assumingMemoryBound(to: uv_handle_t.self)) { h in
      h!.deallocate()
    }
  }
}
