import EventLoopTestKit
import FoundationEssentials
import SyncModel
import Testing

@Suite struct BatchOutcomeJSONTests {
  private static func foundation(_ outcome: BatchOutcome) throws -> [UInt8] {
    let encoder = JSONEncoder()
    encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
    return Array(try encoder.encode(outcome))
  }

  @Test func theDirectEncodingIsWhatJSONEncoderWrites() throws {
    var random = SplitMix64(seed: 7)
    let alphabet =
      Array("aZ09_-") + ["\"", "\\", "/", "\n", "\t", "\u{0}", "\u{1f}", "\u{8}", "\u{c}", "\r", "é", "✓"]
    func text(_ length: Int) -> String {
      String((0..<length).map { _ in alphabet[Int(random.next() % UInt64(alphabet.count))] })
    }
    func entity() -> EntityID {
      try! EntityID(
        validating: String(
          (0..<(1 + Int(random.next() % 12))).map { _ in
            Array("abcXYZ019_-")[Int(random.next() % 11)]
          }))
    }
    for round in 0..<300 {
      let statuses: [MutationResult.Status] = [.applied, .duplicate, .rejected]
      let results = (0..<Int(random.next() % 6)).map { index in
        let status = statuses[Int(random.next() % 3)]
        return MutationResult(
          mutationId: random.next() >> UInt64(random.next() % 64), page: entity(), status: status,
          reason: status == .rejected
            ? (round % 5 == 0
              ? RejectionReason(code: Int(random.next() % 1000), name: text(8))
              : RejectionReason.all[index % RejectionReason.all.count]) : nil,
          message: status == .rejected && round % 2 == 0 ? text(20) : nil)
      }
      var pages: [EntityID: UInt64] = [:]
      for _ in 0..<Int(random.next() % 6) { pages[entity()] = random.next() >> UInt64(random.next() % 64) }
      let outcome = BatchOutcome(
        results: results, pages: pages, sequence: round % 3 == 0 ? nil : random.next() % 100_000,
        lastMutationId: random.next(), epoch: round % 4 == 0 ? text(12) : "e-\(round)")
      #expect(outcome.jsonBytes == (try Self.foundation(outcome)), "round \(round)")
    }
  }
}
