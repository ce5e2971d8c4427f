/// How a fan-out run spreads its subscribers over reader threads (`--reader-threads`): subscriber `i` is read by
/// thread `i % threads`, where it is the thread's subscriber `i / threads`. Round robin, so that every thread gets
/// the same share of subscribers and, in B2 (a page per subscriber), of pages.
public struct ReaderSplit: Sendable, Equatable {
  public let threads: Int
  public let subscribers: Int
  public let channels: Int

  public init(threads: Int, subscribers: Int, channels: Int) {
    precondition(threads >= 1 && subscribers >= 0 && channels >= 1, "a split needs a thread and a channel")
    self.threads = threads
    self.subscribers = subscribers
    self.channels = channels
  }

  /// The default for a machine with `cores` cores: half of them (the other half runs the servers under test and
  /// the generator), at least 1, at most 8.
  public static func defaultThreads(cores: Int) -> Int { max(1, min(8, cores / 2)) }

  /// The thread that reads subscriber `subscriber`, and the subscriber's index on it.
  public func place(of subscriber: Int) -> (thread: Int, local: Int) {
    (subscriber % threads, subscriber / threads)
  }

  /// The subscriber whose index on `thread` is `local`.
  public func subscriber(thread: Int, local: Int) -> Int { local * threads + thread }

  /// How many subscribers `thread` reads.
  public func count(on thread: Int) -> Int {
    guard thread < subscribers else { return 0 }
    return (subscribers - thread + threads - 1) / threads
  }

  /// The channel of each of `thread`'s subscribers, by local index (subscriber `i` watches channel `i % channels`).
  public func channels(on thread: Int) -> [Int] {
    (0..<count(on: thread)).map { subscriber(thread: thread, local: $0) % channels }
  }

  /// For each channel, the threads that read one of its subscribers (in order): where its acknowledgements go.
  public func threadsByChannel() -> [[Int]] {
    var byChannel = Array(repeating: [Int](), count: channels)
    for subscriber in 0..<subscribers {
      let channel = subscriber % channels
      let thread = subscriber % threads
      if !byChannel[channel].contains(thread) { byChannel[channel].append(thread) }
    }
    return byChannel
  }
}

/// One thread's CPU time from its `/proc/self/task/TID/stat` line: user and system time in clock ticks
/// (fields 14 and 15, counted after the command name, which is in parentheses and may hold spaces).
public enum ThreadStat {
  public static func ticks(of stat: String) -> UInt64? {
    guard let close = stat.lastIndex(of: ")") else { return nil }
    // After ")": field 3 (state) is the first; utime and stime are fields 14 and 15.
    let fields = stat[stat.index(after: close)...].split(separator: " ")
    guard fields.count >= 13, let user = UInt64(fields[11]), let system = UInt64(fields[12]) else {
      return nil
    }
    return user + system
  }

  /// The CPU `ticks` over `seconds` of wall time, in % of one core.
  public static func percent(ticks: UInt64, ticksPerSecond: Int, seconds: Double) -> Double {
    guard ticksPerSecond > 0, seconds > 0 else { return 0 }
    return Double(ticks) / Double(ticksPerSecond) / seconds * 100
  }
}
