@testable import BrokerCore

#if canImport(Glibc)
  import Glibc
#endif

/// The resident set size of this process in bytes (from /proc/self/statm), or nil if unreadable. Printed by
/// the memory tests, never asserted: it depends on the allocator and on whatever else the test process holds.
func residentBytes() -> Int? {
  #if canImport(Glibc)
    let file = open("/proc/self/statm", O_RDONLY)
    guard file >= 0 else { return nil }
    defer { close(file) }
    var buffer = [UInt8](repeating: 0, count: 128)
    let read = buffer.withUnsafeMutableBytes { Glibc.read(file, $0.baseAddress, $0.count) }
    guard read > 0 else { return nil }
    let fields = String(decoding: buffer[..<read], as: UTF8.self).split(separator: " ")
    guard fields.count > 1, let pages = Int(fields[1]) else { return nil }
    return pages * sysconf(Int32(_SC_PAGESIZE))
  #else
    return nil
  #endif
}

/// A page id of the usual shape (36 characters, like a UUID), distinct for every `n`.
func uuidLikePageID(_ n: Int) -> String {
  let hex = String(n, radix: 16)
  let digits = String(repeating: "0", count: 12 - hex.count) + hex
  return "0c1d2e3f-4a5b-4c6d-8e7f-" + digits
}

extension ChannelIndex {
  /// The page id of a key, or a marker for a key that is not live, so a test that finds a stale key fails with a
  /// message instead of stopping at `pageID(for:)`'s precondition.
  func name(of key: PageKey) -> String {
    isLive(key) ? pageID(for: key) : "<released key \(key.rawValue)>"
  }
}
