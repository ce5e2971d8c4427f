@testable import BrokerCore

#if canImport(Glibc)
  import Glibc
#endif

/// SplitMix64 (Steele, Lea, Flood 2014): a tiny deterministic generator, so a failing random case reproduces.
/// (The same generator as WebTests'; BrokerCoreTests does not depend on those modules.)
struct SplitMix64: RandomNumberGenerator {
  private var state: UInt64
  init(seed: UInt64) { state = seed }
  mutating func next() -> UInt64 {
    state &+= 0x9E37_79B9_7F4A_7C15
    var z = state
    z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
    z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
    return z ^ (z >> 31)
  }
}

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
