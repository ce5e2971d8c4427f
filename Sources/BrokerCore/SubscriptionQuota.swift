/// Subscriptions per user, across all of the user's streams: `[limits] subscriptions_per_connection` bounds one
/// stream, and this bounds what one token's many connections hold between them (`subscriptions_per_user`), so a
/// holder of a valid token cannot make the broker keep `connections_per_peer × subscriptions_per_connection`
/// channels (about 110 bytes each, for ids that exist or not).
///
/// The broker records each stream's count after every change (subscribe, unsubscribe, withdrawal, revocation,
/// close) and asks for the per-stream limit to pass to `FanOut.subscribe` before each subscribe.
///
/// Owned by the broker's loop thread. A value: keep one and mutate it in place.
public struct SubscriptionQuota: Sendable {
  private var counts: [String: Int] = [:]

  public init() {}

  /// The subscriptions the streams of `user` hold together.
  public func count(of user: String) -> Int { counts[user] ?? 0 }

  /// Users with at least one subscription (for tests and metrics).
  public var userCount: Int { counts.count }

  /// The most subscriptions a stream of `user` that holds `current` may have after its next subscribe: its own
  /// limit, or fewer if the user's other streams hold most of the user's.
  public func limit(for user: String, holding current: Int, perConnection: Int, perUser: Int) -> Int {
    let room = Swift.max(0, perUser - count(of: user))
    return Swift.min(perConnection, current + room)
  }

  /// Records that a stream of `user` went from `old` subscriptions to `new`.
  public mutating func record(user: String, from old: Int, to new: Int) {
    guard old != new else { return }
    let total = count(of: user) - old + new
    // Below zero is a miscount of the broker's (tests catch it); a release build keeps serving.
    assert(total >= 0, "subscriptions of \(user) counted below zero")
    counts[user] = total <= 0 ? nil : total
  }
}
