import ByteBuffers

/// Writes WebSocket frames (RFC 6455 section 5.2). Stateless; fragmentation is the caller's choice of `fin`.
public enum WebSocketFrameEncoder {
  /// The longest close reason that fits a control frame next to its 2-byte code.
  public static let maxCloseReasonBytes = 123

  /// Appends one frame to `buffer`. With a `maskingKey` (a client) the payload is masked while it is copied;
  /// without one (a server) it is copied as is.
  ///
  /// The key's big-endian bytes are the wire key: `0x37FA_213D` is sent as `37 fa 21 3d`. A client must use a
  /// fresh unpredictable key for every frame (`Crypto.randomUInt32()`).
  ///
  /// - Precondition: a control frame (close, ping, pong) has `fin` set and at most 125 bytes of payload.
  public static func encode(
    opcode: WebSocketOpcode, payload: UnsafeRawBufferPointer, fin: Bool = true, maskingKey: UInt32? = nil,
    into buffer: inout ByteBuffer
  ) {
    let count = payload.count
    precondition(
      !opcode.isControl || (fin && count <= 125), "control frames are unfragmented and <= 125 bytes")
    buffer.append(byte: (fin ? 0x80 : 0) | opcode.rawValue)
    let maskBit: UInt8 = maskingKey == nil ? 0 : 0x80
    if count < 126 {
      buffer.append(byte: maskBit | UInt8(count))
    } else if count <= Int(UInt16.max) {
      buffer.append(byte: maskBit | 126)
      buffer.append(bigEndian: UInt16(count))
    } else {
      buffer.append(byte: maskBit | 127)
      buffer.append(bigEndian: UInt64(count))
    }
    guard let maskingKey else {
      buffer.append(contentsOf: payload)
      return
    }
    buffer.append(bigEndian: maskingKey)
    guard count > 0 else { return }
    buffer.writeWithUnsafeMutableBytes(minimumWritableBytes: count) { destination in
      WebSocketMask.apply(key: maskingKey, from: payload, to: destination.baseAddress!)
      return count
    }
  }

  /// Appends one frame carrying the readable bytes of `payload`; see the pointer variant.
  public static func encode(
    opcode: WebSocketOpcode, payload: ByteBuffer, fin: Bool = true, maskingKey: UInt32? = nil,
    into buffer: inout ByteBuffer
  ) {
    // `payload` is a copy, so its storage stays alive (and unchanged) even if it is `buffer`'s own.
    payload.withUnsafeReadableBytes {
      encode(opcode: opcode, payload: $0, fin: fin, maskingKey: maskingKey, into: &buffer)
    }
  }

  /// The payload of a close frame: the 2-byte code, then `reason` cut to 123 bytes on a UTF-8 boundary so the
  /// payload fits a control frame (125 bytes).
  public static func closePayload(code: WebSocketCloseCode, reason: String) -> ByteBuffer {
    let reason = truncateUTF8(reason, maxBytes: maxCloseReasonBytes)
    var payload = ByteBuffer(capacity: 2 + reason.utf8.count)
    payload.append(bigEndian: code.rawValue)
    payload.append(string: reason)
    return payload
  }

  /// `string` cut to at most `maxBytes` bytes of UTF-8, never inside a code point.
  static func truncateUTF8(_ string: String, maxBytes: Int) -> String {
    let utf8 = string.utf8
    guard utf8.count > maxBytes else { return string }
    var end = utf8.index(utf8.startIndex, offsetBy: maxBytes)
    // A continuation byte (10xxxxxx) at the cut means the cut is inside a code point: back up to its lead.
    while end > utf8.startIndex && utf8[end] & 0xC0 == 0x80 {
      end = utf8.index(before: end)
    }
    // Decoding (not `string[..<end]`) keeps the cut on a scalar boundary: String subscripts round down to a
    // Character, which would also drop a base character whose combining mark did not fit.
    return String(decoding: utf8[..<end], as: UTF8.self)
  }
}
