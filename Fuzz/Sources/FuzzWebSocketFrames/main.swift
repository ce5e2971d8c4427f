import FuzzSupport
import Web

/// Feeds the input to a server-side frame decoder and message assembler in pieces whose sizes come from the
/// input itself; any outcome but a crash, or an error with a code other than 1002/1007/1009, is a finding.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> Int32 {
  let bytes = UnsafeRawBufferPointer(start: data, count: size)
  for role in [WebSocketRole.server, .client] {
    var decoder = WebSocketFrameDecoder(role: role, maxFramePayload: 1024)
    var assembler = WebSocketMessageAssembler(maxMessageSize: 2048)
    var offset = 0
    do throws(WebSocketError) {
      while offset < size {
        let step = Swift.max(1, Int(bytes[offset]) % 64)
        let end = Swift.min(size, offset + step)
        decoder.append(UnsafeRawBufferPointer(rebasing: bytes[offset..<end]))
        offset = end
        while let frame = try decoder.nextFrame() { _ = try assembler.push(frame) }
      }
    } catch {
      let allowed: Set<WebSocketCloseCode> = [.protocolError, .invalidFramePayloadData, .messageTooBig]
      precondition(allowed.contains(error.closeCode), "unexpected close code \(error.closeCode)")
    }
  }
  return 0
}

runLibFuzzer { data, size in fuzz(data ?? UnsafePointer(bitPattern: 1)!, size) }
