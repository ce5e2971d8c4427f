import ByteBuffers
import CLibUV

#if canImport(Glibc)
  import Glibc
#endif

/// A connected byte stream: a TCP connection or a Unix-domain socket (or a pipe to a child process), one type
/// for all.
///
/// Reading: `startReading()` delivers bytes to `onRead` as they arrive. The bytes live in the loop's shared read
/// buffer and are valid only during the callback: consume or copy them there. `onEnd` reports the peer's end of
/// stream, `onError` a failed read or write; after either, the owner should close the stream.
///
/// Writing: `write` only queues (no copy: the buffer's storage is retained). Everything queued during one loop turn
/// goes out at the end of the turn in one vectored `uv_try_write` (and, for what the kernel did not take, one
/// `uv_write`). `queuedBytes` counts what the kernel has not accepted yet, for backpressure; `onDrain` fires when
/// it falls back to zero. `write` itself sets no bound: an owner that answers what it reads stops reading while
/// `queuedBytes` is high (HTTP and WebSocket connections do). A peer that takes nothing at all for
/// `writeStallTimeout` ms while bytes wait is reported to `onWriteStall` (or the stream closes).
///
/// Threading: loop thread only.
public final class ByteStream: LoopHandle {
  // Stored properties: wide ones first, the one-byte ones last and together (Swift lays a class out in
  // declaration order, and a `Bool` between two words costs a word; B6, memory per idle connection).

  /// What the stream runs over.
  public enum Kind: Sendable { case tcp, pipe }

  /// Bytes arrived; valid only during the call.
  public var onRead: ((UnsafeRawBufferPointer) -> Void)?
  /// The peer will send no more (EOF).
  public var onEnd: (() -> Void)?
  /// A read or write failed. When unset, the stream closes itself.
  public var onError: ((LoopError) -> Void)?
  /// Every queued byte has been handed to the kernel.
  public var onDrain: (() -> Void)?
  /// The peer took no byte for `writeStallTimeout` ms while bytes were queued for it. When unset, the stream
  /// closes.
  public var onWriteStall: (() -> Void)?
  /// How long (ms) the peer may take no byte while bytes are queued for it before `onWriteStall`; 0 for no limit.
  /// Progress is any byte the kernel accepts (a partial write counts), checked every quarter of the time, so a
  /// stall is reported between 1 and 1.25 times it after the last progress. A slow reader is never a stalled one.
  public var writeStallTimeout: UInt64 = 0
  /// The stream is being closed, by its owner or by someone else (`Loop.closeAllHandles` at shutdown). Runs
  /// once, before the other callbacks are released; an owner that closes the stream itself clears it first.
  public var onClose: (() -> Void)?

  /// Bytes queued or in flight that the kernel has not accepted yet.
  public private(set) var queuedBytes = 0
  /// Write system calls made (each `uv_try_write` or `uv_write`), for tests and metrics.
  public private(set) var writeCalls = 0
  /// Bytes read and written so far.
  public private(set) var bytesRead = 0
  public private(set) var bytesWritten = 0
  /// Whether the stream holds a write queue of its own: only while bytes wait for the kernel (tests).
  public var holdsWriteQueue: Bool { pending.capacity > 0 || unsealed.capacity > 0 }

  private var pending: [ByteBuffer] = []
  /// With a filter: what the owner wrote and the filter has not sealed yet (counted in `queuedBytes`).
  private var unsealed: [ByteBuffer] = []
  /// TLS or another layer between the socket and the owner (`install(_:)`).
  public private(set) var filter: (any ByteStreamFilter)?
  private var pendingHead = 0
  private var lingering: LoopTimer?
  /// Bytes of the `uv_write` in flight (their progress is libuv's write queue size going down).
  private var inFlightBytes = 0
  /// Checks, while bytes are queued, that the peer takes some (`writeStallTimeout`).
  private var stallWatch: LoopTimer?
  private var stallMark = 0
  private var stallSince: UInt64 = 0
  /// Set by `closeGracefully`: how long to linger once everything queued is written.
  private var gracefulLinger: UInt64?
  public let kind: Kind
  public private(set) var isReading = false
  /// The owner stopped reading while the filter may still hold bytes it opened from an earlier read (records
  /// after the one delivered): `startReading` has them delivered at the end of the turn, socket or not.
  private var filterMayHoldMore = false
  private var filterDrainPending = false
  private var writeInFlight = false
  private var flushScheduled = false
  private var shutdownRequested = false
  private var shutdownWhenDrained = false
  /// The peer's end of stream was read.
  private var sawEndOfStream = false

