import EventLoopTestKit
import Testing

@testable import BrokerCore

@Suite struct BusMessageTests {
  let change = BusChange(
    origin: "b-1", epoch: "e-7", sequence: 42, clock: "1700000000000:3", workspace: "ws",
    pages: [BusChange.Page(id: "p1", lastUpdated: 42), BusChange.Page(id: "page_2", lastUpdated: 41)])

  func bytes(_ text: String) -> [UInt8] { Array(text.utf8) }

  @Test func changedIsOneDocumentedLine() {
    #expect(
      String(decoding: BusMessage.changed(change).encoded, as: UTF8.self)
        == "pagesync-bus/1 changed b-1 e-7 42 1700000000000:3 ws p1=42 page_2=41")
    #expect(
      String(decoding: BusMessage.resync(origin: "b-1").encoded, as: UTF8.self) == "pagesync-bus/1 resync b-1"
    )
  }

  @Test func roundTrips() throws {
    for message in [BusMessage.changed(change), .resync(origin: "x.y:z")] {
      #expect(try BusMessage.decode(message.encoded, maxBytes: 1 << 20) == message)
    }
  }

  @Test func everyPrefixIsRefusedNeverACrash() {
    // Split at every offset: each strict prefix but the ones that end after a whole page entry is an error.
    let whole = BusMessage.changed(change).encoded
    for end in 0..<whole.count {
      let prefix = Array(whole[..<end])
      let result = Result { () throws(BusMessageError) in try BusMessage.decode(prefix, maxBytes: 1 << 20) }
      if case .success(let message) = result {
        // "…p1=4" is a valid message of its own (time 4): a truncated line still decodes to a well-formed one.
        guard case .changed(let decoded) = message else {
          Issue.record("prefix \(end) decoded as \(message)")
          continue
        }
        #expect(decoded.origin == "b-1" && decoded.workspace == "ws")
      }
    }
  }

  @Test func refusesWhatIsNotThisVersionNamingTheProblem() {
    let cases: [(String, BusMessageError)] = [
      ("", .otherVersion("")),
      ("pagesync-bus/2 changed b e 1 9:0 w p=1", .otherVersion("pagesync-bus/2 changed b e 1 9:0")),
      ("\u{FF}garbage", .otherVersion("\u{FF}garbage")),
      ("pagesync-bus/1", .missing("kind")),
      ("pagesync-bus/1 deleted b", .unknownKind("deleted")),
      ("pagesync-bus/1 resync", .missing("origin")),
      ("pagesync-bus/1 resync b extra", .trailing),
      ("pagesync-bus/1 changed b e 1 9:0 w", .missing("pages")),
      ("pagesync-bus/1 changed b e 01 9:0 w p=1", .badField("sequence")),
      ("pagesync-bus/1 changed b e -1 9:0 w p=1", .badField("sequence")),
      ("pagesync-bus/1 changed b e 18446744073709551616 9:0 w p=1", .badField("sequence")),
      ("pagesync-bus/1 changed b e 1 9:0 w p", .badField("page")),
      ("pagesync-bus/1 changed b e 1 9:0 w p/x=1", .badField("page")),
      ("pagesync-bus/1 changed b e 1 9:0 w p=x", .badField("time")),
      ("pagesync-bus/1 changed b e 1 9:0 w p=1  q=2", .badField("page")),
      ("pagesync-bus/1 changed b\te 1 9:0 w p=1", .badField("origin")),
      ("pagesync-bus/1 changed b e 1 9/0 w p=1", .badField("clock")),
      ("pagesync-bus/1 changed \(String(repeating: "o", count: 65)) e 1 9:0 w p=1", .badField("origin")),
    ]
    for (text, expected) in cases {
      #expect(throws: expected) { try BusMessage.decode(bytes(text), maxBytes: 1 << 20) }
    }
  }

  /// Seeded damage to valid messages (bytes replaced, inserted, deleted): never a crash, and whatever decodes is
  /// exactly what its bytes say (it encodes back to them), so nothing is read that was not written.
  @Test(arguments: [UInt64(1), 2, 3]) func damagedMessagesAreRefusedOrReadExactly(seed: UInt64) {
    var random = SplitMix64(seed: seed)
    let alphabet = Array("pagesync-bus/1 changed resync=0123456789 \u{0}\u{FF}-_.:aZ".utf8)
    let valid = [BusMessage.changed(change).encoded, BusMessage.resync(origin: "b-1").encoded]
    var decoded = 0
    for _ in 0..<20_000 {
      var bytes = valid[Int.random(in: 0..<valid.count, using: &random)]
      for _ in 0..<Int.random(in: 1...3, using: &random) {
        let at = Int.random(in: 0...bytes.count, using: &random)
        let byte = alphabet[Int.random(in: 0..<alphabet.count, using: &random)]
        switch Int.random(in: 0..<3, using: &random) {
        case 0 where at < bytes.count: bytes[at] = byte
        case 1: bytes.insert(byte, at: at)
        default: if at < bytes.count { bytes.remove(at: at) }
        }
      }
      if let message = try? BusMessage.decode(bytes, maxBytes: 1 << 20) {
        decoded += 1
        #expect(message.encoded == bytes, "\(String(decoding: bytes, as: UTF8.self))")
      }
    }
    #expect(decoded > 0 && decoded < 20_000)
  }

  @Test func theSizeBoundComesFirst() {
    let message = BusMessage.changed(change).encoded
    #expect(throws: BusMessageError.tooLarge(message.count, message.count - 1)) {
      try BusMessage.decode(message, maxBytes: message.count - 1)
    }
    #expect(throws: BusMessageError.tooLarge(5000, 1024)) {
      try BusMessage.decode([UInt8](repeating: 0, count: 5000), maxBytes: 1024)
    }
  }

  @Test func aLargeBatchIsSplitIntoMessagesWithinTheBoundAndLosesNoPage() throws {
    let pages = (0..<1000).map { BusChange.Page(id: "page-\($0)", lastUpdated: 9_000_000 + UInt64($0)) }
    let messages = BusChange.messages(
      origin: "b", epoch: "e", sequence: 9, clock: "1:0", workspace: "w", pages: pages, maxBytes: 1024)
    #expect(messages.count > 10)
    var seen: [BusChange.Page] = []
    for message in messages {
      #expect(message.count <= 1024)
      guard case .changed(let change) = try BusMessage.decode(message, maxBytes: 1024) else {
        Issue.record("not a change")
        continue
      }
      #expect(change.sequence == 9 && change.workspace == "w")
      seen += change.pages
    }
    #expect(seen == pages)
    #expect(
      BusChange.messages(
        origin: "b", epoch: "e", sequence: 9, clock: "1:0", workspace: "w", pages: [], maxBytes: 1024
      )
      .isEmpty)
  }

  @Test func channelsNameTheirWorkspace() {
    #expect(BusMessage.channel(ofWorkspace: "w1") == "pagesync:ws:w1")
    #expect(BusMessage.workspace(ofChannel: "pagesync:ws:w1") == "w1")
    #expect(BusMessage.workspace(ofChannel: BusMessage.resyncChannel) == nil)
  }
}

@Suite struct BusSubscriptionsTests {
  @Test func aChannelIsSubscribedByItsFirstHolderAndUnsubscribedAfterItsLast() {
    var subscriptions = BusSubscriptions()
    #expect(subscriptions.hold(["a", "b"]) == ["pagesync:ws:a", "pagesync:ws:b"])
    #expect(subscriptions.hold(["b", "c"]) == ["pagesync:ws:c"])
    #expect(subscriptions.release(["a", "b"]) == ["pagesync:ws:a"])
    #expect(subscriptions.channels == ["pagesync:resync", "pagesync:ws:b", "pagesync:ws:c"])
    #expect(subscriptions.release(["b", "c"]).sorted() == ["pagesync:ws:b", "pagesync:ws:c"])
    #expect(subscriptions.channels == ["pagesync:resync"])
    // Releasing what nobody holds changes nothing (a stream closing twice, a revoked grant).
    #expect(subscriptions.release(["a"]).isEmpty)
    #expect(subscriptions.workspaceCount == 0)
  }
}
