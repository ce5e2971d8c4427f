// Read-only views of one side of the index. A view shares the set's storage (no copy); the index copies that
// storage only if it is changed while a view is still alive, so drop views before mutating on a hot path.

extension ChannelIndex {
  /// The subscribers of one page, in no particular order.
  public struct Subscribers: Collection, Sendable {
    let keys: KeySet

    public var startIndex: Int { keys.startPosition }
    public var endIndex: Int { keys.endPosition }
    public var count: Int { keys.count }
    public var isEmpty: Bool { keys.isEmpty }
    public func index(after index: Int) -> Int { keys.position(after: index) }
    public subscript(position: Int) -> SubscriberID { SubscriberID(keys.key(at: position)) }
  }

  /// The pages one subscriber listens to, in no particular order.
  public struct Subscriptions: Collection, Sendable {
    let keys: KeySet

    public var startIndex: Int { keys.startPosition }
    public var endIndex: Int { keys.endPosition }
    public var count: Int { keys.count }
    public var isEmpty: Bool { keys.isEmpty }
    public func index(after index: Int) -> Int { keys.position(after: index) }
    public subscript(position: Int) -> PageKey { PageKey(keys.key(at: position)) }
  }
}
