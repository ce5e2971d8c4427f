import EventLoop

#if canImport(Glibc)
  import Glibc
#endif

/// A test-owned Unix datagram socket that collects what is sent to it, in order: a stand-in for systemd's
/// notification socket (`NOTIFY_SOCKET`). Bound to a path or to an abstract name; `address` is spelled the way
/// `NOTIFY_SOCKET` spells it (`/path` or `@name`).
///
/// Datagrams are read when `receiveAvailable()` is called, or by the loop once `watch(loop:)` was called.
///
/// Threading: the loop thread once watched.
public final class DatagramReceiver {
  /// `/path` or `@name`.
  public let address: String
  private var descriptor: Int32
  private var watcher: DescriptorWatcher?
  /// Every datagram received so far, as text.
  public private(set) var received: [String] = []
  /// Called with each datagram as it is read.
  public var onDatagram: ((String) -> Void)?

  /// Binds a socket at `path` (a file) or, when `path` starts with `@`, in the abstract namespace.
  public init(address: String) throws {
    self.address = address
    descriptor = socket(
      AF_UNIX, Int32(SOCK_DGRAM.rawValue | SOCK_CLOEXEC.rawValue | SOCK_NONBLOCK.rawValue), 0)
    guard descriptor >= 0 else { throw DatagramReceiverError(operation: "socket", code: errno) }
    var storage = sockaddr_un()
    storage.sun_family = sa_family_t(AF_UNIX)
    let bytes = address.hasPrefix("@") ? [0] + Array(address.utf8.dropFirst()) : Array(address.utf8) + [0]
    guard bytes.count <= MemoryLayout.size(ofValue: storage.sun_path) else {
      Glibc.close(descriptor)
      throw DatagramReceiverError(operation: "bind \(address)", code: ENAMETOOLONG)
    }
    withUnsafeMutableBytes(of: &storage.sun_path) { $0.copyBytes(from: bytes) }
    let length = socklen_t(MemoryLayout<sockaddr_un>.offset(of: \.sun_path)! + bytes.count)
    let result = withUnsafePointer(to: &storage) {
      $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.bind(descriptor, $0, length) }
    }
    if result != 0 {
      let code = errno
      Glibc.close(descriptor)
      throw DatagramReceiverError(operation: "bind \(address)", code: code)
    }
  }

  deinit { if descriptor >= 0 { Glibc.close(descriptor) } }

  /// Reads every datagram queued now, without waiting; returns them (they are also added to `received`).
  @discardableResult
  public func receiveAvailable() -> [String] {
    guard descriptor >= 0 else { return [] }
    var batch: [String] = []
    var buffer = [UInt8](repeating: 0, count: 64 * 1024)
    while true {
      let count = buffer.withUnsafeMutableBytes { recv(descriptor, $0.baseAddress, $0.count, 0) }
      if count < 0 && errno == EINTR { continue }
      if count < 0 { break }
      batch.append(String(decoding: buffer[0..<count], as: UTF8.self))
    }
    received += batch
    for datagram in batch { onDatagram?(datagram) }
    return batch
  }

  /// Reads datagrams on `loop` as they arrive. The watcher keeps the loop running until `close()`.
  public func watch(loop: Loop) throws {
    watcher = try DescriptorWatcher(loop: loop, descriptor: descriptor) { [unowned self] in
      self.receiveAvailable()
    }
  }

  /// Stops watching, closes the socket and removes its file.
  public func close() {
    watcher?.close()
    watcher = nil
    onDatagram = nil
    if descriptor >= 0 {
      Glibc.close(descriptor)
      descriptor = -1
      if !address.hasPrefix("@") { unlink(address) }
    }
  }
}

/// A socket call of `DatagramReceiver` failed.
public struct DatagramReceiverError: Error, CustomStringConvertible {
  public var operation: String
  public var code: Int32
  public var description: String { "\(operation): \(String(cString: strerror(code)))" }
}
