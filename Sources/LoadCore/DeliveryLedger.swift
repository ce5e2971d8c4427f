/// Delivery bookkeeping for a fan-out run: which batch each notification stands for, how late it arrived, and
/// whether every subscriber ended up knowing the newest state.
///
/// A *token* names a batch on the wire: the broker's `lastUpdatedTime` (the batch's sequence, learned from its
/// answer), or for Redis the batch number carried in the message. A token is matched to its batch's scheduled
/// send time when the batch is acknowledged; a notification that arrives before the writer has its answer (the
/// broker notifies right after the commit, the answer may still be on its way) is parked until then.
///
/// Two ways to count a subscriber complete:
/// - `coalescing` (pagesync): notifications for one page coalesce while a device is not reading, so a frame stands
///   for every batch up to its token. Complete means the last token seen is the newest acknowledged one; latency
///   is that of the newest batch a frame contains.
/// - `everyMessage` (Redis pub/sub): each published message reaches every subscriber. Complete means one message
///   per acknowledged batch.
///
/// Channels: subscriber `s` watches channel `s % channels` (B1: one channel, every subscriber on it; B2: a channel
/// per page, one subscriber each). Each channel has its own final token; a subscriber is complete against its own.
///
/// Tokens must be above 0 (0 means "nothing seen") and distinct across channels (the broker's sequence, a batch
/// number). Times are nanoseconds on the harness's monotonic clock.
public struct DeliveryLedger: Sendable {
  /// How a subscriber's frames relate to the batches.
  public enum Mode: String, Sendable { case coalescing, everyMessage }

  public let mode: Mode
  public let subscribers: Int
  public let channels: Int
  private var finalTokens: [UInt64]
  /// The channel of each subscriber (`s % channels` unless given).
  private let subscriberChannels: [Int]
  private var acknowledgedPerChannel: [Int]
  private var scheduled: [UInt64: UInt64] = [:]
  private var parked: [UInt64: [UInt64]] = [:]
  private var lastSeen: [UInt64]
  private var framesPerSubscriber: [Int]
  /// Batches acknowledged with a token.
  public private(set) var acknowledged = 0
  /// The newest acknowledged token of any channel (with one channel: what every subscriber must end up seeing).
  public private(set) var finalToken: UInt64 = 0
  /// Notifications received, all subscribers together.
  public private(set) var frames = 0
  /// Notifications whose token was not newer than one the subscriber had already seen.
  public private(set) var regressions = 0
  /// Delivery latency: receipt time minus the scheduled send time of the newest batch the frame stands for.
  public private(set) var latency = LatencyRecorder()

  public init(mode: Mode, subscribers: Int, channels: Int = 1) {
    precondition(channels >= 1, "a ledger needs a channel")
    self.init(mode: mode, subscriberChannels: (0..<subscribers).map { $0 % channels }, channels: channels)
  }

  /// A ledger of some of a run's subscribers (one reader thread's, `ReaderSplit.channels(on:)`): subscriber `s`
  /// of this ledger watches `subscriberChannels[s]`.
  public init(mode: Mode, subscriberChannels: [Int], channels: Int) {
    precondition(channels >= 1, "a ledger needs a channel")
    precondition(subscriberChannels.allSatisfy { (0..<channels).contains($0) }, "no such channel")
    self.mode = mode
    self.subscribers = subscriberChannels.count
    self.channels = channels
    self.subscriberChannels = subscriberChannels
    finalTokens = Array(repeating: 0, count: channels)
    acknowledgedPerChannel = Array(repeating: 0, count: channels)
    lastSeen = Array(repeating: 0, count: subscribers)
    framesPerSubscriber = Array(repeating: 0, count: subscribers)
  }

