import CLibUV

#if canImport(Glibc)
  import Glibc
#endif

/// A listening socket, TCP (IPv4 or IPv6) or Unix-domain, that hands each accepted connection to
/// `onConnection` as a `ByteStream`.
///
/// Threading: loop thread only.
public final class Listener: LoopHandle {
  /// The address actually bound (with the real port when 0 was asked for).
  public private(set) var address: SocketAddress
  private let kind: ByteStream.Kind
  /// A connection was accepted. The stream is not reading yet.
  public var onConnection: ((ByteStream) -> Void)?
  /// Accepting failed (for instance EMFILE: out of file descriptors). The listener stays open.
  public var onError: ((LoopError) -> Void)?
  /// Connections accepted so far.
  public private(set) var acceptedCount = 0
  /// Connections accepted in one loop turn at most. libuv accepts until the backlog is empty; clients that connect
  /// as fast as the loop accepts (a flood of connections refused at once) kept it there, and every other
  /// connection waiting, for half a second. Past this many the rest wait for the next turn, after the loop polled
  /// for everyone else's I/O.
  public var maxAcceptsPerTurn = 64
  private var acceptTurn: UInt64 = .max
  private var acceptsThisTurn = 0
  /// Whether we created the socket file (and so remove it on close).
  private var ownsSocketFile = false

  /// Binds and listens on `address`. A Unix-domain socket file is created with `unixSocketMode` (owner-only by
  /// default), set through the umask so it never exists with wider permissions; a stale socket file that nobody
  /// listens on is replaced, a live one is an error (EADDRINUSE).
  public init(
    loop: Loop, address: SocketAddress, backlog: Int32 = 1024, unixSocketMode: mode_t = 0o600
  ) throws(LoopError) {
    self.address = address
    switch address {
    case .inet: kind = .tcp
    case .unix: kind = .pipe
    }
    super.init(loop: loop, type: kind == .tcp ? UV_TCP : UV_NAMED_PIPE)
    let initResult =
      kind == .tcp
      ? uv_tcp_init(loop.uv, pointer(as: uv_tcp_t.self))
      : uv_pipe_init(loop.uv, pointer(as: uv_pipe_t.self), 0)
    if initResult < 0 {
      discardUnregistered()
      throw LoopError(code: initResult, operation: "init listener")
    }
    register()
    do throws(LoopError) {
      try bind(unixSocketMode: unixSocketMode)
      try LoopError.check(
        uv_listen(pointer(as: uv_stream_t.self), backlog) { server, status in
          LoopHandle.object(server, as: Listener.self).accept(status)
        }, "listen on \(address)")
    } catch {
      close()
      throw error
    }
  }

  private func bind(unixSocketMode: mode_t) throws(LoopError) {
    switch address {
    case .inet(let host, let port):
      var storage: sockaddr_storage
      if let numeric = address.numericSockaddr() {
        storage = numeric
      } else {
        storage = try Resolver.resolveNow(loop: loop, host: host, port: port)
      }
      let result = withUnsafePointer(to: &storage) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
          uv_tcp_bind(pointer(as: uv_tcp_t.self), $0, 0)
        }
      }
      try LoopError.check(result, "bind \(address)")
      var bound = sockaddr_storage()
      var length = Int32(MemoryLayout<sockaddr_storage>.size)
      withUnsafeMutablePointer(to: &bound) { p in
        p.withMemoryRebound(to: sockaddr.self, capacity: 1) { addr in
          if uv_tcp_getsockname(pointer(as: uv_tcp_t.self), addr, &length) == 0,
            let actual = SocketAddress.from(sockaddr: addr)
          {
            address = actual
          }
        }
      }
    case .unix(let path):
      var result = bindPipe(path, mode: unixSocketMode)
      if result == Int32(UV_EADDRINUSE.rawValue) && Listener.isStaleSocket(path) {
        unlink(path)
        result = bindPipe(path, mode: unixSocketMode)
      }
      try LoopError.check(result, "bind \(address)")
      ownsSocketFile = true
    }
  }

  private func bindPipe(_ path: String, mode: mode_t) -> Int32 {
    // The umask is process-wide; listeners are made at start-up, before other threads create files.
    let old = umask(~mode & 0o777)
    defer { umask(old) }
    return uv_pipe_bind(pointer(as: uv_pipe_t.self), path)
  }

  /// Whether `path` is a socket file that refuses connections (its listener is gone).
  static func isStaleSocket(_ path: String) -> Bool {
    var info = stat()
    guard lstat(path, &info) == 0, (info.st_mode & S_IFMT) == S_IFSOCK else { return false }
    let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
    guard fd >= 0 else { return false }
    defer { Glibc.close(fd) }
    var addr = sockaddr_un()
    addr.sun_family = sa_family_t(AF_UNIX)
    let bytes = Array(path.utf8)
    guard bytes.count < MemoryLayout.size(ofValue: addr.sun_path) else { return false }
    withUnsafeMutableBytes(of: &addr.sun_path) { raw in
      raw.copyBytes(from: bytes)
      raw[bytes.count] = 0
    }
    let result = withUnsafePointer(to: &addr) {
      $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
        Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
      }
    }
    return result != 0 && errno == ECONNREFUSED
  }

  private func accept(_ status: Int32) {
    if status < 0 {
      onError?(LoopError(code: status, operation: "accept on \(address)"))
      return
    }
    countTurn()
    guard acceptsThisTurn < maxAcceptsPerTurn else {
      // Not taking it now: libuv keeps the accepted descriptor and stops watching the socket until `uv_accept`
      // (which starts watching again), so the backlog waits in the kernel meanwhile. If the listener closes
      // first, libuv closes that descriptor with it.
      loop.runNextTurn { [weak self] in
        guard let self, !self.isClosing else { return }
        self.acceptNow()
      }
      return
    }
    acceptNow()
  }

  /// Starts counting again in a new turn.
  private func countTurn() {
    guard acceptTurn != loop.turns else { return }
    acceptTurn = loop.turns
    acceptsThisTurn = 0
  }

  /// Takes the connection libuv accepted and hands it to `onConnection`.
  private func acceptNow() {
    countTurn()
    acceptsThisTurn += 1
    let stream: ByteStream
    do { stream = try ByteStream(loop: loop, kind: kind) } catch {
      onError?(error)
      return
    }
    let result = uv_accept(pointer(as: uv_stream_t.self), stream.stream)
    if result < 0 {
      stream.close()
      onError?(LoopError(code: result, operation: "accept on \(address)"))
      return
    }
    acceptedCount += 1
    if let onConnection { onConnection(stream) } else { stream.close() }
  }

  override func willClose() {
    onConnection = nil
    onError = nil
  }

  /// Closes the listener; a Unix-domain socket file is removed.
  public override func close(then: (() -> Void)? = nil) {
    if !isClosing, ownsSocketFile, case .unix(let path) = address { unlink(path) }
    super.close(then: then)
  }
}
