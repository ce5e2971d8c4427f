import ByteBuffers

/// Turns the bytes of a WebSocket connection into frames (RFC 6455 section 5.2). Incremental and I/O-free:
/// append whatever arrived, then call `nextFrame()` until it returns nil.
///
/// It enforces the framing rules that need no message context: reserved bits clear (no extension is
/// negotiated), a known opcode, control frames unfragmented and at most 125 bytes, masking by role, minimal
/// length encodings, and `maxFramePayload`. A frame's size is checked as soon as its header is complete, before
/// its payload is waited for, so a peer cannot make us buffer more than `maxFramePayload` plus one read
/// (provided the caller drains `nextFrame()` after every `append`). Messages are the job of
/// `WebSocketMessageAssembler`.
///
/// Errors are sticky: after `nextFrame()` throws, the decoder drops its input and throws the same error again.
/// Not thread-safe; owned by the connection's loop.
public struct WebSocketFrameDecoder {
  /// Which end we are: a server requires masked frames, a client unmasked ones.
  public let role: WebSocketRole
  /// The largest payload accepted in one frame; a larger one fails with 1009.
  public let maxFramePayload: Int

  /// What was read and not yet returned as frames. Released once drained (`ByteBuffer.empty`): a connection
  /// keeps no receive buffer between reads, which is most of its life (B6, docs/benchmarks.md).
  private var buffer = ByteBuffer.empty
  private var failure: WebSocketError?

  public init(role: WebSocketRole, maxFramePayload: Int) {
    precondition(maxFramePayload >= 0, "maxFramePayload must not be negative")
    self.role = role
    self.maxFramePayload = maxFramePayload
  }

  /// Buffers bytes received from the peer. Ignored once the decoder has failed.
  public mutating func append(_ bytes: UnsafeRawBufferPointer) {
    guard failure == nil else { return }
    buffer.append(contentsOf: bytes)
  }

  /// Buffers the readable bytes of `bytes`. Ignored once the decoder has failed.
  public mutating func append(_ bytes: ByteBuffer) {
    guard failure == nil else { return }
    buffer.append(bytes)
  }

  /// Bytes received but not yet returned as part of a frame.
  public var bufferedBytes: Int { buffer.readableBytes }

  /// Whether the decoder holds a buffer of its own (it does only while bytes wait for the rest of a frame).
  public var holdsBuffer: Bool { !buffer.sharesEmptyStorage }

  /// The next complete frame, or nil when more bytes are needed. After it throws, the decoder is finished and
  /// throws the same error on every call.
  ///
  /// - Throws: `WebSocketError` with 1002 for a framing violation, 1009 for a frame over `maxFramePayload`.
  public mutating func nextFrame() throws(WebSocketError) -> WebSocketFrame? {
    if let failure { throw failure }
    do throws(WebSocketError) {
      return try decodeFrame()
    } catch {
      failure = error
      buffer = .empty
      throw error
    }
  }

  private mutating func decodeFrame() throws(WebSocketError) -> WebSocketFrame? {
    let available = buffer.readableBytes
    guard available >= 2 else { return nil }
    // Every check that the first two bytes allow comes before waiting for more, so a bad frame fails early.
    let first = buffer[0]
    let second = buffer[1]
    if first & 0x70 != 0 {
      throw .protocolError("reserved bits set but no extension was negotiated")
    }
    guard let opcode = WebSocketOpcode(rawValue: first & 0x0F) else {
      throw .protocolError("reserved opcode \(first & 0x0F)")
    }
    let fin = first & 0x80 != 0
    let masked = second & 0x80 != 0
    let shortLength = second & 0x7F
    if opcode.isControl {
      if !fin { throw .protocolError("fragmented control frame") }
      if shortLength > 125 { throw .protocolError("control frame payload longer than 125 bytes") }
    }
    switch role {
    case .server where !masked: throw .protocolError("unmasked frame from a client")
    case .client where masked: throw .protocolError("masked frame from a server")
    default: break
    }

    var headerLength = 2
    let length: UInt64
    switch shortLength {
    case 126:
      guard available >= 4 else { return nil }
      length = readBigEndian(at: 2, count: 2)
      headerLength = 4
      if length < 126 { throw .protocolError("16-bit length used for a payload under 126 bytes") }
    case 127:
      guard available >= 10 else { return nil }
      length = readBigEndian(at: 2, count: 8)
      headerLength = 10
      if length >> 63 != 0 { throw .protocolError("64-bit length with the most significant bit set") }
      if length < 65536 { throw .protocolError("64-bit length used for a payload under 65536 bytes") }
    default:
      length = UInt64(shortLength)
    }
    if length > UInt64(maxFramePayload) {
      throw WebSocketError(
        .messageTooBig, "frame payload of \(length) bytes exceeds the limit of \(maxFramePayload)")
    }

    var maskingKey: UInt32?
    if masked {
      guard available >= headerLength + 4 else { return nil }
      maskingKey = UInt32(readBigEndian(at: headerLength, count: 4))
      headerLength += 4
    }
    let payloadLength = Int(length)
    guard available >= headerLength + payloadLength else { return nil }

    var payload = ByteBuffer(capacity: payloadLength)
    if payloadLength > 0 {
      buffer.withUnsafeReadableBytes { bytes in
        let source = UnsafeRawBufferPointer(rebasing: bytes[headerLength..<headerLength + payloadLength])
        if let maskingKey {
          // Unmask while copying out of the receive buffer: one pass over the payload.
          payload.writeWithUnsafeMutableBytes(minimumWritableBytes: payloadLength) { destination in
            WebSocketMask.apply(key: maskingKey, from: source, to: destination.baseAddress!)
            return payloadLength
          }
        } else {
          payload.append(contentsOf: source)
        }
      }
    }
    buffer.moveReaderIndex(forwardBy: headerLength + payloadLength)
    if buffer.isEmpty { buffer = .empty }
    return WebSocketFrame(fin: fin, opcode: opcode, payload: payload)
  }

  private func readBigEndian(at offset: Int, count: Int) -> UInt64 {
    var value: UInt64 = 0
    for index in offset..<offset + count {
      value = value << 8 | UInt64(buffer[index])
    }
    return value
  }
}
