/// A process's resident memory and CPU time, read from `/proc/PID/status` and `/proc/PID/stat`.
public struct ProcessSample: Sendable, Equatable {
  /// Resident set size in bytes (`VmRSS`).
  public var residentBytes: Int
  /// Peak resident set size in bytes (`VmHWM`).
  public var peakResidentBytes: Int
  /// User plus system CPU time, in seconds.
  public var cpuSeconds: Double

  public init(residentBytes: Int, peakResidentBytes: Int, cpuSeconds: Double) {
    self.residentBytes = residentBytes
    self.peakResidentBytes = peakResidentBytes
    self.cpuSeconds = cpuSeconds
  }

  /// Parses the two files' text; `ticksPerSecond` is `sysconf(_SC_CLK_TCK)`. Nil if either is not what Linux
  /// writes.
  public static func parse(status: String, stat: String, ticksPerSecond: Int) -> ProcessSample? {
    func kilobytes(_ key: String) -> Int? {
      for line in status.split(separator: "\n") where line.hasPrefix(key + ":") {
        let fields = line.dropFirst(key.count + 1).split(separator: " ", omittingEmptySubsequences: true)
          .flatMap { $0.split(separator: "\t") }
        return fields.first.flatMap { Int($0) }
      }
      return nil
    }
    // The command name (field 2) is in parentheses and may hold spaces: count fields after the last ')'.
    guard let rss = kilobytes("VmRSS"), let close = stat.lastIndex(of: ")"), ticksPerSecond > 0 else {
      return nil
    }
    let fields = stat[stat.index(after: close)...].split(separator: " ")
    // fields[0] is field 3 (state); utime and stime are fields 14 and 15.
    guard fields.count > 12, let user = Int(fields[11]), let system = Int(fields[12]) else { return nil }
    return ProcessSample(
      residentBytes: rss * 1024, peakResidentBytes: (kilobytes("VmHWM") ?? rss) * 1024,
      cpuSeconds: Double(user + system) / Double(ticksPerSecond))
  }
}