  /// Most buffers handed to one write call (Linux IOV_MAX is 1024).
  static let maxBuffersPerWrite = 256
  /// Writes up to this size are merged into the previous queued buffer...
  static let mergeLimit = 1024
  /// ...while it stays within this size.
  static let mergedBufferLimit = 16 * 1024

  init(loop: Loop, kind: Kind) throws(LoopError) {
    self.kind = kind
    switch kind {
    case .tcp: super.init(loop: loop, type: UV_TCP)
    case .pipe: super.init(loop: loop, type: UV_NAMED_PIPE)
    }
    let result =
      switch kind {
      case .tcp: uv_tcp_init(loop.uv, pointer(as: uv_tcp_t.self))
      case .pipe: uv_pipe_init(loop.uv, pointer(as: uv_pipe_t.self), 0)
      }
    if result < 0 {
      discardUnregistered()
      throw LoopError(code: result, operation: "init stream")
    }
    register()
  }

  var stream: UnsafeMutablePointer<uv_stream_t> { pointer(as: uv_stream_t.self) }

  // MARK: Connecting

  /// Connects to `address` and calls `completion` on the loop thread with the stream or the error. A host name
  /// is resolved first (`uv_getaddrinfo`) and its addresses tried in order.
  public static func connect(
    loop: Loop, to address: SocketAddress, _ completion: @escaping (Result<ByteStream, LoopError>) -> Void
  ) {
    switch address {
    case .unix(let path):
      let stream: ByteStream
      do { stream = try ByteStream(loop: loop, kind: .pipe) } catch {
        completion(.failure(error))
        return
      }
      let request = ConnectRequest(stream: stream, operation: "connect \(address)", completion: completion)
      uv_pipe_connect(request.request, stream.pointer(as: uv_pipe_t.self), path) { req, status in
        ConnectRequest.complete(req, status)
      }
    case .inet(let host, let port):
      if var storage = address.numericSockaddr() {
        connectTCP(loop: loop, to: &storage, description: address.description, completion)
        return
      }
      Resolver.resolve(loop: loop, host: host, port: port) { result in
        switch result {
        case .failure(let error): completion(.failure(error))
        case .success(let candidates):
          connectFirst(loop: loop, candidates[...], address.description, completion)
        }
      }
    }
  }

  private static func connectFirst(
    loop: Loop, _ candidates: ArraySlice<sockaddr_storage>, _ description: String,
    _ completion: @escaping (Result<ByteStream, LoopError>) -> Void
  ) {
    var first = candidates.first!
    connectTCP(loop: loop, to: &first, description: description) { result in
      if case .failure = result, candidates.count > 1 {
        connectFirst(loop: loop, candidates.dropFirst(), description, completion)
      } else {
        completion(result)
      }
    }
  }

  private static func connectTCP(
    loop: Loop, to storage: inout sockaddr_storage, description: String,
    _ completion: @escaping (Result<ByteStream, LoopError>) -> Void
  ) {
    let stream: ByteStream
    do { stream = try ByteStream(loop: loop, kind: .tcp) } catch {
      completion(.failure(error))
      return
    }
    let request = ConnectRequest(stream: stream, operation: "connect \(description)", completion: completion)
    let result = withUnsafePointer(to: &storage) {
      $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { addr in
        uv_tcp_connect(request.request, stream.pointer(as: uv_tcp_t.self), addr) { req, status in
          ConnectRequest.complete(req, status)
        }
      }
    }
    if result < 0 {
      // The callback will never run: release what was retained for it.
      request.abandon(status: result)
    }
  }

  // MARK: Filtering

  /// Puts `filter` between the socket and the owner, before anything is read or written: from now on `onRead`
  /// gets what the filter opens, and what is written goes out sealed by it (held until `isEstablished`). A
  /// filter that fails reports to `onError` (operation `"TLS"`, the code `EPROTO`) after its alert is sent.
  public func install(_ filter: any ByteStreamFilter) {
    precondition(self.filter == nil && bytesRead == 0 && bytesWritten == 0 && queuedBytes == 0)
    self.filter = filter
    do throws(ByteStreamFilterError) {
      if let first = try filter.start() { writeWire(first) }
    } catch {
      filterFailed(error)
    }
  }

