import StrictJSON

extension BrokerProtocol {
  /// One frame the broker sends on the device stream (docs/protocol.md, "The device stream"), told apart by its
  /// `op`. Each case holds the message type the broker writes, so both sides share one definition of a frame.
  ///
  /// A client reads frames with `init(strictJSON:)`: a broker (or anyone on the path of plain `ws://`) must not
  /// be able to stop the client with a frame, as `JSONDecoder` can be made to trap (docs/threat-model.md).
  public enum ServerMessage: Sendable {
    /// The answer to a `subscribe` frame.
    case subscribed(Subscribed)
    /// The answer to an `unsubscribe` frame.
    case unsubscribed(Unsubscribed)
    /// Pages changed, each with its newest `lastUpdatedTime`.
    case changed(Changed)
    /// Subscriptions the broker withdrew: the token may no longer see these pages.
    case revoked(Revoked)
    /// A frame the broker could not act on; the stream stays open.
    case error(StreamError)
    /// An `op` this version does not know: a newer broker's frame, to be ignored.
    case unknown(op: String)

    /// Reads a text frame with the strict decoder. Throws `DecodingError` for a frame that is not strict JSON
    /// or does not fit its `op`'s message; never traps.
    public init(strictJSON text: String) throws {
      self = try StrictJSONDecoder().decode(ServerMessage.self, from: text)
    }

    /// The frame's `op`.
    public var op: String {
      switch self {
      case .subscribed: "subscribed"
      case .unsubscribed: "unsubscribed"
      case .changed: "changed"
      case .revoked: "revoked"
      case .error: "error"
      case .unknown(let op): op
      }
    }
  }
}

extension BrokerProtocol.ServerMessage: Codable {
  private enum CodingKeys: String, CodingKey {
    case op
  }

  /// Reads `op`, then the whole object as that op's message (whose own `op` member is the same value).
  public init(from decoder: any Decoder) throws {
    let op = try decoder.container(keyedBy: CodingKeys.self).decode(String.self, forKey: .op)
    switch op {
    case "subscribed": self = .subscribed(try BrokerProtocol.Subscribed(from: decoder))
    case "unsubscribed": self = .unsubscribed(try BrokerProtocol.Unsubscribed(from: decoder))
    case "changed": self = .changed(try BrokerProtocol.Changed(from: decoder))
    case "revoked": self = .revoked(try BrokerProtocol.Revoked(from: decoder))
    case "error": self = .error(try BrokerProtocol.StreamError(from: decoder))
    default: self = .unknown(op: op)
    }
  }

  /// Writes the case's message as the broker does; `unknown` as `{"op": OP}`.
  public func encode(to encoder: any Encoder) throws {
    switch self {
    case .subscribed(let message): try message.encode(to: encoder)
    case .unsubscribed(let message): try message.encode(to: encoder)
    case .changed(let message): try message.encode(to: encoder)
    case .revoked(let message): try message.encode(to: encoder)
    case .error(let message): try message.encode(to: encoder)
    case .unknown(let op):
      var container = encoder.container(keyedBy: CodingKeys.self)
      try container.encode(op, forKey: .op)
    }
  }
}
