import Foundation
import LoadCore

/// `POST /v1/catchup` as a returning device sends it, and what the harness reads of the answer
/// (docs/protocol.md): C1 for one device, B4 for every device of a storm.
enum CatchUp {
  /// The request body: the store's epoch and the time the device knows of each page.
  /// Written as bytes: a string per entry cost about 0.3 µs a page, inside C1's timed catch-up. The harness's
  /// ids and epochs need no escaping.
  static func requestBody(epoch: String, times: [(page: String, time: UInt64)]) -> String {
    var out: [UInt8] = []
    out.reserveCapacity(times.count * 48 + 80)
    out.append(contentsOf: #"{"epoch":""#.utf8)
    out.append(contentsOf: epoch.utf8)
    out.append(contentsOf: #"","pages":{"#.utf8)
    for (index, entry) in times.enumerated() {
      if index > 0 { out.append(UInt8(ascii: ",")) }
      out.append(UInt8(ascii: "\""))
      out.append(contentsOf: entry.page.utf8)
      out.append(contentsOf: #"":"#.utf8)
      appendDigits(entry.time, to: &out)
    }
    out.append(contentsOf: "}}".utf8)
    return String(decoding: out, as: UTF8.self)
  }

  private static func appendDigits(_ value: UInt64, to out: inout [UInt8]) {
    guard value >= 10 else { return out.append(UInt8(ascii: "0") + UInt8(value)) }
    appendDigits(value / 10, to: &out)
    out.append(UInt8(ascii: "0") + UInt8(value % 10))
  }

  /// What the broker answered.
  struct Answer {
    /// The pages that changed since the device's times, with their new times.
    var changed: [String: UInt64]
    /// Pages that are gone.
    var gone: Int
    /// The store's epoch is not the device's: it must download everything again.
    var epochChanged: Bool

    init(_ object: [String: Any]) {
      changed = (object["changed"] as? [String: Any] ?? [:]).compactMapValues {
        ($0 as? NSNumber)?.uint64Value
      }
      gone = (object["gone"] as? [Any])?.count ?? 0
      epochChanged = object["epochChanged"] as? Bool ?? false
    }

    /// Whether it told the device exactly its changed pages at their new times (`check`), none gone, in the
    /// same epoch.
    func isExact(_ check: CatchUpCheck) -> Bool { check.isExact && gone == 0 && !epochChanged }
  }
}
