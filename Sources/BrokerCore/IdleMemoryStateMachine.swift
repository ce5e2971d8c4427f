/// When an idle broker gives memory back: once it has had no connection and done no work for `quietMillis`, and
/// then not again until it has been busy and quiet again.
///
/// ```
///              a connection open, bytes read, a batch applied (at any look)
///        ┌───────────────────────────────────────────────────────────────────┐
///        ▼                                                                   │
///      busy ──(a look finds none)──▶ quiet(since: now) ──(a look ≥ since + quietMillis)──▶ givenBack
///                                                                  (gives back once)   (looks change nothing
///                                                                                       until busy again)
/// ```
///
/// The broker looks once a second, from the status page's sampler (a timer it has anyway: giving memory back adds
/// no wake-up to an idle broker). A busy broker never gives back: any open connection, device stream or not,
/// keeps it busy however long the connection is silent, and so does any byte read or batch applied between two
/// looks. What giving back costs the next request (code read back from the page cache, SQLite pages read again
/// from the file) is paid once per idle period, not per request.
///
/// Events in, a decision out, no clock of its own: the caller passes the loop's monotonic time. Owned by the
/// broker's loop thread. A value: keep one and mutate it in place.
public struct IdleMemoryStateMachine: Sendable, Equatable {
  /// What the broker is doing, as of a look.
  public struct Observation: Sendable, Equatable {
    /// Open connections: HTTP, and device streams.
    public var connections: Int
    /// A count that moves whenever the broker works (bytes read from any connection plus batches applied);
    /// only whether it changed between two looks matters.
    public var work: UInt64

    public init(connections: Int, work: UInt64) {
      self.connections = connections
      self.work = work
    }
  }

  public enum State: Sendable, Equatable {
    /// Working, or worked since the last look.
    case busy
    /// No connection and no work since `since` (the loop's time, milliseconds).
    case quiet(since: UInt64)
    /// Memory was given back, and nothing ran since.
    case givenBack
  }

  /// How long the broker must have had no connection and done no work before it gives memory back.
  public let quietMillis: UInt64
  public private(set) var state: State
  private var lastWork: UInt64

  /// A machine for a broker that has just started and given back what its start-up ran (`givenBack`): nothing
  /// is given back again until it has worked. `work` is the count as of now.
  public init(quietMillis: UInt64, work: UInt64) {
    self.quietMillis = quietMillis
    state = .givenBack
    lastWork = work
  }

  /// A look at `now` (the loop's time, milliseconds): returns true when the broker should give its memory back
  /// now (once per quiet period).
  public mutating func look(at now: UInt64, _ observation: Observation) -> Bool {
    let worked = observation.work != lastWork
    lastWork = observation.work
    if observation.connections > 0 || worked {
      state = .busy
      return false
    }
    switch state {
    case .busy:
      state = .quiet(since: now)
      return false
    case .quiet(let since):
      guard now &- since >= quietMillis else { return false }
      state = .givenBack
      return true
    case .givenBack:
      return false
    }
  }
}