  /// Bytes of the filter itself (handshake, alerts, sealed records) for the socket.
  private func writeWire(_ buffer: ByteBuffer) {
    guard !isClosing, buffer.readableBytes > 0 else { return }
    queuedBytes += buffer.readableBytes
    pending.append(buffer)
    scheduleFlushIfNeeded()
  }

  private func filterFailed(_ error: ByteStreamFilterError) {
    unsealed = []
    if let alert = error.alert {
      // Out at once: the owner closes the stream on the error, and the peer should learn why (an alert such as
      // protocol_version), not only see the connection drop.
      writeWire(alert)
      flush()
    }
    fail(LoopError(code: Int32(UV_EPROTO.rawValue), operation: "TLS: \(error.reason)"))
  }

  /// Seals what the owner wrote, once the filter may; the sealed bytes replace it in `queuedBytes`.
  private func sealUnsealed() {
    guard let filter, !unsealed.isEmpty, filter.isEstablished else { return }
    let owned = unsealed
    unsealed = []
    for buffer in owned {
      queuedBytes -= buffer.readableBytes
      do throws(ByteStreamFilterError) {
        let sealed = try filter.seal(buffer)
        if sealed.readableBytes > 0 {
          queuedBytes += sealed.readableBytes
          pending.append(sealed)
        }
      } catch {
        filterFailed(error)
        return
      }
    }
  }

  private func openFiltered(_ filter: any ByteStreamFilter, _ bytes: UnsafeRawBufferPointer) {
    let wasEstablished = filter.isEstablished
    do throws(ByteStreamFilterError) {
      let reply = try filter.open(bytes) { plain in
        // A lingering close (no `onRead`) still opens what comes, and drops it.
        guard !self.isClosing else { return false }
        self.onRead?(plain)
        // As over TCP, an owner that stops reading gets nothing more until it starts again (the rest of what the
        // socket gave stays in the filter: at most one socket read's worth).
        guard self.isReading else {
          self.filterMayHoldMore = true
          return false
        }
        return !self.isClosing
      }
      if let reply { writeWire(reply) }
    } catch {
      filterFailed(error)
      return
    }
    if !wasEstablished && filter.isEstablished && !unsealed.isEmpty { scheduleFlushIfNeeded() }
  }

  // MARK: Reading

  /// Starts delivering bytes to `onRead`.
  public func startReading() {
    guard !isReading, !isClosing else { return }
    let result = uv_read_start(
      stream,
      { h, _, buf in
        let loop = Unmanaged<Loop>.fromOpaque(h!.pointee.loop.pointee.data).takeUnretainedValue()
        buf!.pointee = uv_buf_init(
          loop.readBuffer.baseAddress!.assumingMemoryBound(to: CChar.self), UInt32(loop.readBuffer.count))
      },
      { s, nread, buf in
        let stream = LoopHandle.object(s, as: ByteStream.self)
        stream.didRead(nread, buf!.pointee.base)
      })
    if result < 0 {
      fail(LoopError(code: result, operation: "start reading"))
    } else {
      isReading = true
      if filterMayHoldMore {
        filterMayHoldMore = false
        filterDrainPending = true
        if !flushScheduled {
          flushScheduled = true
          loop.scheduleFlush(self)
        }
      }
    }
  }

  /// Stops delivering bytes (the kernel buffers, then the peer is flow-controlled).
  public func stopReading() {
    guard isReading, !isClosing else { return }
    uv_read_stop(stream)
    isReading = false
  }

  private func didRead(_ nread: Int, _ base: UnsafeMutablePointer<CChar>?) {
    if nread > 0 {
      bytesRead += nread
      loop.streamBytesRead &+= nread
      if let filter {
        openFiltered(filter, UnsafeRawBufferPointer(start: base, count: nread))
      } else {
        onRead?(UnsafeRawBufferPointer(start: base, count: nread))
      }
    } else if nread < 0 {
      isReading = false
      uv_read_stop(stream)
      let error = LoopError(code: Int32(nread), operation: "read")
      if error.isEndOfFile {
        sawEndOfStream = true
        if let onEnd { onEnd() } else { close() }
      } else {
        fail(error)
      }
    }
  }

  // MARK: Writing

