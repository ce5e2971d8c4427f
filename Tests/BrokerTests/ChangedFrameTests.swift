import EventLoopTestKit
import FoundationEssentials
import SyncProtocol
import Testing

@Suite struct ChangedFrameTests {
  @Test func theDirectTextIsWhatJSONEncoderWrites() throws {
    let encoder = JSONEncoder()
    encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
    var random = SplitMix64(seed: 11)
    let alphabet = Array("aAzZ09_-") + ["\"", "\\", "/", "\n", "\u{0}", "\u{1f}", "é", "✓", "\u{7f}"]
    for round in 0..<300 {
      var pages: [String: UInt64] = [:]
      for _ in 0..<Int(random.next() % 8) {
        let length = 1 + Int(random.next() % 10)
        // Mostly ids as the broker has them; one round in four, any text (the writer must escape it as
        // JSONEncoder does).
        let page = String(
          (0..<length).map { _ in
            alphabet[Int(random.next() % UInt64(round % 4 == 0 ? alphabet.count : 8))]
          })
        pages[page] = random.next() >> UInt64(random.next() % 64)
      }
      let frame = BrokerProtocol.Changed(pages: pages)
      let expected = String(decoding: try encoder.encode(frame), as: UTF8.self)
      #expect(frame.jsonText == expected, "round \(round)")
    }
  }
}
