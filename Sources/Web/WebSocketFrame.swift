import ByteBuffers

/// One WebSocket frame (RFC 6455 section 5.2) as the codec sees it: the reserved bits are always zero (no
/// extension is negotiated) and the payload is already unmasked.
public struct WebSocketFrame: Equatable, Sendable {
  /// Whether this is the last frame of its message. Always true for control frames.
  public var fin: Bool
  public var opcode: WebSocketOpcode
  /// The application data, unmasked.
  public var payload: ByteBuffer

  public init(fin: Bool = true, opcode: WebSocketOpcode, payload: ByteBuffer = ByteBuffer()) {
    self.fin = fin
    self.opcode = opcode
    self.payload = payload
  }
}

/// Which end of a WebSocket connection this is. It decides masking (RFC 6455 section 5.1): a server receives
/// masked frames and sends unmasked ones; a client the reverse.
public enum WebSocketRole: Sendable {
  case server
  case client
}
