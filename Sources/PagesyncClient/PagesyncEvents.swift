import EventLoop

/// How an `events()` sequence reads the change stream. Times are in milliseconds.
public struct EventStreamOptions: Equatable, Sendable {
  /// The most events held for the app before the reader stops reading the socket (at most this many plus those
  /// of one read, 64 KiB of stream). Default 256.
  public var bufferLimit = 256
  /// The largest event (a line, or an event's data) accepted, in bytes; a larger one ends the sequence with
  /// `invalidAnswer`. Default 1 MiB.
  public var maxEventBytes = 1 << 20
  /// The longest wait between two attempts to reconnect. Default 30 s.
  public var maxRetryDelay: UInt64 = 30_000
  /// How long the daemon may take to answer the request. Default 30 s.
  public var answerTimeout: UInt64 = 30_000
  /// How long an open stream may stay silent before it is taken for dead and reopened (the daemon sends a
  /// comment every 15 s when it has nothing else). 0: never. Default 45 s.
  public var idleTimeout: UInt64 = 45_000
  /// Whether a daemon that cannot be reached before the first stream opened is waited for (retried with
  /// backoff). Default false: the sequence throws `unreachable` (or `timedOut`) at once. Once a stream has
  /// opened, a lost daemon is always waited for.
  public var waitForDaemon = false
  /// Resume after this event (an id the app kept from an earlier run); nil: from now. The daemon answers an id
  /// it no longer has events after with a `reset` first.
  public var lastEventID: UInt64?

  public init() {}
}

/// The daemon's change stream (`GET /v1/events`) as typed events, for `for try await event in ...`.
///
/// Each iterator opens a stream of its own when first asked for an event, on a thread of its own running a libuv
/// loop (never on a thread of Swift's cooperative pool). It starts with the sync state (an unnumbered `sync`
/// event), then every change as it happens. When the connection drops (the daemon restarts, say), it reconnects
/// with backoff and resumes after the last event it received (`Last-Event-ID`); a daemon that lost events in
/// between sends a `reset` first, and so does a daemon that restarted. Unknown event types are skipped.
///
/// Ends: with nil when the consuming task is cancelled or the iterator is dropped (the connection is closed at
/// once); with an error when the daemon cannot be reached at the start (unless `waitForDaemon`), refuses the
/// stream (`daemonError`: 503 when `[api] event_streams` streams are open, say), or sends what is not an event
/// stream (`invalidAnswer`).
///
/// Bounded: at most `bufferLimit` events (plus one read) wait for the app. When it falls behind, the reader
/// stops reading the socket, and the daemon's own bound for slow readers applies: it coalesces what it holds
/// for this stream (per page, only the newest), and past its limit it drops them and sends `reset`.
public struct PagesyncEvents: AsyncSequence, Sendable {
  public typealias Element = PagesyncEvent
  public typealias Failure = PagesyncClientError

  public let socketPath: String
  public let options: EventStreamOptions

  public init(socketPath: String, options: EventStreamOptions = EventStreamOptions()) {
    self.socketPath = socketPath
    self.options = options
  }

  public func makeAsyncIterator() -> Iterator {
    Iterator(stream: Stream(socketPath: socketPath, options: options))
  }

  /// Reads one stream. Use it from one task at a time.
  public struct Iterator: AsyncIteratorProtocol {
    public typealias Element = PagesyncEvent
    public typealias Failure = PagesyncClientError

    let stream: Stream

    public mutating func next() async throws(PagesyncClientError) -> PagesyncEvent? {
      try await stream.next()
    }
  }

  /// One iterator's stream: started on the first `next`, stopped when the iterator goes.
  final class Stream: Sendable {
    let socketPath: String
    let options: EventStreamOptions
    let buffer: EventStreamBuffer
    private let started = StartFlag()

    init(socketPath: String, options: EventStreamOptions) {
      self.socketPath = socketPath
      self.options = options
      buffer = EventStreamBuffer(limit: Swift.max(options.bufferLimit, 1))
    }

    deinit {
      // The iterator was dropped: close the connection, end the thread.
      buffer.cancel()
    }

    func next() async throws(PagesyncClientError) -> PagesyncEvent? {
      if started.claim() {
        if Task.isCancelled {
          // Never started: the sequence is over for any task that asks again.
          buffer.cancel()
          return nil
        }
        let reader: EventStreamReader
        do throws(PagesyncClientError) {
          reader = try EventStreamReader(socketPath: socketPath, options: options, buffer: buffer)
        } catch {
          buffer.finish(error)
          throw error
        }
        startDetachedThread { reader.run() }
      }
      return try await buffer.next().get()
    }
  }
}

/// Set once, from any thread.
private final class StartFlag: @unchecked Sendable {
  // @unchecked: `claimed` is guarded by `lock`.
  private let lock = Lock()
  private var claimed = false

  /// True for the first caller only.
  func claim() -> Bool {
    lock.withLock {
      defer { claimed = true }
      return !claimed
    }
  }
}

extension LocalAPIClient {
  /// The daemon's change stream, from now (or after `options.lastEventID`): see `PagesyncEvents`.
  ///
  /// ```swift
  /// for try await event in client.events() {
  ///   if case .page(let page) = event.change { reload(page.id) }
  /// }
  /// ```
  public func events(_ options: EventStreamOptions = EventStreamOptions()) -> PagesyncEvents {
    PagesyncEvents(socketPath: socketPath, options: options)
  }
}
