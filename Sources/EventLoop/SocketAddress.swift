import CLibUV

#if canImport(Glibc)
  import Glibc
#endif

/// Where a stream listens or connects: an IP host and port, or a Unix-domain socket path.
///
/// Textual forms accepted by `init(parsing:)`: `127.0.0.1:7700`, `[::1]:7700`, `localhost:7700` (a name is
/// resolved when connecting or listening), `unix:/run/pagesync.sock`, or a path starting with `/` or `.`.
public enum SocketAddress: Hashable, Sendable, CustomStringConvertible {
  /// A host (IPv4 or IPv6 literal, or a name) and a TCP port (0 = any free port when listening).
  case inet(host: String, port: Int)
  /// A Unix-domain socket path.
  case unix(path: String)

  /// Why a textual address was refused.
  public struct ParseError: Error, Equatable, Sendable, CustomStringConvertible {
    public var input: String
    public var reason: String
    public var description: String { "invalid address \"\(input)\": \(reason)" }
  }

  public init(parsing text: String) throws(ParseError) {
    if text.hasPrefix("unix:") {
      let path = String(text.dropFirst(5))
      guard !path.isEmpty else { throw ParseError(input: text, reason: "empty socket path") }
      self = .unix(path: path)
      return
    }
    if text.hasPrefix("/") || text.hasPrefix(".") {
      self = .unix(path: text)
      return
    }
    let host: Substring
    let portText: Substring
    if text.hasPrefix("[") {
      guard let close = text.firstIndex(of: "]") else { throw ParseError(input: text, reason: "missing ]") }
      host = text[text.index(after: text.startIndex)..<close]
      let rest = text[text.index(after: close)...]
      guard rest.hasPrefix(":") else { throw ParseError(input: text, reason: "missing :PORT after ]") }
      portText = rest.dropFirst()
    } else {
      guard let colon = text.lastIndex(of: ":") else {
        throw ParseError(input: text, reason: "expected HOST:PORT, [IPV6]:PORT or unix:PATH")
      }
      host = text[..<colon]
      portText = text[text.index(after: colon)...]
      if host.contains(":") {
        throw ParseError(input: text, reason: "an IPv6 host must be written in [brackets]")
      }
    }
    guard !host.isEmpty else { throw ParseError(input: text, reason: "empty host") }
    guard let port = Int(portText), (0...65535).contains(port) else {
      throw ParseError(input: text, reason: "port must be a number from 0 to 65535")
    }
    self = .inet(host: String(host), port: port)
  }

  public var description: String {
    switch self {
    case .inet(let host, let port): host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)"
    case .unix(let path): "unix:\(path)"
    }
  }

  /// The port of an `.inet` address.
  public var port: Int? {
    if case .inet(_, let port) = self { return port }
    return nil
  }

  /// The numeric socket address for an IP literal, nil when `host` is a name that needs resolving.
  func numericSockaddr() -> sockaddr_storage? {
    guard case .inet(let host, let port) = self else { return nil }
    var storage = sockaddr_storage()
    let ok = withUnsafeMutableBytes(of: &storage) { raw -> Bool in
      if uv_ip4_addr(host, Int32(port), raw.baseAddress!.assumingMemoryBound(to: sockaddr_in.self)) == 0 {
        return true
      }
      return uv_ip6_addr(host, Int32(port), raw.baseAddress!.assumingMemoryBound(to: sockaddr_in6.self)) == 0
    }
    return ok ? storage : nil
  }

  /// The textual form of a kernel socket address.
  static func from(sockaddr pointer: UnsafeRawPointer) -> SocketAddress? {
    let family = Int32(pointer.assumingMemoryBound(to: sockaddr.self).pointee.sa_family)
    var name = [CChar](repeating: 0, count: 64)
    switch family {
    case AF_INET:
      let sin = pointer.assumingMemoryBound(to: sockaddr_in.self)
      uv_ip4_name(sin, &name, name.count)
      return .inet(
        host: name.withUnsafeBufferPointer { String(cString: $0.baseAddress!) },
        port: Int(UInt16(bigEndian: sin.pointee.sin_port)))
    case AF_INET6:
      let sin6 = pointer.assumingMemoryBound(to: sockaddr_in6.self)
      uv_ip6_name(sin6, &name, name.count)
      return .inet(
        host: name.withUnsafeBufferPointer { String(cString: $0.baseAddress!) },
        port: Int(UInt16(bigEndian: sin6.pointee.sin6_port)))
    default:
      return nil
    }
  }
}
