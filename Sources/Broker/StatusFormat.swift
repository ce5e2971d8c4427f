import SyncModel

/// How the status page writes numbers for people: the same in every locale (no Foundation formatter), short, and
/// exact where exactness matters (counts are whole, with thousands separated by commas).
enum StatusFormat {
  /// `1234567` → `1,234,567`.
  static func count(_ value: Int) -> String {
    let digits = String(value.magnitude)
    var grouped = ""
    for (index, digit) in digits.enumerated() {
      if index > 0 && (digits.count - index) % 3 == 0 { grouped += "," }
      grouped.append(digit)
    }
    return value < 0 ? "-" + grouped : grouped
  }

  /// `value` with one decimal (`12.5`), or none from 100 on (`1,234`).
  static func decimal(_ value: Double) -> String {
    guard value.isFinite else { return "–" }
    if value.magnitude >= 100 { return count(Int(value.rounded())) }
    let tenths = Int((value * 10).rounded())
    return (tenths < 0 ? "-" : "") + "\(tenths.magnitude / 10).\(tenths.magnitude % 10)"
  }

  /// A rate: `12.5/s`.
  static func perSecond(_ value: Double) -> String { decimal(value) + "/s" }

  /// Bytes in binary units: `812 B`, `3.2 KiB`, `12.3 MiB`, `1.5 GiB`.
  static func bytes(_ value: Int) -> String {
    let units = ["KiB", "MiB", "GiB", "TiB"]
    guard value >= 1024 else { return "\(value) B" }
    var scaled = Double(value) / 1024
    var unit = 0
    while scaled >= 1024 && unit < units.count - 1 {
      scaled /= 1024
      unit += 1
    }
    return decimal(scaled) + " " + units[unit]
  }

  /// A short duration: `250 µs`, `12.5 ms`, `1.3 s`.
  static func duration(_ value: Duration) -> String {
    let (seconds, attoseconds) = value.components
    let microseconds = Double(seconds) * 1_000_000 + Double(attoseconds) / 1_000_000_000_000
    if microseconds < 1000 { return "\(Int(microseconds.rounded())) µs" }
    if microseconds < 1_000_000 { return decimal(microseconds / 1000) + " ms" }
    return decimal(microseconds / 1_000_000) + " s"
  }

  /// An uptime in its two largest units: `42 s`, `5 min 3 s`, `3 h 12 min`, `4 d 2 h`.
  static func uptime(milliseconds: UInt64) -> String {
    let seconds = milliseconds / 1000
    let (days, hours, minutes) = (seconds / 86_400, seconds / 3600 % 24, seconds / 60 % 60)
    if days > 0 { return "\(days) d \(hours) h" }
    if hours > 0 { return "\(hours) h \(minutes) min" }
    if minutes > 0 { return "\(minutes) min \(seconds % 60) s" }
    return "\(seconds) s"
  }

  /// Seconds since 1970 as a UTC date and time: `2025-01-31 09:00:00 UTC`.
  static func utc(secondsSince1970 value: Double) -> String {
    UTCText.of(milliseconds: Int64(value.rounded(.down)) * 1000)
  }
}
