import ByteBuffers
import Testing

@testable import Web

/// Bytes from a hex string such as "81 05 48 65"; spaces are ignored.
func hexBytes(_ hex: String) -> [UInt8] {
  let digits = Array(hex.utf8.filter { $0 != UInt8(ascii: " ") })
  precondition(digits.count % 2 == 0, "odd number of hex digits")
  return stride(from: 0, to: digits.count, by: 2).map { index in
    hexDigit(digits[index]) << 4 | hexDigit(digits[index + 1])
  }
}

private func hexDigit(_ character: UInt8) -> UInt8 {
  switch character {
  case UInt8(ascii: "0")...UInt8(ascii: "9"): character - UInt8(ascii: "0")
  case UInt8(ascii: "a")...UInt8(ascii: "f"): character - UInt8(ascii: "a") + 10
  case UInt8(ascii: "A")...UInt8(ascii: "F"): character - UInt8(ascii: "A") + 10
  default: preconditionFailure("not a hex digit")
  }
}

/// Lowercase hex of `bytes`, for comparing digests with published vectors.
func hexString(_ bytes: some Sequence<UInt8>) -> String {
  let digits = Array("0123456789abcdef".utf8)
  var out = [UInt8]()
  for byte in bytes {
    out.append(digits[Int(byte >> 4)])
    out.append(digits[Int(byte & 0xF)])
  }
  return String(decoding: out, as: UTF8.self)
}

/// One encoded frame as an array.
func encodedFrame(
  _ opcode: WebSocketOpcode, _ payload: [UInt8], fin: Bool = true, maskingKey: UInt32? = nil
) -> [UInt8] {
  var buffer = ByteBuffer()
  payload.withUnsafeBytes {
    WebSocketFrameEncoder.encode(opcode: opcode, payload: $0, fin: fin, maskingKey: maskingKey, into: &buffer)
  }
  return buffer.readableBytesArray
}

/// The frames a decoder produces from `stream` appended in pieces of the given sizes (the rest in one piece),
/// draining `nextFrame()` after every append, or the error it stops with.
func decodeFrames(
  _ stream: [UInt8], role: WebSocketRole = .server, maxFramePayload: Int = 1 << 20, pieces: [Int] = []
) -> Result<[WebSocketFrame], WebSocketError> {
  var decoder = WebSocketFrameDecoder(role: role, maxFramePayload: maxFramePayload)
  var frames: [WebSocketFrame] = []
  var offset = 0
  var sizes = pieces[...]
  while offset < stream.count {
    let size = min(sizes.popFirst() ?? stream.count, stream.count - offset)
    stream[offset..<offset + size].withUnsafeBytes { decoder.append($0) }
    offset += size
    do throws(WebSocketError) {
      while let frame = try decoder.nextFrame() { frames.append(frame) }
    } catch {
      return .failure(error)
    }
  }
  return .success(frames)
}

/// The close code of a failed result, nil on success.
func closeCode<T>(_ result: Result<T, WebSocketError>) -> WebSocketCloseCode? {
  if case .failure(let error) = result { return error.closeCode }
  return nil
}

extension RandomNumberGenerator {
  mutating func bytes(_ count: Int) -> [UInt8] {
    (0..<count).map { _ in UInt8.random(in: 0...255, using: &self) }
  }
}