  /// Queues `buffer` for writing at the end of this loop turn. Ignored after `close` or `shutdownWrite`.
  public func write(_ buffer: ByteBuffer) {
    guard !isClosing, !shutdownRequested, buffer.readableBytes > 0 else { return }
    queuedBytes += buffer.readableBytes
    if filter != nil {
      // Sealed at the end of the turn, small writes merged first: one record for a burst of frames.
      if let last = unsealed.indices.last, buffer.readableBytes <= ByteStream.mergeLimit,
        unsealed[last].readableBytes + buffer.readableBytes <= ByteStream.mergedBufferLimit
      {
        unsealed[last].append(buffer)
      } else {
        unsealed.append(buffer)
      }
      scheduleFlushIfNeeded()
      return
    }
    // Small writes (frames, notifications) are copied into the tail buffer rather than queued as iovecs of
    // their own, so a burst of them costs one memcpy each and few iovecs; large ones are queued by reference.
    let count = pending.count
    if buffer.readableBytes <= ByteStream.mergeLimit, count > pendingHead,
      pending[count - 1].readableBytes + buffer.readableBytes <= ByteStream.mergedBufferLimit
    {
      pending[count - 1].append(buffer)
    } else {
      pending.append(buffer)
    }
    scheduleFlushIfNeeded()
  }

  /// Writes `buffer` at once when nothing of this stream waits for the kernel (nothing queued, no write in
  /// flight, no TLS filter), else queues it as `write` does. For a write that is already the last of its turn for
  /// this stream, where the end-of-turn gathering has nothing to gather: the broker's fan-out writes one shared
  /// `changed` frame to each subscriber this way, without a queue array, a place on the loop's dirty list and a
  /// second pass over every stream at the end of the turn. What the kernel does not take is queued. Order is
  /// kept: anything written earlier either went out already or is queued, and then this is queued behind it.
  public func writeNow(_ buffer: ByteBuffer) {
    guard filter == nil, !flushScheduled, !writeInFlight, pendingHead == pending.count, !isClosing,
      !shutdownRequested, buffer.readableBytes > 0
    else { return write(buffer) }
    var bytes = uv_buf_init(
      (buffer.storage.base + buffer.readerIndex).assumingMemoryBound(to: CChar.self),
      UInt32(buffer.readableBytes))
    let written = uv_try_write(stream, &bytes, 1)
    writeCalls += 1
    if written == Int32(UV_EAGAIN.rawValue) || written == Int32(UV_ENOSYS.rawValue) { return write(buffer) }
    if written < 0 {
      fail(LoopError(code: written, operation: "write"))
      return
    }
    bytesWritten += Int(written)
    loop.streamBytesWritten &+= Int(written)
    if Int(written) < buffer.readableBytes {
      var rest = buffer
      rest.moveReaderIndex(forwardBy: Int(written))
      write(rest)
    }
  }

  /// Queues several buffers, in order.
  public func write(contentsOf buffers: [ByteBuffer]) {
    for buffer in buffers { write(buffer) }
  }

  /// Hands what is queued to the kernel now rather than at the end of the loop turn: for bytes that should not
  /// wait behind the rest of the turn's work (the broker's answer to a batch, written before the turn queues the
  /// batch's notifications to every subscriber). Nothing queued, nothing done; the end of the turn then finds
  /// nothing left to write for this stream. Loop thread only.
  public func flushNow() {
    guard flushScheduled else { return }
    flush()
  }

  /// The loop's end-of-turn flush: nothing if `flushNow` already wrote what this stream queued.
  func flushIfScheduled() {
    guard flushScheduled else { return }
    flush()
  }

  private func scheduleFlushIfNeeded() {
    guard !flushScheduled, !writeInFlight else { return }
    flushScheduled = true
    loop.scheduleFlush(self)
  }

  /// Hands what is queued to the kernel: vectored `uv_try_write` first, and for what it did not take one
  /// `uv_write` that keeps the buffers alive until its callback. Called by the loop once per turn.
  func flush() {
    flushScheduled = false
    if filterDrainPending, !isClosing, let filter {
      filterDrainPending = false
      if isReading {
        openFiltered(filter, UnsafeRawBufferPointer(start: nil, count: 0))
      } else {
        filterMayHoldMore = true
      }
    }
    guard !isClosing, !writeInFlight else { return }
    sealUnsealed()
    guard !isClosing else { return }
    while pendingHead < pending.count {
      let count = Swift.min(pending.count - pendingHead, ByteStream.maxBuffersPerWrite)
      let written = withIOVectors(count) { bufs, n in uv_try_write(stream, bufs, n) }
      writeCalls += 1
      if written == Int32(UV_EAGAIN.rawValue) || written == Int32(UV_ENOSYS.rawValue) {
        break
      }
      if written < 0 {
        fail(LoopError(code: written, operation: "write"))
        return
      }
      let total = consumeWritten(Int(written))
      if Int(written) < total { break }
    }
    if pendingHead == pending.count {
      // Released, not kept: most connections are idle most of the time, and an idle one keeps no queue (B6).
      pending = []
      pendingHead = 0
      didDrain()
      return
    }
    submitWrite()
    watchForStall()
  }

