import DaemonCore
import DaemonCoreTestKit
import DaemonStore
import SyncModel
import Testing
import Web

@testable import Daemon

/// `GET /v1/offline` is written as bytes, without JSONEncoder's tree: it must stay what JSONEncoder wrote.
@Suite struct OfflineListJSONTests {
  @Test func theBytesAreJSONEncodersForEveryShapeOfEntry() throws {
    var random = SystemRandomNumberGenerator()
    let alphabet = Array("abcXYZ019-_")
    func randomID() -> EntityID {
      id(
        String(
          (0..<Int.random(in: 1...64, using: &random)).map { _ in alphabet.randomElement(using: &random)! }))
    }
    for round in 0..<50 {
      // The last rounds cross the 256-entry chunks the body is written in.
      let count = round < 46 ? round % 7 : [255, 256, 257, 600][round - 46]
      let entries = (0..<count).map { _ in
        OfflineEntry(
          id: randomID(),
          reasons: (0..<Int.random(in: 0...3, using: &random)).map { _ in
            OfflineAction(
              origin: randomID(), from: Bool.random(using: &random) ? nil : randomID(), impacted: randomID(),
              type: OfflineReason.allCases.randomElement(using: &random)!)
          },
          lastDownloadedTimestamp: [0, 1, UInt64.max, UInt64.random(in: 0...UInt64.max, using: &random)]
            .randomElement(using: &random)!,
          complete: Bool.random(using: &random), missing: Bool.random(using: &random))
      }
      let expected = JSONBodies().encode(entries.map(OfflineEntryJSON.init)).readableBytesArray
      let written = OfflineListJSON.bytes(entries)
      #expect(
        written == expected,
        "\(String(decoding: written, as: UTF8.self)) != \(String(decoding: expected, as: UTF8.self))")
    }
  }
}
