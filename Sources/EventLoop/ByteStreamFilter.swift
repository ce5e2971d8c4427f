import ByteBuffers

/// A layer between a `ByteStream`'s socket and its owner that turns the bytes on the wire into the bytes the
/// owner reads and writes: TLS (Web's `TLSSession`). The owner's code is the same over a filtered stream as over
/// a plain one.
///
/// The stream holds what its owner writes until `isEstablished` (a TLS handshake done, the peer verified), then
/// hands it to `seal` once per loop turn; everything a filter returns goes to the socket.
///
/// Threading: loop thread only, called by the stream.
public protocol ByteStreamFilter: AnyObject {
  /// Whether the owner's bytes may go out (`seal`): false until a handshake completes.
  var isEstablished: Bool { get }
  /// Called once when installed: the bytes to send first (a client's first flight), if any.
  func start() throws(ByteStreamFilterError) -> ByteBuffer?
  /// Bytes read from the socket. Hands each piece of the owner's bytes to `deliver` (valid only during the call;
  /// `deliver` returns false when the stream closed and no more should be delivered); returns the bytes to send
  /// (handshake messages, tickets, alerts). The filter keeps at most a partial record between calls.
  func open(_ wire: UnsafeRawBufferPointer, deliver: (UnsafeRawBufferPointer) -> Bool)
    throws(ByteStreamFilterError) -> ByteBuffer?
  /// The owner's bytes, once established: what goes on the wire for them.
  func seal(_ bytes: ByteBuffer) throws(ByteStreamFilterError) -> ByteBuffer
  /// The bytes that tell the peer nothing more comes (TLS's close_notify), sent before the stream's FIN; nil for
  /// none.
  func finish() -> ByteBuffer?
}

/// Why a filter gave up on the stream: a failed handshake (with the peer's certificate problem), a bad record.
/// `alert` holds the bytes to send to the peer before closing, if any.
public struct ByteStreamFilterError: Error, Sendable, CustomStringConvertible {
  public var reason: String
  public var alert: ByteBuffer?
  public init(reason: String, alert: ByteBuffer? = nil) {
    self.reason = reason
    self.alert = alert
  }
  public var description: String { reason }
}
