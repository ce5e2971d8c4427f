import ByteBuffers
import EventLoop
import EventLoopTestKit
import FoundationEssentials
import StrictJSON
import StrictJSONTestKit
import SyncModel
import SyncProtocol
import Testing
import Web

/// Random stream messages and catch-up and fetch requests.
enum RandomRequest {
  static func pageID(_ random: inout SplitMix64) -> String {
    switch Int.random(in: 0..<5, using: &random) {
    case 0: EntityID.random().rawValue
    case 1: ["home", "tasks", "p1", "r2"].randomElement(using: &random)!
    case 2: String(repeating: "x", count: Int.random(in: 60...70, using: &random))
    case 3: JSONMutator.randomString(using: &random)
    default: String(Int.random(in: 0...1000, using: &random))
    }
  }

  static func validID(_ random: inout SplitMix64) -> EntityID {
    let text = pageID(&random)
    return (try? EntityID(validating: text)) ?? EntityID.random()
  }

  static func time(_ random: inout SplitMix64) -> UInt64 {
    [0, 17, UInt64.random(in: 0...UInt64.max, using: &random), UInt64.max, 9_007_199_254_740_993]
      .randomElement(
        using: &random)!
  }

  static func pages(_ random: inout SplitMix64) -> [EntityID: UInt64] {
    let count = Int.random(in: 0..<40, using: &random) == 0 ? 400 : Int.random(in: 0...20, using: &random)
    return Dictionary((0..<count).map { _ in (validID(&random), time(&random)) }) { a, _ in a }
  }

  static func epoch(_ random: inout SplitMix64) -> String? {
    [nil, "4259ddef1173f7d80357e156a0377014", JSONMutator.randomString(using: &random)].randomElement(
      using: &random)!
  }

  static func clientMessage(_ random: inout SplitMix64) -> BrokerProtocol.ClientMessage {
    let count = Int.random(in: 0..<40, using: &random) == 0 ? 400 : Int.random(in: 0...10, using: &random)
    return BrokerProtocol.ClientMessage(
      op: ["subscribe", "unsubscribe", "dance", JSONMutator.randomString(using: &random)].randomElement(
        using: &random)!,
      pages: Bool.random(using: &random) ? (0..<count).map { _ in pageID(&random) } : nil)
  }

  static func catchUp(_ random: inout SplitMix64) -> BrokerProtocol.CatchUpRequest {
    BrokerProtocol.CatchUpRequest(epoch: epoch(&random), pages: pages(&random))
  }

  static func fetch(_ random: inout SplitMix64) -> BrokerProtocol.FetchRequest {
    BrokerProtocol.FetchRequest(
      epoch: epoch(&random), pages: pages(&random),
      limit: [nil, 100, 0, -5, Int.max, Int.min].randomElement(using: &random)!,
      cursor: Bool.random(using: &random) ? validID(&random) : nil)
  }

  static func encoded(_ value: some Encodable, _ random: inout SplitMix64) -> [UInt8] {
    let encoder = JSONEncoder()
    encoder.outputFormatting = [[], [.sortedKeys], [.prettyPrinted]].randomElement(using: &random)!
    return Array(try! encoder.encode(value))
  }
}

