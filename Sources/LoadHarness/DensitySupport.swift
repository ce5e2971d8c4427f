import EventLoop
import LoadCore
import Web

#if canImport(Glibc)
  import Glibc
#endif

/// Runs `body` for indices `0..<count` with at most `concurrency` in flight (0: all at once); `done` once every
/// one completed, or at the first failure.
func forEachConcurrently(
  _ count: Int, concurrency: Int,
  _ body: @escaping (Int, @escaping (Result<Void, LoadError>) -> Void) -> Void,
  onProgress: ((Int) -> Void)? = nil,
  then done: @escaping (Result<Void, LoadError>) -> Void
) {
  guard count > 0 else { return done(.success(())) }
  var next = 0
  var completed = 0
  var failed = false
  func launch() {
    guard !failed, next < count else { return }
    let index = next
    next += 1
    body(index) { result in
      guard !failed else { return }
      if case .failure(let error) = result {
        failed = true
        return done(.failure(error))
      }
      completed += 1
      onProgress?(completed)
      if completed == count { done(.success(())) } else { launch() }
    }
  }
  for _ in 0..<(concurrency > 0 ? min(concurrency, count) : count) { launch() }
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
