import Foundation
import LoadCore

/// `POST /v1/catchup` as a returning device sends it, and what the harness reads of the answer
/// (docs/protocol.md): C1 for one device, B4 for every device of a storm.
enum CatchUp {
  /// The request body: the store's epoch and the time the device knows of each page.
  static func requestBody(epoch: String, times: [(page: String, time: UInt64)]) -> String {
    let entries = times.map { "\"\($0.page)\":\($0.time)" }.joined(separator: ",")
    return #"{"epoch":"\#(epoch)","pages":{\#(entries)}}"#
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
