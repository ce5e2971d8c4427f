#if canImport(Glibc)
  import Glibc
#endif

/// Where `$NOTIFY_SOCKET` says notifications go: a Unix datagram socket named by a path, or by a name in the
/// abstract namespace (written with a leading `@`, as systemd does).
public enum NotifySocketAddress: Sendable, Equatable, CustomStringConvertible {
  /// A socket file, e.g. `/run/systemd/notify`.
  case path(String)
  /// An abstract socket: `@name` in the variable; the name without the `@`.
  case abstract(String)

  /// The longest path or abstract name a `sockaddr_un` holds: 108 bytes, less the path's terminating NUL or the
  /// abstract name's leading one.
  static let maxNameBytes = MemoryLayout.size(ofValue: sockaddr_un().sun_path) - 1

  /// Reads the variable's value. systemd 252 sends only these two forms (`vsock:` came in 254, for virtual
  /// machines, and is refused here).
  public init(parsing text: String) throws(NotifySocketAddressError) {
    if text.isEmpty { throw .empty }
    if text.hasPrefix("/") {
      self = .path(text)
    } else if text.hasPrefix("@"), text.utf8.count > 1 {
      self = .abstract(String(text.dropFirst()))
    } else {
      throw .unsupported(text)
    }
    let name =
      switch self {
      case .path(let path): path
      case .abstract(let name): name
      }
    if name.utf8.count > Self.maxNameBytes { throw .tooLong(text) }
    if name.utf8.contains(0) { throw .unsupported(text) }
  }

  public var description: String {
    switch self {
    case .path(let path): path
    case .abstract(let name): "@" + name
    }
  }

  /// Calls `body` with this address as a `sockaddr` and its length. An abstract name's length counts exactly its
  /// bytes: the kernel compares every byte of it, so a trailing NUL would name another socket.
  func withSockaddr<Result>(_ body: (UnsafePointer<sockaddr>, socklen_t) -> Result) -> Result {
    var address = sockaddr_un()
    address.sun_family = sa_family_t(AF_UNIX)
    let bytes: [UInt8]
    switch self {
    case .path(let path): bytes = Array(path.utf8) + [0]
    case .abstract(let name): bytes = [0] + Array(name.utf8)
    }
    withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: bytes) }
    let length = socklen_t(MemoryLayout<sockaddr_un>.offset(of: \.sun_path)! + bytes.count)
    return withUnsafePointer(to: &address) {
      $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { body($0, length) }
    }
  }
}

/// Why `$NOTIFY_SOCKET` could not be used.
public enum NotifySocketAddressError: Error, Equatable, Sendable, CustomStringConvertible {
  /// The variable is set but empty.
  case empty
  /// Neither an absolute path nor `@name` (for instance `vsock:`, or a relative path).
  case unsupported(String)
  /// Longer than a Unix socket address holds.
  case tooLong(String)

  public var description: String {
    switch self {
    case .empty: "NOTIFY_SOCKET is empty"
    case .unsupported(let text): "NOTIFY_SOCKET=\(text): not an absolute path or @name"
    case .tooLong(let text): "NOTIFY_SOCKET=\(text): longer than a Unix socket address"
    }
  }
}
