import EventLoop

#if canImport(Glibc)
  import Glibc
#endif

/// Shrinks a TCP stream's kernel buffers (`SO_RCVBUF`, `SO_SNDBUF`), so that a test sees backpressure after
/// kilobytes rather than the megabytes loopback buffers grow to. Shrink the sender's: a receive buffer shrunk on
/// an open loopback connection can leave its window shut for hundreds of milliseconds (the window update waits
/// for a whole 64 KiB segment's room).
public func shrinkSocketBuffers(_ stream: ByteStream, receive: Int32? = nil, send: Int32? = nil) {
  guard let fd = stream.fileDescriptor else { return }
  shrinkSocketBuffers(fileDescriptor: fd, receive: receive, send: send)
}

/// `shrinkSocketBuffers` for a socket known by its descriptor (a `WebSocket`'s, say).
public func shrinkSocketBuffers(fileDescriptor fd: Int32, receive: Int32? = nil, send: Int32? = nil) {
  for (option, size) in [(SO_RCVBUF, receive), (SO_SNDBUF, send)] {
    guard var size else { continue }
    setsockopt(fd, SOL_SOCKET, option, &size, socklen_t(MemoryLayout<Int32>.size))
  }
}

/// A peer that reads slowly: after `startAfter` ms, one read every `interval` ms (reading stops after each), until
/// the stream ends or fails; then it closes the stream and calls `onEnd`.
///
/// Threading: the stream's loop.
public final class SlowReader {
  public private(set) var bytes: [UInt8] = []
  public private(set) var ended = false
  /// Whether the stream ended with an error (a reset) rather than EOF.
  public private(set) var failed = false
  public var onEnd: (() -> Void)?
  private let stream: ByteStream
  private let timer: LoopTimer

  public init(_ stream: ByteStream, interval: UInt64, startAfter: UInt64 = 0) {
    self.stream = stream
    timer = LoopTimer(loop: stream.loop)
    stream.onRead = { [unowned self] chunk in
      self.bytes.append(contentsOf: chunk)
      self.stream.stopReading()
    }
    stream.onEnd = { [unowned self] in self.finish(failed: false) }
    stream.onError = { [unowned self] _ in self.finish(failed: true) }
    timer.start(after: max(startAfter, 1), repeatEvery: interval) { [unowned self] in
      self.stream.startReading()
    }
  }

  public var string: String { String(decoding: bytes, as: UTF8.self) }

  private func finish(failed: Bool) {
    guard !ended else { return }
    ended = true
    self.failed = failed
    timer.close()
    stream.close()
    onEnd?()
  }
}

/// Ignores `SIGPIPE` in the test process, as the programs do (`BrokerMain`, `DaemonMain`): a test whose peer goes
/// away while the server writes to it must see the write fail, not the process die.
public func ignoreBrokenPipes() {
  signal(SIGPIPE, SIG_IGN)
}
