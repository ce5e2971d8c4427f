import EventLoop

/// The events between a stream's reader thread and the task that consumes them: a bounded queue, the one
/// waiting consumer, the end of the stream, and the reader's two hooks (stop, resume reading).
///
/// Bound: once `limit` events wait, `push` tells the reader to stop reading the socket; it reads again when the
/// consumer has taken one. A read in progress still lands whole, so at most `limit` plus the events of one read
/// of the socket (64 KiB of stream) are ever held. Meanwhile the daemon's own bound for a slow reader applies
/// (it coalesces, then sends `reset`).
///
/// Threading: `push`, `finish` and `readerEnded` on the reader's loop thread; `next` and `cancel` from the
/// consumer, any thread. All state is guarded by `lock`; the hooks (which post to the reader's loop) are called
/// holding it, and the reader clears them under it before its loop closes, so no task is ever posted to a closed
/// loop.
final class EventStreamBuffer: @unchecked Sendable {
  // @unchecked: every stored property is guarded by `lock`.
  private let lock = Lock()
  let limit: Int
  private var events: [PagesyncEvent] = []
  private var head = 0
  /// Set once: the stream ended with this error (nil: without one).
  private var ending: PagesyncClientError??
  /// The consumer has gone (its task was cancelled or its iterator dropped).
  private var cancelled = false
  private var waiter: CheckedContinuation<Result<PagesyncEvent?, PagesyncClientError>, Never>?
  /// The reader stopped reading because the buffer was full.
  private var readerPaused = false
  private var stopHook: (@Sendable () -> Void)?
  private var resumeHook: (@Sendable () -> Void)?
  /// The most events ever held at once (tests check the bound).
  private var highWater = 0

  init(limit: Int) {
    precondition(limit > 0, "the buffer must hold at least one event")
    self.limit = limit
  }

  private var count: Int { events.count - head }

  /// The reader's hooks: `stop` ends it, `resume` makes it read again; both post to its loop.
  func setHooks(stop: @escaping @Sendable () -> Void, resume: @escaping @Sendable () -> Void) {
    lock.withLock {
      stopHook = stop
      resumeHook = resume
    }
  }

  /// The reader's loop is about to close: the hooks must not post to it any more.
  func readerEnded() {
    lock.withLock {
      stopHook = nil
      resumeHook = nil
    }
  }

  // MARK: Reader side

  /// Adds events in order; returns whether the reader must stop reading (the buffer is full). Events that
  /// arrive after the consumer went are dropped.
  func push(_ new: [PagesyncEvent]) -> Bool {
    guard !new.isEmpty else { return false }
    var handOver: (CheckedContinuation<Result<PagesyncEvent?, PagesyncClientError>, Never>, PagesyncEvent)?
    let full = lock.withLock { () -> Bool in
      guard !cancelled, ending == nil else { return false }
      var rest = new[...]
      if let waiting = waiter, count == 0 {
        waiter = nil
        handOver = (waiting, rest.removeFirst())
      }
      events.append(contentsOf: rest)
      highWater = max(highWater, count)
      if count >= limit {
        readerPaused = true
        return true
      }
      return false
    }
    if let (continuation, event) = handOver { continuation.resume(returning: .success(event)) }
    return full
  }

  /// The stream is over: with `error`, the consumer gets it after the events still held; without, the end.
  func finish(_ error: PagesyncClientError?) {
    let waiting = lock.withLock {
      () -> CheckedContinuation<Result<PagesyncEvent?, PagesyncClientError>, Never>? in
      guard ending == nil else { return nil }
      guard count == 0, let waiting = waiter else {
        ending = .some(error)
        return nil
      }
      // Told now, to the waiting consumer: what follows is the end.
      waiter = nil
      ending = .some(nil)
      return waiting
    }
    if let waiting { waiting.resume(returning: error.map { .failure($0) } ?? .success(nil)) }
  }

  // MARK: Consumer side

  /// The next event, the stream's error (once), or nil at the end or once cancelled.
  func next() async -> Result<PagesyncEvent?, PagesyncClientError> {
    let next = await withTaskCancellationHandler {
      await withCheckedContinuation { continuation in
        if let ready = lock.withLock({ take(orWait: continuation) }) { continuation.resume(returning: ready) }
      }
    } onCancel: {
      cancel()
    }
    // An event handed over by `push` was made on the reader's thread, which released the lock after making it.
    // Taking the lock here orders the two for ThreadSanitizer as well, which cannot see every ordering inside
    // the Swift runtime's continuations (it reported the client's other hand-over, LocalAPIExchange's, as a race).
    lock.withLock {}
    return next
  }

  /// Under `lock`: an event, the end, or nil after storing `continuation` as the waiter.
  private func take(
    orWait continuation: CheckedContinuation<Result<PagesyncEvent?, PagesyncClientError>, Never>
  ) -> Result<PagesyncEvent?, PagesyncClientError>? {
    if cancelled { return .success(nil) }
    if count > 0 {
      let event = events[head]
      head += 1
      if head == events.count {
        events.removeAll(keepingCapacity: true)
        head = 0
      } else if head >= 64 && head * 2 >= events.count {
        events.removeFirst(head)
        head = 0
      }
      if readerPaused && count < limit {
        readerPaused = false
        resumeHook?()
      }
      return .success(event)
    }
    if let ending {
      // The error is told once; after it, the end.
      self.ending = .some(nil)
      return ending.map { .failure($0) } ?? .success(nil)
    }
    waiter = continuation
    return nil
  }

  /// The consumer has gone: the waiting `next` returns nil, held events are dropped, the reader stops.
  func cancel() {
    let waiting = lock.withLock {
      () -> CheckedContinuation<Result<PagesyncEvent?, PagesyncClientError>, Never>? in
      guard !cancelled else { return nil }
      cancelled = true
      events = []
      head = 0
      stopHook?()
      stopHook = nil
      resumeHook = nil
      defer { waiter = nil }
      return waiter
    }
    waiting?.resume(returning: .success(nil))
  }

  /// For tests: the most events held at once, and how many are held now.
  var figures: (highWater: Int, held: Int) { lock.withLock { (highWater, count) } }
}