  /// Removes `written` bytes from the front of the queue; returns how many bytes the gathered buffers held.
  private func consumeWritten(_ written: Int) -> Int {
    var remaining = written
    var gathered = 0
    let end = Swift.min(pending.count, pendingHead + ByteStream.maxBuffersPerWrite)
    for i in pendingHead..<end { gathered += pending[i].readableBytes }
    queuedBytes -= written
    bytesWritten += written
    loop.streamBytesWritten &+= written
    while remaining > 0 {
      let size = pending[pendingHead].readableBytes
      if remaining >= size {
        remaining -= size
        pending[pendingHead] = ByteBuffer(capacity: 0)
        pendingHead += 1
      } else {
        pending[pendingHead].moveReaderIndex(forwardBy: remaining)
        remaining = 0
      }
    }
    return gathered
  }

  private func withIOVectors<R>(_ count: Int, _ body: (UnsafePointer<uv_buf_t>, UInt32) -> R) -> R {
    withUnsafeTemporaryAllocation(of: uv_buf_t.self, capacity: count) { bufs in
      for i in 0..<count {
        let buffer = pending[pendingHead + i]
        // The storage stays alive: `pending` (or the write request) holds the buffer until libuv is done.
        bufs[i] = uv_buf_init(
          (buffer.storage.base + buffer.readerIndex).assumingMemoryBound(to: CChar.self),
          UInt32(buffer.readableBytes))
      }
      return body(bufs.baseAddress!, UInt32(count))
    }
  }

  private func submitWrite() {
    let count = Swift.min(pending.count - pendingHead, ByteStream.maxBuffersPerWrite)
    let request = WriteRequest(stream: self, buffers: Array(pending[pendingHead..<pendingHead + count]))
    let result = withIOVectors(count) { bufs, n in
      uv_write(request.request, stream, bufs, n) { req, status in WriteRequest.complete(req, status) }
    }
    writeCalls += 1
    if result < 0 {
      request.abandon()
      fail(LoopError(code: result, operation: "write"))
      return
    }
    for i in pendingHead..<pendingHead + count { pending[i] = .empty }
    inFlightBytes = request.bytes
    pendingHead += count
    if pendingHead == pending.count {
      pending = []
      pendingHead = 0
    }
    writeInFlight = true
  }

  fileprivate func writeCompleted(bytes: Int, status: Int32) {
    writeInFlight = false
    inFlightBytes = 0
    if status < 0 {
      let error = LoopError(code: status, operation: "write")
      if !error.isCancelled && !isClosing { fail(error) }
      return
    }
    queuedBytes -= bytes
    bytesWritten += bytes
    loop.streamBytesWritten &+= bytes
    if pendingHead < pending.count || (!unsealed.isEmpty && filter?.isEstablished == true) {
      scheduleFlushIfNeeded()
    } else {
      didDrain()
    }
  }

  private func didDrain() {
    guard queuedBytes == 0 else { return }
    stallWatch?.stop()
    if shutdownWhenDrained {
      shutdownWhenDrained = false
      ShutdownRequest.start(self)
    }
    if gracefulLinger != nil {
      startLinger()
      return
    }
    onDrain?()
  }

  // MARK: Write stalls

  /// Bytes the kernel has accepted so far, with the part of the write in flight it already took.
  var acceptedBytes: Int {
    guard writeInFlight, !isClosing else { return bytesWritten }
    return bytesWritten + inFlightBytes - Int(uv_stream_get_write_queue_size(stream))
  }

  /// The stall limit in force: `writeStallTimeout`, or while a graceful close drains without one, its linger.
  private var stallTimeout: UInt64 {
    writeStallTimeout > 0 ? writeStallTimeout : gracefulLinger ?? 0
  }

