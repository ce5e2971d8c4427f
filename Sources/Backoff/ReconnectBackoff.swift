/// When to try again after a failed or lost connection (the daemon its broker, the broker its bus): exponential
/// backoff with full jitter (each delay uniform in 0...min(cap, base × 2^attempt)), so a thousand devices that lost
/// the broker together do not come back together. Attempts reset once a connection has stayed up `resetAfter` ms.
///
/// I/O-free: times are the caller's clock in milliseconds and randomness is injected, so behaviour is tested as
/// a trace.
public struct ReconnectBackoff: Sendable, Equatable {
  /// The first delay's upper bound, ms (`[sync] backoff_base`).
  public var base: UInt64
  /// The largest delay, ms (`[sync] backoff_cap`).
  public var cap: UInt64
  /// A connection that lasted this long, ms, resets the attempts (`[sync] backoff_reset`).
  public var resetAfter: UInt64
  /// Failed attempts since the last reset.
  public private(set) var attempt = 0
  private var connectedAt: UInt64?

  public init(base: UInt64 = 500, cap: UInt64 = 60_000, resetAfter: UInt64 = 30_000) {
    precondition(base > 0 && cap >= base, "backoff needs 0 < base <= cap")
    self.base = base
    self.cap = cap
    self.resetAfter = resetAfter
  }

  /// The upper bound of the next delay: base × 2^attempt, at most `cap` (no overflow however many attempts).
  public var currentBound: UInt64 {
    let shift = min(attempt, 63)
    let (scaled, overflow) = base.multipliedReportingOverflow(by: UInt64(1) << UInt64(shift))
    return overflow ? cap : min(cap, scaled)
  }

  /// The delay before the next attempt, after a failure to connect or a lost connection; counts the attempt.
  public mutating func nextDelay(using random: inout some RandomNumberGenerator) -> UInt64 {
    let delay = self.delay(using: &random)
    countAttempt()
    return delay
  }

  /// A delay drawn uniformly from 0...`currentBound`, without counting an attempt (`BrokerFailover` counts one
  /// per round of its list).
  public func delay(using random: inout some RandomNumberGenerator) -> UInt64 {
    UInt64.random(in: 0...currentBound, using: &random)
  }

  /// Counts one failed attempt: the next bound doubles (up to `cap`).
  public mutating func countAttempt() {
    attempt += 1
  }

  /// A connection was established at `now`.
  public mutating func connected(at now: UInt64) {
    connectedAt = now
  }

  /// The connection was lost at `now`: attempts reset if it had lasted at least `resetAfter`.
  public mutating func disconnected(at now: UInt64) {
    if let start = connectedAt, now >= start, now - start >= resetAfter { attempt = 0 }
    connectedAt = nil
  }
}
