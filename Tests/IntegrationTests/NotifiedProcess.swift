import EventLoop
import EventLoopTestKit
import FoundationEssentials

#if canImport(Glibc)
  import Glibc
#endif

/// A program started the way systemd starts a `Type=notify` service: `NOTIFY_SOCKET` (and `WATCHDOG_USEC`) name
/// a datagram socket this test owns. Its stderr goes to a file rather than a pipe, so that when a notification
/// arrives the test can read, at that very moment, everything the program logged before sending it.
final class NotifiedProcess {
  let process: ChildProcess
  let receiver: DatagramReceiver
  let logPath: String
  /// Every notification received, in order.
  var notifications: [String] { receiver.received }
  /// Called with each notification as it arrives.
  var onNotification: ((String) -> Void)?
  private(set) var exitStatus: (status: Int64, signal: Int32)?
  private var onExit: ((Int64, Int32) -> Void)?

  /// Starts `program` with `arguments`; its stderr goes to `name.log` and its notification socket is
  /// `name.notify` in `directory`.
  init(
    loop: Loop, program: String, arguments: [String], directory: ScratchDirectory, name: String,
    watchdogMicroseconds: UInt64? = nil
  ) throws {
    logPath = directory.path + "/" + name + ".log"
    receiver = try DatagramReceiver(address: directory.path + "/" + name + ".notify")
    // Our own environment (the sanitizer's options among others), with systemd's variables replaced by ours.
    var environment = ProcessInfo.processInfo.environment.filter {
      !["NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID"].contains($0.key)
    }
    environment["NOTIFY_SOCKET"] = receiver.address
    if let watchdogMicroseconds { environment["WATCHDOG_USEC"] = "\(watchdogMicroseconds)" }
    // sh replaces itself with the program (exec): the pid, the signals and the exit status are the program's.
    process = try ChildProcess(
      loop: loop, executable: "/bin/sh",
      arguments: ["-c", #"log="$1"; shift; exec "$0" "$@" 2>"$log""#, program, logPath] + arguments,
      environment: environment.map { "\($0.key)=\($0.value)" }, output: .ignore, error: .inherit)
    receiver.onDatagram = { [unowned self] datagram in self.onNotification?(datagram) }
    try receiver.watch(loop: loop)
    process.onExit = { [unowned self] status, signal in
      self.exitStatus = (status, signal)
      self.process.close()
      // What it sent before it exited is queued in the socket: read it before closing.
      self.receiver.receiveAvailable()
      self.receiver.close()
      // Tests' handlers capture this object: drop them, or the cycle leaks (LeakSanitizer would say so).
      self.onNotification = nil
      let onExit = self.onExit
      self.onExit = nil
      onExit?(status, signal)
    }
  }

  /// What the program has logged so far.
  var log: String { readFile(logPath) }

  /// Sends `signal`; `then` runs once the process is gone (notifications sent before it exited are received).
  func stop(_ signal: Int32 = SIGTERM, then: @escaping (Int64, Int32) -> Void) {
    onExit = then
    if let exitStatus {
      then(exitStatus.status, exitStatus.signal)
    } else {
      try? process.kill(signal)
    }
  }
}

/// The whole content of the file at `path` ("" if it cannot be read).
func readFile(_ path: String) -> String {
  guard let file = fopen(path, "r") else { return "" }
  defer { fclose(file) }
  var bytes: [UInt8] = []
  var buffer = [UInt8](repeating: 0, count: 4096)
  while true {
    let count = fread(&buffer, 1, buffer.count, file)
    if count <= 0 { break }
    bytes += buffer[0..<count]
  }
  return String(decoding: bytes, as: UTF8.self)
}

/// The value of the first `key=value` in `log`, up to a space or line break.
func logValue(_ key: String, in log: String) -> String? {
  guard let range = log.firstRange(of: key + "=") else { return nil }
  let rest = log[range.upperBound...]
  guard let end = rest.firstIndex(where: { $0 == " " || $0 == "\n" }) else { return nil }
  return String(rest[..<end])
}

/// Connects a blocking stream socket to `127.0.0.1:port` or to the Unix socket at `path`, now: the descriptor,
/// or -1 if the connection was refused (nothing listens yet). On loopback either answer is immediate.
func connectNow(port: UInt16? = nil, path: String? = nil) -> Int32 {
  let descriptor = socket(
    port != nil ? AF_INET : AF_UNIX, Int32(SOCK_STREAM.rawValue | SOCK_CLOEXEC.rawValue), 0)
  guard descriptor >= 0 else { return -1 }
  var result: Int32 = -1
  if let port {
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_port = port.bigEndian
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    result = withUnsafePointer(to: &address) {
      $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
        connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
      }
    }
  } else if let path {
    var address = sockaddr_un()
    address.sun_family = sa_family_t(AF_UNIX)
    withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: Array(path.utf8) + [0]) }
    result = withUnsafePointer(to: &address) {
      $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
        connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
      }
    }
  }
  if result != 0 {
    close(descriptor)
    return -1
  }
  return descriptor
}