  /// Starts watching the queue for progress, if bytes wait and a limit is set (and no watch runs already).
  private func watchForStall() {
    let timeout = stallTimeout
    guard timeout > 0, queuedBytes > 0, !isClosing else { return }
    let timer: LoopTimer
    if let stallWatch {
      guard !stallWatch.isActive else { return }
      timer = stallWatch
    } else {
      timer = LoopTimer(loop: loop)
      stallWatch = timer
    }
    stallMark = acceptedBytes
    stallSince = loop.now
    let period = Swift.max(timeout / 4, 1)
    timer.start(after: period, repeatEvery: period) { [unowned self] in self.checkStall(timeout) }
  }

  private func checkStall(_ timeout: UInt64) {
    guard queuedBytes > 0, !isClosing else {
      stallWatch?.stop()
      return
    }
    let accepted = acceptedBytes
    if accepted != stallMark {
      stallMark = accepted
      stallSince = loop.now
      return
    }
    guard loop.now &- stallSince >= timeout else { return }
    stallWatch?.stop()
    if gracefulLinger != nil {
      finishGracefulClose()
    } else if let onWriteStall {
      onWriteStall()
    } else {
      close()
    }
  }

  private func fail(_ error: LoopError) {
    guard !isClosing else { return }
    if let onError { onError(error) } else { close() }
  }

  // MARK: Closing

  override func willClose() {
    let closing = onClose
    onClose = nil
    closing?()
    pending = []
    unsealed = []
    pendingHead = 0
    queuedBytes = 0
    lingering?.close()
    lingering = nil
    stallWatch?.close()
    stallWatch = nil
    onRead = nil
    onEnd = nil
    onError = nil
    onDrain = nil
    onWriteStall = nil
  }

  /// Half-closes: once everything queued is written, sends FIN (`uv_shutdown`). Reading goes on until the peer
  /// ends too. Writes after this fail.
  public func shutdownWrite() {
    guard !isClosing, !shutdownRequested else { return }
    if let filter, filter.isEstablished {
      // What the owner wrote, then the filter's end (close_notify), then FIN.
      sealUnsealed()
      if !isClosing, let end = filter.finish() { writeWire(end) }
    }
    guard !isClosing else { return }
    shutdownRequested = true
    if queuedBytes == 0 && !writeInFlight {
      ShutdownRequest.start(self)
    } else {
      shutdownWhenDrained = true
    }
  }

  /// Closes after everything queued is written, sending FIN first and then reading (and discarding) until the
  /// peer closes too or `linger` ms pass. This keeps a response the peer has not read yet from being destroyed by
  /// a reset when unread request bytes are still arriving (the "lingering close" of HTTP servers).
  ///
  /// ```
  ///   draining ──queue written──▶ FIN, lingering ──peer's EOF or `linger` ms──▶ closed
  ///      │ read and discard; the peer's EOF is noted, not an end     ▲
  ///      └──error, or no byte taken for writeStallTimeout (or linger if none)──┘
  /// ```
  ///
  /// The linger starts only once the queue is written, so a slow reader gets everything; a peer that stops
  /// reading is bounded by the stall limit instead. `then` runs once the stream is closed, this way or another
  /// (`Loop.closeAllHandles`).
  public func closeGracefully(linger: UInt64 = 2000, then: (() -> Void)? = nil) {
    guard !isClosing else {
      if let then { close(then: then) }
      return
    }
    if let then { whenClosed(then) }
    guard gracefulLinger == nil else { return }
    gracefulLinger = linger
    onRead = nil
    onDrain = nil
    onWriteStall = nil
    onEnd = { [unowned self] in
      // While answers are still being written, the peer's half-close is no reason to cut them.
      if self.lingering != nil { self.finishGracefulClose() }
    }
    onError = { [unowned self] _ in self.finishGracefulClose() }
    if !sawEndOfStream { startReading() }
    shutdownWrite()
    if queuedBytes == 0 && !writeInFlight {
      startLinger()
    } else {
      // The limit may have changed (a graceful close without `writeStallTimeout` uses its linger).
      stallWatch?.stop()
      watchForStall()
    }
  }

  /// Everything queued is written (and FIN on its way): wait for the peer's EOF, at most the linger time.
  private func startLinger() {
    guard let linger = gracefulLinger, lingering == nil, !isClosing else { return }
    if sawEndOfStream {
      finishGracefulClose()
      return
    }
    let timer = LoopTimer(loop: loop)
    lingering = timer
    timer.start(after: linger) { [unowned self] in self.finishGracefulClose() }
  }

