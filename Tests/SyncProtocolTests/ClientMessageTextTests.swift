import EventLoopTestKit
import FoundationEssentials
import SyncProtocol
import Testing

@Suite struct ClientMessageTextTests {
  /// `subscribe` and `unsubscribe` frames, as the daemon and the load harness write them, are what `JSONEncoder`
  /// writes, for ids as they are and for any text (escaped as `JSONEncoder` escapes it), with and without pages.
  @Test func theDirectTextIsWhatJSONEncoderWrites() throws {
    let encoder = JSONEncoder()
    encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
    var random = SplitMix64(seed: 12)
    let alphabet = Array("aAzZ09_-") + ["\"", "\\", "/", "\n", "\u{0}", "\u{1f}", "é", "✓", "\u{7f}"]
    for round in 0..<300 {
      let pages = (0..<Int(random.next() % 8)).map { _ in
        let length = 1 + Int(random.next() % 10)
        return String(
          (0..<length).map { _ in
            alphabet[Int(random.next() % UInt64(round % 4 == 0 ? alphabet.count : 8))]
          })
      }
      let op = round % 3 == 0 ? "unsubscribe" : round % 7 == 0 ? "a \"quoted\" op" : "subscribe"
      for message in [
        BrokerProtocol.ClientMessage(op: op, pages: pages), BrokerProtocol.ClientMessage(op: op, pages: nil),
      ] {
        let expected = String(decoding: try encoder.encode(message), as: UTF8.self)
        #expect(message.jsonText == expected, "round \(round)")
      }
    }
  }
}
