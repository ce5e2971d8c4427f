#if canImport(Glibc)
  import Glibc
#endif

/// The machine's wall clock, for what is stamped (HLC times) or shown (`lastSuccessfulSync`); never for
/// deciding what is newer on the broker's side (server sequences do that).
enum WallClock {
  /// Milliseconds since the Unix epoch.
  static func millis() -> UInt64 {
    var now = timespec()
    clock_gettime(CLOCK_REALTIME, &now)
    return UInt64(now.tv_sec) * 1000 + UInt64(now.tv_nsec) / 1_000_000
  }
}
