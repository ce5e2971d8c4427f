import SyncModel
import SyncProtocol

/// The range of every integer the daemon takes from the broker: page times and sequences, mutation ids. The
/// broker keeps them in SQLite's signed 64-bit integers, and so does the daemon: a value above `Int64.max` (which
/// the strict reader accepts in a `UInt64` field) is none the broker can have sent, and converting it to store it
/// would trap. Such an answer is not understood (`BrokerLinkError.invalidAnswer`), such a frame unreadable:
/// nothing of it is stored or acted on (docs/protocol.md, "Conventions").
enum BrokerNumbers {
  /// The largest integer the daemon accepts in an answer or frame.
  static let maximum = UInt64(Int64.max)

  /// `what` and `value` described, when `value` is out of range; nil when it is in range.
  static func check(_ value: UInt64, _ what: @autoclosure () -> String) -> String? {
    value <= maximum ? nil : "\(what()) is \(value), above the largest the daemon accepts (2^63-1)"
  }

  /// The first of `times` (page id → time) out of range, described.
  static func check<Key: CustomStringConvertible>(_ times: [Key: UInt64], _ what: String) -> String? {
    for (key, time) in times {
      if let problem = check(time, "\(what).\(key)") { return problem }
    }
    return nil
  }
}

/// An answer of the broker whose integers are checked against `BrokerNumbers.maximum` after decoding
/// (`HTTPBrokerLink.decodeAnswer`).
protocol BrokerNumbersChecked {
  /// The first integer out of range, described (its field and value); nil when every one is in range.
  var numberOutOfRange: String? { get }
}

extension BrokerProtocol.CatchUpResponse: BrokerNumbersChecked {
  var numberOutOfRange: String? {
    BrokerNumbers.check(sequence, "sequence") ?? BrokerNumbers.check(changed, "changed")
  }
}

extension PageDelta {
  fileprivate func numberOutOfRange(at index: Int) -> String? {
    BrokerNumbers.check(since, "deltas[\(index)].since")
      ?? BrokerNumbers.check(lastUpdatedTime, "deltas[\(index)].lastUpdatedTime")
      ?? BrokerNumbers.check(page.lastUpdatedTime, "deltas[\(index)].page.lastUpdatedTime")
  }
}

extension BrokerProtocol.FetchResponse: BrokerNumbersChecked {
  var numberOutOfRange: String? {
    for (index, delta) in deltas.enumerated() {
      if let problem = delta.numberOutOfRange(at: index) { return problem }
    }
    return nil
  }
}

extension BatchOutcome: BrokerNumbersChecked {
  var numberOutOfRange: String? {
    if let problem = BrokerNumbers.check(lastMutationId, "lastMutationId") { return problem }
    if let sequence, let problem = BrokerNumbers.check(sequence, "sequence") { return problem }
    if let problem = BrokerNumbers.check(pages, "pages") { return problem }
    for (index, result) in results.enumerated() {
      if let problem = BrokerNumbers.check(result.mutationId, "results[\(index)].mutationId") {
        return problem
      }
    }
    return nil
  }
}

extension PageSnapshot: BrokerNumbersChecked {
  var numberOutOfRange: String? { BrokerNumbers.check(lastUpdatedTime, "lastUpdatedTime") }
}

extension BrokerProtocol.ServerMessage {
  /// A `changed` frame's first time out of range, described; nil for every other frame.
  var numberOutOfRange: String? {
    guard case .changed(let changed) = self else { return nil }
    return BrokerNumbers.check(changed.pages, "pages")
  }
}
