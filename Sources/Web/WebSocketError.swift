/// A violation that ends the connection with `closeCode` and a human reason (<= 123 bytes of UTF-8).
///
/// The codec throws it; the connection sends a close frame with `closeCode` and `reason`, then closes. The
/// reason is meant for logs and for the peer's developer, so it names what was wrong but never echoes payload.
public struct WebSocketError: Error, Equatable, Sendable, CustomStringConvertible {
  /// The code to close the connection with: 1002, 1007 or 1009 from the codec.
  public var closeCode: WebSocketCloseCode
  /// What went wrong, at most 123 bytes of UTF-8 so it fits a close frame with its code.
  public var reason: String

  /// An error with `closeCode`; `reason` is cut to 123 bytes of UTF-8 on a code point boundary.
  public init(_ closeCode: WebSocketCloseCode, _ reason: String) {
    self.closeCode = closeCode
    self.reason = WebSocketFrameEncoder.truncateUTF8(
      reason, maxBytes: WebSocketFrameEncoder.maxCloseReasonBytes)
  }

  public var description: String { "WebSocketError(\(closeCode): \(reason))" }

  static func protocolError(_ reason: String) -> WebSocketError { WebSocketError(.protocolError, reason) }
}
