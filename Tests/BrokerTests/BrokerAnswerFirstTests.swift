import EventLoop
import EventLoopTestKit
import Testing
import Web

@testable import Broker

#if canImport(Glibc)
  import Glibc
#endif

/// A batch's answer goes out before its notifications (docs/benchmarks.md, "B1 at low rates"): queueing a
/// `changed` frame to every subscriber of a busy page takes longer than writing one answer, and the writer waits
/// for the answer, not for them.
@Suite struct BrokerAnswerFirstTests {
  init() { ignoreBrokenPipes() }

  /// Over a real loopback connection: when the broker queues the first notification of a batch, the batch's
  /// answer is already in the writer's socket (the kernel has it), not waiting for the end of the loop turn.
  @Test func theBatchAnswerIsInTheKernelBeforeTheFirstNotificationIsQueued() throws {
    try withBroker { harness in
      try harness.commit(client: "setup", [.create("hot", title: "Hot")])
      let stream = try harness.openStream()
      _ = try harness.subscribe(stream, ["hot"])
      let address = try harness.broker.http.listen(on: .inet(host: "127.0.0.1", port: 0))
      guard case .inet(_, let port) = address else {
        Issue.record("not an inet address: \(address)")
        return
      }
      let client = try LoopbackClient(port: port)
      defer { client.close() }
      let body =
        #"{"client":"writer","workspace":"w1","mutations":[{"id":1,"page":"hot","time":"1700000000100:0","type":"set_title","title":"Hotter"}]}"#
      try client.send(
        "POST /v1/batch HTTP/1.1\r\nHost: broker\r\nAuthorization: Bearer \(BrokerHarness.alice)\r\n"
          + "Content-Type: application/json\r\nContent-Length: \(body.utf8.count)\r\n\r\n\(body)")
      var answerBytesAtFirstFrame: Int?
      stream.onSend = { _ in
        if answerBytesAtFirstFrame == nil { answerBytesAtFirstFrame = client.readableBytes() }
      }
      let framesBefore = stream.frames.count
      try harness.run(until: { stream.frames.count > framesBefore })
      let atFirstFrame = try #require(answerBytesAtFirstFrame)
      #expect(atFirstFrame > 0, "the answer was still queued when the notifications were")
      try harness.run(until: { client.readableBytes() > 0 })
      #expect(client.readText().hasPrefix("HTTP/1.1 200"))
    }
  }
}

/// A blocking loopback client on a plain socket: the test reads the kernel's view of it (`MSG_PEEK`) while the
/// broker's loop runs on the same thread.
private final class LoopbackClient {
  struct Failed: Error { var what: String }
  private let fd: Int32

  init(port: Int) throws {
    fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard fd >= 0 else { throw Failed(what: "socket") }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_port = UInt16(port).bigEndian
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    // The listener's backlog completes the handshake without the loop running.
    let connected = withUnsafePointer(to: &address) {
      $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
        connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
      }
    }
    guard connected == 0 else {
      Glibc.close(fd)
      throw Failed(what: "connect: errno \(errno)")
    }
  }

  func send(_ text: String) throws {
    let bytes = Array(text.utf8)
    let sent = bytes.withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, 0) }
    guard sent == bytes.count else { throw Failed(what: "send: \(sent)") }
  }

  /// Bytes the kernel holds for this socket, without taking them and without waiting.
  func readableBytes() -> Int {
    var buffer = [UInt8](repeating: 0, count: 4096)
    let count = buffer.withUnsafeMutableBytes {
      recv(fd, $0.baseAddress, $0.count, Int32(MSG_PEEK) | Int32(MSG_DONTWAIT))
    }
    return max(count, 0)
  }

  func readText() -> String {
    var buffer = [UInt8](repeating: 0, count: 4096)
    let count = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT)) }
    return String(decoding: buffer.prefix(max(count, 0)), as: UTF8.self)
  }

  func close() { Glibc.close(fd) }
}
