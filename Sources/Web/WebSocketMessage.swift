import ByteBuffers

/// A complete WebSocket message, or a control frame, as the application sees it.
public enum WebSocketMessage: Equatable, Sendable {
  /// A text message, already validated as UTF-8.
  case text(String)
  /// A binary message.
  case binary(ByteBuffer)
  /// A ping; the connection answers with a pong carrying the same payload.
  case ping(ByteBuffer)
  /// A pong.
  case pong(ByteBuffer)
  /// A close frame. `code` is nil when the frame had no payload (report 1005 locally); the code is otherwise
  /// one a peer may send, and `reason` is valid UTF-8 (possibly empty).
  case close(code: WebSocketCloseCode?, reason: String)
}
