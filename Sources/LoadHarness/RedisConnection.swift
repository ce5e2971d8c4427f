import ByteBuffers
import EventLoop
import LoadCore
import Web

/// A RESP connection to redis-server on the run's loop: commands out, replies and pushes in.
///
/// Replies to commands complete in order (Redis answers a connection's commands in the order sent); once the
/// connection has subscribed, `onPush` gets the `message` pushes instead.
///
/// Threading: the run's loop only.
final class RedisConnection {
  private let stream: ByteStream
  private var decoder = RESPDecoder()
  private var waiting: [(Result<RESPValue, LoadError>) -> Void] = []
  private var waitingHead = 0
  /// A pushed `message`: its channel's and payload's bytes, valid during the call.
  var onPush: ((UnsafeRawBufferPointer, UnsafeRawBufferPointer) -> Void)?
  private(set) var failure: LoadError?

  private init(stream: ByteStream, tls: TLSClientContext?, host: String?) {
    self.stream = stream
    stream.setNoDelay(true)
    // Before anything is read or written: RESP goes through the same TLS layer as the broker's clients.
    if let tls, let host { stream.install(tls.makeSession(host: host)) }
    // Weak: a run may be over (and its connections freed) while a read is still being delivered.
    stream.onRead = { [weak self] bytes in self?.received(bytes) }
    stream.onEnd = { [weak self] in self?.fail(.connectFailed("redis closed the connection")) }
    stream.onError = { [weak self] error in self?.fail(.connectFailed("redis: \(error)")) }
    stream.startReading()
  }

  /// Connects to `address`; with `tls`, over TLS, redis-server verified as `address`'s host.
  static func connect(
    loop: Loop, to address: SocketAddress, tls: TLSClientContext?,
    _ completion: @escaping (Result<RedisConnection, LoadError>) -> Void
  ) {
    ByteStream.connect(loop: loop, to: address) { result in
      switch result {
      case .failure(let error): completion(.failure(.connectFailed("redis at \(address): \(error)")))
      case .success(let stream):
        let host: String? = if case .inet(let host, _) = address { host } else { nil }
        completion(.success(RedisConnection(stream: stream, tls: tls, host: host)))
      }
    }
  }

  /// Opens `count` connections at once, each handed to `each` as it opens (the caller keeps and closes it); `done`
  /// once all are open, or at the first failure.
  static func connect(
    loop: Loop, to address: SocketAddress, tls: TLSClientContext?, count: Int,
    each: @escaping (RedisConnection) -> Void,
    then done: @escaping (Result<Void, LoadError>) -> Void
  ) {
    forEachConcurrently(
      count, concurrency: 0,
      { _, opened in
        connect(loop: loop, to: address, tls: tls) { result in
          if case .success(let connection) = result { each(connection) }
          opened(result.map { _ in () })
        }
      }, then: done)
  }

  /// Sends `command`; `reply` gets the answer (for SUBSCRIBE: the subscription's confirmation).
  func send(_ command: [String], reply: @escaping (Result<RESPValue, LoadError>) -> Void) {
    if let failure {
      reply(.failure(failure))
      return
    }
    waiting.append(reply)
    stream.write(ByteBuffer(bytes: RESPEncoder.command(command)))
  }

  /// Sends `command`, which Redis answers with `replies` replies (a SUBSCRIBE of N channels: N confirmations);
  /// `reply` gets the last one, or the first failure.
  func send(_ command: [String], replies: Int, reply: @escaping (Result<RESPValue, LoadError>) -> Void) {
    if let failure {
      reply(.failure(failure))
      return
    }
    var failed = false
    for _ in 1..<max(replies, 1) {
      waiting.append { result in
        if case .failure = result, !failed {
          failed = true
          reply(result)
        }
      }
    }
    waiting.append { result in if !failed { reply(result) } }
    stream.write(ByteBuffer(bytes: RESPEncoder.command(command)))
  }

  var pendingReplies: Int { waiting.count - waitingHead }
  var bytesSent: Int { stream.bytesWritten }
  var bytesReceived: Int { stream.bytesRead }
  var fileDescriptor: Int32? { stream.fileDescriptor }

  func close() {
    failure = failure ?? .connectFailed("closed")
    stream.close()
  }

  private func received(_ bytes: UnsafeRawBufferPointer) {
    decoder.feed(bytes)
    do {
      while let value = try decoder.next(message: { [onPush] channel, payload in onPush?(channel, payload) })
      {
        dispatch(value)
      }
    } catch {
      fail(.connectFailed("redis sent bad RESP: \(error)"))
    }
  }

  private func dispatch(_ value: RESPValue) {
    if case .array(let parts?) = value, parts.count == 3, case .bulk(let kind?) = parts[0],
      kind == Array("message".utf8), case .bulk(let channel?) = parts[1], case .bulk(let payload?) = parts[2]
    {
      channel.withUnsafeBytes { channel in payload.withUnsafeBytes { onPush?(channel, $0) } }
      return
    }
    guard waitingHead < waiting.count else { return }
    let reply = waiting[waitingHead]
    waitingHead += 1
    if waitingHead == waiting.count {
      waiting.removeAll(keepingCapacity: true)
      waitingHead = 0
    }
    if case .error(let message) = value {
      reply(.failure(.setupFailed("redis: \(message)")))
    } else {
      reply(.success(value))
    }
  }

  private func fail(_ error: LoadError) {
    guard failure == nil else { return }
    failure = error
    let pending = waiting[waitingHead...]
    waiting = []
    waitingHead = 0
    stream.close()
    for reply in pending { reply(.failure(error)) }
  }
}
