/// A time as a UTC civil date and time, `2026-11-22 04:58:04 UTC`, without Foundation: days since 1970 to a
/// proleptic Gregorian date by Howard Hinnant's `civil_from_days`. For what people read (`pagesync`'s tables, the
/// broker's status page), never for what programs parse.
public enum UTCText {
  /// `milliseconds` since 1970 (negative: before), rounded down to the second.
  public static func of(milliseconds: Int64) -> String {
    let seconds = milliseconds >= 0 ? milliseconds / 1000 : (milliseconds - 999) / 1000
    let days = seconds >= 0 ? seconds / 86_400 : (seconds - 86_399) / 86_400
    let secondOfDay = seconds - days * 86_400
    let shifted = days + 719_468
    let era = (shifted >= 0 ? shifted : shifted - 146_096) / 146_097
    let dayOfEra = shifted - era * 146_097
    let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
    let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
    let monthIndex = (5 * dayOfYear + 2) / 153
    let day = dayOfYear - (153 * monthIndex + 2) / 5 + 1
    let month = monthIndex < 10 ? monthIndex + 3 : monthIndex - 9
    let year = yearOfEra + era * 400 + (month <= 2 ? 1 : 0)
    func two(_ number: Int64) -> String { number < 10 ? "0\(number)" : "\(number)" }
    return "\(year)-\(two(month))-\(two(day)) \(two(secondOfDay / 3600)):\(two(secondOfDay % 3600 / 60)):"
      + "\(two(secondOfDay % 60)) UTC"
  }
}
