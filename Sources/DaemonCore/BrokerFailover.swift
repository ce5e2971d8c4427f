/// Which broker of `[broker] url` to try next, and when: the daemon's failover between brokers, as a value without
/// I/O (times are the caller's clock in milliseconds, randomness is injected), so it is tested as a trace.
///
///     start ──▶ try broker 0 ──opened──▶ on broker i (sticks: no going back to an earlier broker while it lasts)
///                    ▲                        │ lost (refused, reset, TLS, 5xx on the upgrade, stream closed)
///                    └── wait d, try i+1 mod n ◀┘ (a failed attempt goes the same way)
///
/// The schedule: after broker i is lost or an attempt on it fails, the daemon waits a delay d drawn uniformly from
/// 0…min(cap, base × 2^r) (`ReconnectBackoff`'s full jitter) and tries broker i+1 (mod n). r counts the whole
/// rounds of the list that failed: every broker tried once in a row without a connection (the lost one included)
/// doubles the bound; a connection that lasted `[sync] backoff_reset_ms` sets r back to 0. With one URL each
/// failure is a round: exactly the single-broker backoff. A device thus tries each broker at most once per bound,
/// and a thousand devices that lose a broker together spread over the whole window before reaching the next.
public struct BrokerFailover: Sendable, Equatable {
  /// The most URLs `[broker] url` may list: a list is a handful of brokers (or load balancers), and a round of it
  /// must stay short next to the backoff cap.
  public static let maxBrokers = 16

  /// How many brokers the list has (at least 1).
  public let brokerCount: Int
  /// The broker being tried, or the one the daemon is on: its index in the list.
  public private(set) var current = 0
  /// The delays' policy and the count of failed rounds (`attempt`).
  public var backoff: ReconnectBackoff
  /// Brokers that failed in a row in the round under way (reset by a connection).
  public private(set) var failedInRound = 0

  public init(brokerCount: Int, backoff: ReconnectBackoff) {
    precondition(brokerCount >= 1, "failover needs at least one broker")
    self.brokerCount = brokerCount
    self.backoff = backoff
  }

  /// The connection to `current` opened at `now`: the daemon stays on it until it is lost.
  public mutating func connected(at now: UInt64) {
    backoff.connected(at: now)
    failedInRound = 0
  }

  /// The connection to `current` was lost at `now`, or the attempt to open it failed: moves to the next broker
  /// and returns how long to wait before trying it. A connection that had lasted `resetAfter` sets the bound back
  /// to `base`; each whole round of the list without a connection doubles it. `moveOn` false: the daemon dropped
  /// the connection for a reason of its own (a new or refused token): the next try is the same broker, with the
  /// delay counted as any other.
  public mutating func lost(
    at now: UInt64, using random: inout some RandomNumberGenerator, moveOn: Bool = true
  ) -> UInt64 {
    backoff.disconnected(at: now)
    let delay = backoff.delay(using: &random)
    failedInRound += 1
    if failedInRound >= brokerCount {
      failedInRound = 0
      backoff.countAttempt()
    }
    if moveOn { current = (current + 1) % brokerCount }
    return delay
  }
}