/// The broker's readers of stream messages and catch-up and fetch bodies against `JSONDecoder`.
@Suite struct BrokerProtocolStrictJSONTests {
  /// Random messages as `JSONEncoder` writes them and rewritten with random spacing, escapes and number
  /// spellings, then damaged: the two agree on every one.
  func checkAgreement<T: Codable & JSONReadable>(
    _ type: T.Type, seed: UInt64, rounds: Int, _ make: (inout SplitMix64) -> T
  ) throws {
    var random = SplitMix64(seed: seed)
    var whole = DecodingAgreement.Tally()
    var damaged = DecodingAgreement.Tally()
    for _ in 0..<rounds {
      let value = make(&random)
      let encoded = RandomRequest.encoded(value, &random)
      #expect(DecodingAgreement.check(T.self, encoded) == .bothAccepted)
      let decoded = try JSONReader.decode(T.self, from: encoded)
      #expect(DecodingAgreement.encoded(decoded) == DecodingAgreement.encoded(value))
      let tree = try #require(TestJSON(parsing: encoded))
      DecodingAgreement.rewriteAndDamage(tree, using: &random, whole: &whole, damaged: &damaged) {
        DecodingAgreement.check(T.self, $0)
      }
    }
    #expect(
      whole.disagreements.isEmpty && damaged.disagreements.isEmpty,
      "\(whole.disagreements.prefix(3)) \(damaged.disagreements.prefix(3))")
    #expect(whole.refused == 0 && whole.notStrict == 0, "\(whole)")
    #expect(
      damaged.accepted > rounds / 2 && damaged.refused > rounds / 2 && damaged.notStrict > rounds,
      "\(damaged)")
  }

  @Test func readsClientMessagesAsJSONDecoderDoes() throws {
    try checkAgreement(
      BrokerProtocol.ClientMessage.self, seed: 0x5EED_0000_0000_0501, rounds: 300, RandomRequest.clientMessage
    )
  }

  @Test func readsCatchUpRequestsAsJSONDecoderDoes() throws {
    try checkAgreement(
      BrokerProtocol.CatchUpRequest.self, seed: 0x5EED_0000_0000_0502, rounds: 300, RandomRequest.catchUp)
  }

  @Test func readsFetchRequestsAsJSONDecoderDoes() throws {
    try checkAgreement(
      BrokerProtocol.FetchRequest.self, seed: 0x5EED_0000_0000_0503, rounds: 300, RandomRequest.fetch)
  }

  /// Each error of these messages, worded as `JSONDecoder` words it.
  @Test(arguments: [
    ("ClientMessage", "42", "Expected to decode Dictionary<String, Any> but found number instead."),
    ("ClientMessage", #"{"pages":[]}"#, #"missing field "op""#),
    (
      "ClientMessage", #"{"op":"subscribe","pages":"home"}"#,
      "at pages: Expected to decode Array<Any> but found a string instead."
    ),
    (
      "ClientMessage", #"{"op":"subscribe","pages":[1,2]}"#,
      "at pages[0]: Expected to decode String but found number instead."
    ),
    (
      "ClientMessage", #"{"op":"subscribe","pages":["a",null]}"#,
      "at pages[1]: Cannot get value of type String -- found null value instead"
    ),
    ("ClientMessage", #"{"op":null}"#, "at op: Cannot get value of type String -- found null value instead"),
    ("CatchUpRequest", #"{"pages":{"bad id":1}}"#, "at pages.bad id: Could not convert key to type EntityID"),
    (
      "CatchUpRequest", #"{"pages":{"home":"1"}}"#,
      "at pages.home: Expected to decode UInt64 but found a string instead."
    ),
    (
      "CatchUpRequest", #"{"pages":{"12":true}}"#,
      "at pages[12]: Expected to decode UInt64 but found bool instead."
    ),
    (
      "CatchUpRequest", #"{"pages":{"home":null}}"#,
      "at pages.home: Cannot get value of type UInt64 -- found null value instead"
    ),
    (
      "CatchUpRequest", #"{"epoch":5,"pages":{}}"#,
      "at epoch: Expected to decode String but found number instead."
    ),
    ("CatchUpRequest", #"{"epoch":"e"}"#, #"missing field "pages""#),
    (
      "CatchUpRequest", #"{"pages":null}"#,
      "at pages: Cannot get keyed decoding container -- found null value instead"
    ),
    (
      "FetchRequest", #"{"pages":["home"]}"#,
      "at pages: Expected to decode Dictionary<String, Any> but found an array instead."
    ),
    (
      "FetchRequest", #"{"pages":{},"limit":"10"}"#,
      "at limit: Expected to decode Int but found a string instead."
    ),
    (
      "FetchRequest", #"{"pages":{},"cursor":"a b"}"#,
      #"at cursor: invalid id "a b": ids are 1 to 64 of A-Z a-z 0-9 _ -"#
    ),
    (
      "FetchRequest", #"{"pages":{},"cursor":3}"#,
      "at cursor: Expected to decode String but found number instead."
    ),
  ])
  func wordsEachErrorAsJSONDecoderDoes(_ type: String, _ json: String, _ message: String) {
    let outcome: DecodingAgreement.Outcome =
      switch type {
      case "ClientMessage": DecodingAgreement.check(BrokerProtocol.ClientMessage.self, Array(json.utf8))
      case "CatchUpRequest": DecodingAgreement.check(BrokerProtocol.CatchUpRequest.self, Array(json.utf8))
      default: DecodingAgreement.check(BrokerProtocol.FetchRequest.self, Array(json.utf8))
      }
    #expect(outcome == .bothRefused(foundation: message, strict: message))
  }

  /// Optional members: `null` is absent; the first of duplicate page ids wins and a later one's value is not
  /// even decoded.
  @Test func readsOptionalsAndDuplicatesAsJSONDecoderDoes() throws {
    let json = #"{"epoch":null,"limit":null,"cursor":null,"pages":{"a":1,"b":2,"a":"x"},"pages":5}"#
    #expect(DecodingAgreement.check(BrokerProtocol.FetchRequest.self, Array(json.utf8)) == .bothAccepted)
    let fetch = try JSONReader.decode(BrokerProtocol.FetchRequest.self, from: json)
    #expect(fetch.epoch == nil && fetch.limit == nil && fetch.cursor == nil)
    #expect(fetch.pages == [try EntityID(validating: "a"): 1, try EntityID(validating: "b"): 2])
    let message = try JSONReader.decode(
      BrokerProtocol.ClientMessage.self, from: #"{"op":"subscribe","pages":null}"#)
    #expect(message.op == "subscribe" && message.pages == nil)
  }

  /// A catch-up of 50,000 pages (the large end is a million): read, equal to what was sent.
  @Test func readsALargeCatchUpMap() throws {
    var pages: [EntityID: UInt64] = [:]
    var random = SplitMix64(seed: 0x5EED_0000_0000_0504)
    for index in 0..<50_000 { pages[EntityID.random()] = UInt64(index) &* random.next() }
    let body = Array(try JSONEncoder().encode(BrokerProtocol.CatchUpRequest(epoch: "e", pages: pages)))
    let request = try JSONReader.decode(BrokerProtocol.CatchUpRequest.self, from: body)
    #expect(request.pages == pages)
    #expect(request.epoch == "e")
  }

  /// `JSONBodies.read`, as the broker answers a bad body: a 400 that starts `invalid JSON body:`, the UTF-8
  /// message kept, and what `JSONBodies.decode` would answer for a problem both see.
  @Test func answersBadBodiesWithA400NamingTheProblem() throws {
    let bodies = JSONBodies()
    func answer(_ body: [UInt8]) -> HTTPResponseError? {
      let request = HTTPRequest(
        head: HTTPRequestHead(method: .POST, target: "/v1/catchup"), body: ByteBuffer(bytes: body))
      if case .failure(let error) = bodies.read(BrokerProtocol.CatchUpRequest.self, request) { return error }
      return nil
    }
    #expect(answer(Array(#"{"pages":{"home":3}}"#.utf8)) == nil)
    #expect(answer([0x7B, 0x22, 0xFF, 0x22, 0x7D])?.message == "invalid JSON body: it is not valid UTF-8")
    #expect(
      answer(Array("{".utf8))?.message
        == "invalid JSON body: unexpected end of input, expecting a member or '}' (byte 1)")
    let bad = Array(#"{"pages":{"bad id":1}}"#.utf8)
    #expect(answer(bad)?.status == .badRequest)
    #expect(
      answer(bad)?.message == "invalid JSON body: at pages.bad id: Could not convert key to type EntityID")
    let decoded: Result<BrokerProtocol.CatchUpRequest, HTTPResponseError> = bodies.decode(
      BrokerProtocol.CatchUpRequest.self,
      HTTPRequest(head: HTTPRequestHead(method: .POST, target: "/v1/catchup"), body: ByteBuffer(bytes: bad)))
    guard case .failure(let viaDecoder) = decoded else {
      Issue.record("JSONBodies.decode accepted a bad key")
      return
    }
    #expect(viaDecoder.message == answer(bad)?.message)
  }
}
