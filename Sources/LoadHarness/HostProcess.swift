import LoadCore

#if canImport(Glibc)
  import Glibc
#endif

/// Readings of this machine and process: the monotonic clock, /proc samples, the path of a sibling program.
public enum HostProcess {
  /// Nanoseconds on the monotonic clock: the one time base of a run (schedules, receipts, answers).
  public static func now() -> UInt64 {
    var spec = timespec()
    clock_gettime(CLOCK_MONOTONIC, &spec)
    return UInt64(spec.tv_sec) * 1_000_000_000 + UInt64(spec.tv_nsec)
  }

  /// Wall-clock milliseconds, for HLC times in mutations.
  public static func wallMillis() -> UInt64 {
    var spec = timespec()
    clock_gettime(CLOCK_REALTIME, &spec)
    return UInt64(spec.tv_sec) * 1000 + UInt64(spec.tv_nsec) / 1_000_000
  }

  /// CPU seconds (user + system) this process has used: the generator's own cost.
  public static func ownCPUSeconds() -> Double {
    var usage = rusage()
    getrusage(RUSAGE_SELF.rawValue, &usage)
    func seconds(_ t: timeval) -> Double { Double(t.tv_sec) + Double(t.tv_usec) / 1e6 }
    return seconds(usage.ru_utime) + seconds(usage.ru_stime)
  }

  /// RSS and CPU time of process `pid`, nil if it is gone or /proc is not Linux's.
  public static func sample(pid: Int32) -> ProcessSample? {
    guard let status = readFile("/proc/\(pid)/status"), let stat = readFile("/proc/\(pid)/stat") else {
      return nil
    }
    return ProcessSample.parse(status: status, stat: stat, ticksPerSecond: sysconf(Int32(_SC_CLK_TCK)))
  }

  /// The directory of the running executable: where SwiftPM puts `pagesync-broker` beside `pagesync-load`.
  public static func siblingProgram(_ name: String) -> String {
    var buffer = [CChar](repeating: 0, count: 4096)
    let count = readlink("/proc/self/exe", &buffer, buffer.count - 1)
    guard count > 0 else { return name }
    let path = String(decoding: buffer[0..<count].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    return path.split(separator: "/", omittingEmptySubsequences: false).dropLast().joined(separator: "/")
      + "/" + name
  }

  /// The 1-minute load average (/proc/loadavg): on a shared machine, how much else wanted the CPUs during a run.
  public static func loadAverage() -> Double? {
    readFile("/proc/loadavg")?.split(separator: " ").first.flatMap { Double($0) }
  }

  /// CPUs online.
  public static var cores: Int { sysconf(Int32(_SC_NPROCESSORS_ONLN)) }

  /// Whether standard error is a terminal (the progress line then redraws in place).
  public static var standardErrorIsTerminal: Bool { isatty(2) == 1 }

  /// Writes `text` to standard error at once.
  public static func writeError(_ text: String) {
    var text = text
    text.withUTF8 { bytes in _ = write(2, bytes.baseAddress, bytes.count) }
  }

  /// A loopback TCP port that was free a moment ago (for redis-server, which cannot report a port 0 choice).
  static func freeLoopbackPort() -> Int? {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard fd >= 0 else { return nil }
    defer { close(fd) }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    address.sin_port = 0
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    let bound = withUnsafeMutablePointer(to: &address) {
      $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { pointer in
        bind(fd, pointer, length) == 0 && getsockname(fd, pointer, &length) == 0
      }
    }
    return bound ? Int(UInt16(bigEndian: address.sin_port)) : nil
  }

  static func readFile(_ path: String) -> String? {
    let fd = open(path, O_RDONLY)
    guard fd >= 0 else { return nil }
    defer { close(fd) }
    var bytes: [UInt8] = []
    var chunk = [UInt8](repeating: 0, count: 4096)
    while true {
      let count = read(fd, &chunk, chunk.count)
      if count <= 0 { break }
      bytes.append(contentsOf: chunk[0..<count])
    }
    return String(decoding: bytes, as: UTF8.self)
  }
}

/// The open descriptors of another process (the limit is `DescriptorLimit`).
enum Descriptors {
  /// Entries of /proc/PID/fd: the process's open descriptors; nil if it cannot be read.
  static func openCount(pid: Int32) -> Int? {
    guard let directory = opendir("/proc/\(pid)/fd") else { return nil }
    defer { closedir(directory) }
    var count = 0
    while let entry = readdir(directory) {
      let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
        String(cString: raw.bindMemory(to: CChar.self).baseAddress!)
      }
      if name != "." && name != ".." { count += 1 }
    }
    return count
  }
}

/// A temporary directory for a harness-started server, removed with its files by `remove()`.
final class ScratchDirectory {
  let path: String

  init() throws(LoadError) {
    var template = Array("/tmp/pagesync-load-XXXXXX".utf8CString)
    guard let made = template.withUnsafeMutableBufferPointer({ mkdtemp($0.baseAddress!) }) else {
      throw .serverFailed("cannot create a temporary directory")
    }
    path = String(cString: made)
  }

  func write(_ name: String, _ text: String) throws(LoadError) {
    guard let file = fopen(path + "/" + name, "w") else {
      throw .serverFailed("cannot write \(path)/\(name)")
    }
    fputs(text, file)
    fclose(file)
  }

  /// Removes the files the servers leave (flat: a store and its WAL, a config) and the directory.
  func remove() {
    guard let directory = opendir(path) else { return }
    while let entry = readdir(directory) {
      let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
        String(cString: raw.bindMemory(to: CChar.self).baseAddress!)
      }
      if name != "." && name != ".." { unlink(path + "/" + name) }
    }
    closedir(directory)
    rmdir(path)
  }
}