  /// The writer got the answer for the batch sent as `token` on `channel`, which was scheduled at `scheduledAt`.
  public mutating func acknowledged(token: UInt64, scheduledAt: UInt64, channel: Int = 0) {
    precondition(token > 0, "token 0 means nothing seen")
    precondition(channel >= 0 && channel < channels, "no such channel")
    acknowledged += 1
    acknowledgedPerChannel[channel] += 1
    finalTokens[channel] = max(finalTokens[channel], token)
    scheduled[token] = scheduledAt
    if let waiting = parked.removeValue(forKey: token) {
      for receivedAt in waiting { latency.record(nanoseconds: receivedAt - min(receivedAt, scheduledAt)) }
    }
    finalToken = max(finalToken, token)
  }

  /// Subscriber `subscriber` was told about `token` at `receivedAt`.
  public mutating func received(subscriber: Int, token: UInt64, at receivedAt: UInt64) {
    guard subscriber >= 0, subscriber < subscribers, token > 0 else { return }
    frames += 1
    framesPerSubscriber[subscriber] += 1
    if token <= lastSeen[subscriber] {
      regressions += 1
    } else {
      lastSeen[subscriber] = token
    }
    if let scheduledAt = scheduled[token] {
      latency.record(nanoseconds: receivedAt - min(receivedAt, scheduledAt))
    } else {
      parked[token, default: []].append(receivedAt)
    }
  }

  /// Subscribers whose last seen token is the final one (coalescing) or that got every message (everyMessage).
  /// O(subscribers): for progress lines and the end of a run, not per frame.
  public var completeSubscribers: Int { (0..<subscribers).reduce(0) { $0 + (isComplete($1) ? 1 : 0) } }

  /// Whether every subscriber knows the final state (and, for `everyMessage`, got every message).
  public var isSettled: Bool { completeSubscribers == subscribers && acknowledged > 0 }

  /// Notifications whose token no acknowledged batch carried (yet).
  public var unmatchedFrames: Int { parked.values.reduce(0) { $0 + $1.count } }

  /// The subscribers that are not complete, by index (for a failure message).
  public var incompleteSubscribers: [Int] { (0..<subscribers).filter { !isComplete($0) } }

  /// The newest acknowledged token of `channel` (0: none yet).
  public func finalToken(of channel: Int) -> UInt64 { finalTokens[channel] }

  /// The last token subscriber `subscriber` saw (0: none).
  public func lastSeen(by subscriber: Int) -> UInt64 { lastSeen[subscriber] }

  /// Set when another ledger of the same run (another reader thread's) has an acknowledged batch: a subscriber
  /// of a channel no batch of the step updated is then complete here too, as it would be in one ledger.
  public var runAcknowledged = false

  private func isComplete(_ subscriber: Int) -> Bool {
    guard acknowledged > 0 || runAcknowledged else { return false }
    let channel = subscriberChannels[subscriber]
    let final = finalTokens[channel]
    switch mode {
    case .coalescing: return lastSeen[subscriber] == final
    case .everyMessage:
      return framesPerSubscriber[subscriber] == acknowledgedPerChannel[channel]
        && lastSeen[subscriber] == final
    }
  }
}

/// What a ledger counted, without its bookkeeping: what each reader thread hands back at the end of a step, merged
/// into the step's figures (counts added, latency histograms merged).
public struct DeliveryTally: Sendable {
  public var subscribers = 0
  public var frames = 0
  public var regressions = 0
  public var unmatchedFrames = 0
  public var completeSubscribers = 0
  public var latency = LatencyRecorder()

  public init() {}

  public init(_ ledger: DeliveryLedger) {
    subscribers = ledger.subscribers
    frames = ledger.frames
    regressions = ledger.regressions
    unmatchedFrames = ledger.unmatchedFrames
    completeSubscribers = ledger.completeSubscribers
    latency = ledger.latency
  }

  /// The tallies of all threads as one.
  public static func merged(_ tallies: [DeliveryTally]) -> DeliveryTally {
    var total = DeliveryTally()
    for tally in tallies {
      total.subscribers += tally.subscribers
      total.frames += tally.frames
      total.regressions += tally.regressions
      total.unmatchedFrames += tally.unmatchedFrames
      total.completeSubscribers += tally.completeSubscribers
      total.latency.merge(tally.latency)
    }
    return total
  }
}
