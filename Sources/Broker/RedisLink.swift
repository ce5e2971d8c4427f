import ByteBuffers
import EventLoop
import RedisWire

/// One RESP connection to Redis on the broker's loop: commands out; replies, and `message` pushes once
/// subscribed, in.
///
/// Not hiredis: docs/architecture.md, "The bus", says why (in short: a bound on what is queued toward Redis needs
/// the queue's size, which hiredis 0.14's async API does not expose, and libuv stays inside EventLoop).
///
/// Threading: the broker's loop only. Failure (a read error, the end of the stream, bad RESP) is reported once
/// through `onFailure`, after which the link is closed.
final class RedisLink {
  private let stream: ByteStream
  private var decoder: RESPDecoder
  /// A pushed `message`: its channel's and payload's bytes, valid during the call.
  var onMessage: ((UnsafeRawBufferPointer, UnsafeRawBufferPointer) -> Void)?
  /// Any other reply or push, in order.
  var onReply: ((RESPValue) -> Void)?
  var onFailure: ((String) -> Void)?
  /// The socket's queue drained (after a write that had to wait).
  var onDrain: (() -> Void)?
  private(set) var isOpen = true

  /// Connects to `address`; `completion` on the loop.
  static func connect(
    loop: Loop, to address: SocketAddress, maxMessageBytes: Int,
    _ completion: @escaping (Result<RedisLink, LoopError>) -> Void
  ) {
    ByteStream.connect(loop: loop, to: address) { result in
      completion(result.map { RedisLink(stream: $0, maxMessageBytes: maxMessageBytes) })
    }
  }

  private init(stream: ByteStream, maxMessageBytes: Int) {
    self.stream = stream
    // A push carries a channel name besides the message: room for both, and no more.
    decoder = RESPDecoder(maxLength: maxMessageBytes + 1024)
    stream.setNoDelay(true)
    stream.onRead = { [weak self] bytes in self?.received(bytes) }
    stream.onEnd = { [weak self] in self?.fail("redis closed the connection") }
    stream.onError = { [weak self] error in self?.fail("redis: \(error)") }
    stream.onDrain = { [weak self] in self?.onDrain?() }
    stream.startReading()
  }

  /// Bytes written and not yet taken by the kernel.
  var queuedBytes: Int { stream.queuedBytes }

  func send(_ command: [String]) {
    guard isOpen else { return }
    stream.write(ByteBuffer(bytes: RESPEncoder.command(command)))
  }

  func close() {
    guard isOpen else { return }
    isOpen = false
    stream.close()
  }

  private func received(_ bytes: UnsafeRawBufferPointer) {
    decoder.feed(bytes)
    do {
      while isOpen,
        let value = try decoder.next(message: { [onMessage] channel, payload in onMessage?(channel, payload) }
        )
      {
        onReply?(value)
      }
    } catch {
      fail("redis sent bad RESP: \(error)")
    }
  }

  private func fail(_ reason: String) {
    guard isOpen else { return }
    close()
    onFailure?(reason)
  }
}