  private func finishGracefulClose() {
    close()
  }

  // MARK: Options and addresses

  /// Disables Nagle's algorithm (TCP only): small writes go out at once. Our writes are already coalesced per
  /// loop turn, so this costs nothing in packets.
  public func setNoDelay(_ on: Bool) {
    guard kind == .tcp, !isClosing else { return }
    uv_tcp_nodelay(pointer(as: uv_tcp_t.self), on ? 1 : 0)
  }

  /// The peer's address (TCP only).
  public var peerAddress: SocketAddress? {
    guard kind == .tcp, !isClosing else { return nil }
    var storage = sockaddr_storage()
    var length = Int32(MemoryLayout<sockaddr_storage>.size)
    return withUnsafeMutablePointer(to: &storage) { p in
      p.withMemoryRebound(to: sockaddr.self, capacity: 1) { addr in
        uv_tcp_getpeername(pointer(as: uv_tcp_t.self), addr, &length) == 0
          ? SocketAddress.from(sockaddr: addr) : nil
      }
    }
  }

  /// The underlying file descriptor, for diagnostics.
  public var fileDescriptor: Int32? {
    var fd = uv_os_fd_t(-1)
    guard !isClosing, uv_fileno(handle, &fd) == 0 else { return nil }
    return fd
  }
}

/// A `uv_connect_t` and the completion waiting for it. Retained through `req->data` until the callback.
private final class ConnectRequest {
  let request: UnsafeMutablePointer<uv_connect_t> = .allocate(capacity: 1)
  let stream: ByteStream
  let operation: String
  let completion: (Result<ByteStream, LoopError>) -> Void

  init(stream: ByteStream, operation: String, completion: @escaping (Result<ByteStream, LoopError>) -> Void) {
    self.stream = stream
    self.operation = operation
    self.completion = completion
    request.pointee.data = Unmanaged.passRetained(self).toOpaque()
  }

  deinit { request.deallocate() }

  static func complete(_ req: UnsafeMutablePointer<uv_connect_t>?, _ status: Int32) {
    let request = Unmanaged<ConnectRequest>.fromOpaque(req!.pointee.data).takeRetainedValue()
    request.finish(status)
  }

  func abandon(status: Int32) {
    Unmanaged.passUnretained(self).release()
    finish(status)
  }

  private func finish(_ status: Int32) {
    if status < 0 {
      stream.close()
      completion(.failure(LoopError(code: status, operation: operation)))
    } else {
      completion(.success(stream))
    }
  }
}

/// A `uv_write_t` and the buffers it writes. Retained through `req->data` until the callback, which is what keeps
/// the buffers' memory alive while the kernel may still read it.
private final class WriteRequest {
  let request: UnsafeMutablePointer<uv_write_t> = .allocate(capacity: 1)
  let stream: ByteStream
  let buffers: [ByteBuffer]
  let bytes: Int

  init(stream: ByteStream, buffers: [ByteBuffer]) {
    self.stream = stream
    self.buffers = buffers
    bytes = buffers.reduce(0) { $0 + $1.readableBytes }
    request.pointee.data = Unmanaged.passRetained(self).toOpaque()
  }

  deinit { request.deallocate() }

  static func complete(_ req: UnsafeMutablePointer<uv_write_t>?, _ status: Int32) {
    let request = Unmanaged<WriteRequest>.fromOpaque(req!.pointee.data).takeRetainedValue()
    request.stream.writeCompleted(bytes: request.bytes, status: status)
  }

  /// The write was refused: its callback will never run.
  func abandon() { Unmanaged.passUnretained(self).release() }
}

/// A `uv_shutdown_t` (half-close after queued writes). Nothing waits for its result: the lingering close
/// that starts it ends on the peer's EOF or a timer.
private final class ShutdownRequest {
  let request: UnsafeMutablePointer<uv_shutdown_t> = .allocate(capacity: 1)

  static func start(_ stream: ByteStream) {
    let object = ShutdownRequest()
    object.request.pointee.data = Unmanaged.passRetained(object).toOpaque()
    let result = uv_shutdown(object.request, stream.stream) { req, _ in
      Unmanaged<ShutdownRequest>.fromOpaque(req!.pointee.data).release()
    }
    if result < 0 { Unmanaged.passUnretained(object).release() }
  }

  deinit { request.deallocate() }
}
