/// The opcode of a WebSocket frame (RFC 6455 section 5.2). Reserved opcodes (3-7, 11-15) have no case: a frame
/// carrying one is a protocol error.
public enum WebSocketOpcode: UInt8, Sendable {
  /// A later fragment of a fragmented text or binary message.
  case continuation = 0
  /// The first (or only) frame of a UTF-8 text message.
  case text = 1
  /// The first (or only) frame of a binary message.
  case binary = 2
  /// The closing handshake; the payload is empty or a 2-byte code and a UTF-8 reason.
  case close = 8
  /// A keep-alive probe; the peer answers with a pong carrying the same payload.
  case ping = 9
  /// The answer to a ping, or an unsolicited heartbeat.
  case pong = 10

  /// Whether this is a control frame (close, ping, pong): never fragmented, payload at most 125 bytes, and
  /// allowed between the fragments of a message.
  public var isControl: Bool { rawValue & 0x8 != 0 }
}
