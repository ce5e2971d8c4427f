import Backoff

/// The broker's link to its bus (Redis): connecting, subscribing, live, and retrying with backoff after a loss;
/// when the link becomes live it says to make the broker's devices catch up, and whether to publish `resync`
/// because messages of this broker were lost.
///
/// ```
///  stopped ──start──▶ connecting ──connected──▶ subscribing ──subscribed──▶ live ──┐
///                        ▲   │                      │                        │     │ publishDropped /
///                        │   └──────failed──────────┴─────────failed─────────┘     │ publishRoom
///                        │                          ▼                              │ (resync owed)
///                        └────retryDue──────── waiting(until) ◀────────────────────┘
/// ```
///
/// - `subscribed` (each time, the first included): `.catchUp`: something may have been committed elsewhere while
///   this broker was not subscribed, so it reads its devices' pages from the store.
/// - A message this broker could not publish (the link was not live, or its buffer toward the bus was over
///   `[bus] buffer_bytes`, or a connection died with writes queued) owes a `resync` to the other brokers: sent as
///   soon as the link is live and has room (`subscribed`, `publishRoom`).
/// - While not `live`, what the broker knows from the bus (its channel index, `publishedSequence`) may be
///   behind: `isLive` is what decides whether catch-ups may be answered from the index.
///
/// I/O-free: times are the caller's clock (ms), randomness injected; tested as a trace.
public struct BusLinkStateMachine: Sendable {
  public enum State: Equatable, Sendable {
    case stopped
    case connecting
    case subscribing
    case live
    /// Waiting for the retry timer, due at `until`.
    case waiting(until: UInt64)
  }

  public enum Action: Equatable, Sendable {
    case none
    /// Open the connections.
    case connect
    /// Subscribe every channel needed now (`BusSubscriptions.channels`).
    case subscribeAll
    /// Make every device of this broker catch up from the store; then, if `publishResync`, publish `resync`.
    case catchUp(publishResync: Bool)
    /// Publish `resync` (the buffer has room again after messages were dropped).
    case publishResync
    /// Close what is open and retry after `after` ms.
    case retry(after: UInt64)
  }

  public private(set) var state = State.stopped
  /// Times the link became live after having been live before (`pagesync_bus_reconnects_total`).
  public private(set) var reconnects = 0
  /// Times the link became live.
  public private(set) var livePeriods = 0
  /// Whether a `resync` is owed to the other brokers.
  public private(set) var resyncOwed = false
  private var backoff: ReconnectBackoff

  public init(backoff: ReconnectBackoff) { self.backoff = backoff }

  public var isLive: Bool { state == .live }

  public mutating func start() -> Action {
    guard state == .stopped else { return .none }
    state = .connecting
    return .connect
  }

  /// Every connection opened.
  public mutating func connected(at now: UInt64) -> Action {
    guard state == .connecting else { return .none }
    state = .subscribing
    backoff.connected(at: now)
    return .subscribeAll
  }

  /// Redis confirmed every subscription asked by `subscribeAll`.
  public mutating func subscribed() -> Action {
    guard state == .subscribing else { return .none }
    state = .live
    if livePeriods > 0 { reconnects += 1 }
    livePeriods += 1
    let resync = resyncOwed
    resyncOwed = false
    return .catchUp(publishResync: resync)
  }

  /// A connection failed to open or was lost (`lostWrites`: it had messages queued that Redis may not have
  /// received). Losing a live link owes a `resync` whatever was queued: what the kernel took, Redis may not have
  /// delivered.
  public mutating func failed(
    at now: UInt64, lostWrites: Bool, using random: inout some RandomNumberGenerator
  )
    -> Action
  {
    switch state {
    case .stopped, .waiting: return .none
    case .connecting, .subscribing, .live:
      if lostWrites || state == .live { resyncOwed = true }
      backoff.disconnected(at: now)
      let delay = backoff.nextDelay(using: &random)
      state = .waiting(until: now + delay)
      return .retry(after: delay)
    }
  }

  /// The retry timer fired.
  public mutating func retryDue(at now: UInt64) -> Action {
    guard case .waiting(let until) = state, now >= until else { return .none }
    state = .connecting
    return .connect
  }

  /// A message of this broker was not handed to the bus (not live, or over the buffer bound).
  public mutating func publishDropped() { resyncOwed = true }

  /// The buffer toward the bus has room again.
  public mutating func publishRoom() -> Action {
    guard state == .live, resyncOwed else { return .none }
    resyncOwed = false
    return .publishResync
  }

  public mutating func stop() { state = .stopped }
}
