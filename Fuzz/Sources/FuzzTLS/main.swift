import ByteBuffers
import EventLoop
import FuzzSupport
import Web

#if canImport(Glibc)
  import Glibc
#endif

/// The TLS server under hostile bytes, two ways chosen by the input's first byte:
/// - even: the rest is a client's first flight (and what follows), fed to a fresh server session in pieces whose
///   sizes come from the input;
/// - odd: a real client completes a handshake first (TLS 1.3 or 1.2, by the second byte), then the rest reaches
///   the server as records after the handshake, alone or spliced into a real record.
/// Any outcome but a crash, or the server handing on bytes a client never sealed, is a finding; a rejection is
/// a `ByteStreamFilterError` and then the session says no more.
struct Contexts {
  let server: TLSServerContext
  let client: TLSClientContext

  init() {
    server = try! TLSServerContext(ephemeralFor: "localhost")
    let path = "/tmp/pagesync-fuzz-tls-\(getpid()).pem"
    let file = fopen(path, "w")!
    fputs(server.certificatePEM, file)
    fclose(file)
    client = try! TLSClientContext(caFile: path)
    unlink(path)
  }
}

nonisolated(unsafe) let contexts = Contexts()

/// Feeds `bytes` to `session` in pieces sized by `sizes`; returns the plaintext it handed on, or nil once it
/// refused.
func feed(_ session: TLSSession, _ bytes: UnsafeRawBufferPointer, sizes: UnsafeRawBufferPointer) -> [UInt8]? {
  var plain: [UInt8] = []
  var offset = 0
  var turn = 0
  while offset < bytes.count {
    let step = sizes.isEmpty ? bytes.count : Swift.max(1, Int(sizes[turn % sizes.count]) * 4)
    turn += 1
    let end = Swift.min(bytes.count, offset + step)
    do throws(ByteStreamFilterError) {
      _ = try session.open(UnsafeRawBufferPointer(rebasing: bytes[offset..<end])) { piece in
        plain.append(contentsOf: piece)
        return true
      }
    } catch {
      precondition(!error.reason.isEmpty, "a refusal without a reason")
      return nil
    }
    offset = end
  }
  return plain
}

/// Runs a handshake between a fresh client and server session; returns them established.
func handshake(tls12: Bool) -> (client: TLSSession, server: TLSSession) {
  let client = contexts.client.makeSession(host: "localhost", maximumVersion12: tls12)
  let server = contexts.server.makeSession()
  var toServer = try! client.start()
  var rounds = 0
  while !(client.isEstablished && server.isEstablished) {
    rounds += 1
    precondition(rounds < 10, "the handshake does not finish")
    var toClient: ByteBuffer?
    if let bytes = toServer {
      toClient = bytes.withUnsafeReadableBytes { try! server.open($0) { _ in true } }
    }
    toServer = nil
    if let bytes = toClient {
      toServer = bytes.withUnsafeReadableBytes { try! client.open($0) { _ in true } }
    }
  }
  if let bytes = toServer { _ = bytes.withUnsafeReadableBytes { try! server.open($0) { _ in true } } }
  return (client, server)
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> Int32 {
  guard size >= 2 else { return 0 }
  let bytes = UnsafeRawBufferPointer(start: data, count: size)
  let mode = bytes[0]
  let rest = UnsafeRawBufferPointer(rebasing: bytes[2...])
  let sizes = UnsafeRawBufferPointer(rebasing: bytes[1..<2])
  if mode % 2 == 0 {
    let plain = feed(contexts.server.makeSession(), rest, sizes: sizes)
    precondition(plain?.isEmpty ?? true, "plaintext before a handshake")
    return 0
  }
  let (client, server) = handshake(tls12: bytes[1] % 2 == 1)
  if mode % 4 == 1 {
    // Random records after the handshake: nothing a client never sealed may come out.
    let plain = feed(server, rest, sizes: sizes)
    precondition(plain?.isEmpty ?? true, "the server opened records no client sealed")
  } else {
    // A real record with the input spliced into it: either refused, or the very bytes sealed.
    let message = ByteBuffer(string: "GET / HTTP/1.1\r\nHost: localhost\r\n\r\n")
    var sealed = try! client.seal(message).readableBytesArray
    for (index, byte) in rest.enumerated() where !sealed.isEmpty {
      sealed[(index * 7) % sealed.count] ^= byte
    }
    let plain = sealed.withUnsafeBytes { feed(server, $0, sizes: sizes) }
    if let plain {
      precondition(
        plain.isEmpty || plain == message.readableBytesArray || rest.allSatisfy({ $0 == 0 }),
        "a tampered record was opened")
    }
  }
  return 0
}

runLibFuzzer { data, size in fuzz(data ?? UnsafePointer(bitPattern: 1)!, size) }
