import EventLoopTestKit
import FoundationEssentials
import StrictJSON
import StrictJSONTestKit
import SyncModel
import SyncProtocol
import Testing

@testable import Daemon

/// Random answers of the broker, as JSON trees (`TestJSON`), valid for the daemon's types.
private enum RandomAnswer {
  static func id(_ random: inout SplitMix64) -> TestJSON {
    .string(
      ["home", "tasks", "p1", "r-2", "a_b", String(repeating: "x", count: 64)].randomElement(using: &random)!)
  }

  static func time(_ random: inout SplitMix64) -> TestJSON {
    .number(
      "\([0, 17, UInt64.random(in: 0...UInt64.max, using: &random), UInt64.max, 9_007_199_254_740_993].randomElement(using: &random)!)"
    )
  }

  static func ids(_ random: inout SplitMix64) -> TestJSON {
    .array((0..<Int.random(in: 0...4, using: &random)).map { _ in id(&random) })
  }

  static func times(_ random: inout SplitMix64) -> TestJSON {
    .object(
      (0..<Int.random(in: 0...5, using: &random)).map { _ in TestJSON.Member(idText(&random), time(&random)) }
    )
  }

  static func idText(_ random: inout SplitMix64) -> String {
    guard case .string(let text) = id(&random) else { return "home" }
    return text
  }

  static func text(_ random: inout SplitMix64) -> TestJSON {
    .string(JSONMutator.randomString(using: &random))
  }

  static func propertyValue(_ random: inout SplitMix64) -> TestJSON {
    switch Int.random(in: 0..<4, using: &random) {
    case 0: text(&random)
    case 1: .number(["1", "-2.5", "1e3", "0.1", "-0"].randomElement(using: &random)!)
    case 2: .bool(Bool.random(using: &random))
    default: .array([text(&random), text(&random)])
    }
  }

  static func block(_ random: inout SplitMix64) -> TestJSON {
    .object([
      .init("id", id(&random)), .init("type", .string("text")), .init("text", text(&random)),
      .init("attributes", .object([.init("color", .string("red"))])),
      .init("position", .number(["1", "2.5", "1e-3"].randomElement(using: &random)!)),
      .init("deleted", .bool(Bool.random(using: &random))),
    ])
  }

  static func page(_ random: inout SplitMix64) -> TestJSON {
    var members: [TestJSON.Member] = [
      .init("id", id(&random)), .init("workspace", .string("w1")),
      .init("kind", .string(Bool.random(using: &random) ? "page" : "database")),
      .init("title", text(&random)), .init("deleted", .bool(Bool.random(using: &random))),
      .init(
        "properties", .object([.init("status", propertyValue(&random)), .init("n", propertyValue(&random))])),
      .init("blocks", .array((0..<Int.random(in: 0...3, using: &random)).map { _ in block(&random) })),
      .init("lastUpdatedTime", time(&random)),
    ]
    if Bool.random(using: &random) { members.append(.init("parent", id(&random))) }
    if Bool.random(using: &random) { members.append(.init("databases", ids(&random))) }
    if Bool.random(using: &random) {
      members.append(.init("rows", ids(&random)))
      members.append(
        .init(
          "view",
          .object([
            .init(
              "filter",
              .object([.init("property", .string("status")), .init("value", propertyValue(&random))])),
            .init("sort", .object([.init("property", .string("n")), .init("descending", .bool(true))])),
          ])))
    }
    return .object(members)
  }

  static func delta(_ random: inout SplitMix64) -> TestJSON {
    .object([
      .init("id", id(&random)), .init("since", time(&random)), .init("lastUpdatedTime", time(&random)),
      .init("full", .bool(Bool.random(using: &random))), .init("page", page(&random)),
      .init("properties", .object([.init("status", propertyValue(&random)), .init("gone", .null)])),
      .init("blocks", .array((0..<Int.random(in: 0...2, using: &random)).map { _ in block(&random) })),
    ])
  }

  static func catchUp(_ random: inout SplitMix64) -> TestJSON {
    .object([
      .init("epoch", .string("4259ddef1173f7d80357e156a0377014")),
      .init("epochChanged", .bool(Bool.random(using: &random))), .init("sequence", time(&random)),
      .init("changed", times(&random)), .init("gone", ids(&random)),
    ])
  }

  static func fetch(_ random: inout SplitMix64) -> TestJSON {
    var members: [TestJSON.Member] = [
      .init("epoch", .string("e")),
      .init("deltas", .array((0..<Int.random(in: 0...3, using: &random)).map { _ in delta(&random) })),
      .init("gone", ids(&random)),
    ]
    if Bool.random(using: &random) { members.append(.init("nextCursor", id(&random))) }
    return .object(members)
  }

  static func batchOutcome(_ random: inout SplitMix64) -> TestJSON {
    let result: (inout SplitMix64) -> TestJSON = { random in
      var members: [TestJSON.Member] = [
        .init("mutationId", time(&random)), .init("page", id(&random)),
        .init("status", .string(["applied", "duplicate", "rejected"].randomElement(using: &random)!)),
      ]
      if Bool.random(using: &random) {
        members.append(
          .init("reason", .object([.init("code", .number("3")), .init("name", .string("invalid_value"))])))
      }
      return .object(members)
    }
    var members: [TestJSON.Member] = [
      .init("results", .array((0..<Int.random(in: 0...3, using: &random)).map { _ in result(&random) })),
      .init("pages", times(&random)), .init("lastMutationId", time(&random)), .init("epoch", .string("e")),
    ]
    if Bool.random(using: &random) { members.append(.init("sequence", time(&random))) }
    return .object(members)
  }

  static func count(_ random: inout SplitMix64) -> TestJSON {
    .number("\([0, 1, 5_000, Int.random(in: 0...Int.max, using: &random)].randomElement(using: &random)!)")
  }

  /// A frame of the device stream, valid for its `op` (an unknown `op` too), with a stray member at times.
  static func streamMessage(_ random: inout SplitMix64) -> TestJSON {
    let op = ["changed", "subscribed", "unsubscribed", "revoked", "error", "hello"].randomElement(
      using: &random)!
    var members: [TestJSON.Member] = [.init("op", .string(op))]
    switch op {
    case "changed": members.append(.init("pages", times(&random)))
    case "subscribed":
      members += [
        .init("added", count(&random)), .init("total", count(&random)), .init("denied", ids(&random)),
      ]
    case "unsubscribed": members += [.init("removed", count(&random)), .init("total", count(&random))]
    case "revoked": members += [.init("revokedPages", ids(&random)), .init("total", count(&random))]
    case "error": members += [.init("code", .number("4400")), .init("message", text(&random))]
    default: members.append(.init("pages", ids(&random)))
    }
    if Bool.random(using: &random) { members.append(.init("from", text(&random))) }
    members.shuffle(using: &random)
    return .object(members)
  }

  static func errorBody(_ random: inout SplitMix64) -> TestJSON {
    .object([.init("error", .number("400")), .init("message", text(&random))])
  }
}

/// What the daemon reads from the broker (HTTP answers and stream frames) with the strict decoder: the same
/// values as `JSONDecoder` on every answer, and an error, not a trap, on the number that made `JSONDecoder` trap.
@Suite struct BrokerAnswerDecodingTests {
  static let trapNumber = "9007199254740993" + String(repeating: "9", count: 300) + "e-300"

  /// Random answers, respaced and re-escaped, then damaged: the strict decoder and `JSONDecoder` agree.
  func checkAgreement<T: Codable>(_ type: T.Type, seed: UInt64, _ make: (inout SplitMix64) -> TestJSON) {
    var random = SplitMix64(seed: seed)
    var whole = DecodingAgreement.Tally()
    var damaged = DecodingAgreement.Tally()
    let rounds = 150
    for _ in 0..<rounds {
      let tree = make(&random)
      #expect(DecodingAgreement.checkDecoder(T.self, tree.compactText) == .bothAccepted)
      DecodingAgreement.rewriteAndDamage(tree, using: &random, whole: &whole, damaged: &damaged) {
        DecodingAgreement.checkDecoder(T.self, $0)
      }
    }
    #expect(
      whole.disagreements.isEmpty && damaged.disagreements.isEmpty,
      "\(whole.disagreements.prefix(3)) \(damaged.disagreements.prefix(3))")
    #expect(whole.accepted == rounds, "\(whole)")
    #expect(damaged.accepted > 0 && damaged.refused > 0 && damaged.notStrict > 0, "\(damaged)")
  }

  @Test func readsCatchUpAnswersAsJSONDecoderDoes() {
    checkAgreement(BrokerProtocol.CatchUpResponse.self, seed: 0x5EED_0000_0000_0B01, RandomAnswer.catchUp)
  }

  @Test func readsFetchAnswersAsJSONDecoderDoes() {
    checkAgreement(BrokerProtocol.FetchResponse.self, seed: 0x5EED_0000_0000_0B02, RandomAnswer.fetch)
  }

  @Test func readsBatchOutcomesAsJSONDecoderDoes() {
    checkAgreement(BatchOutcome.self, seed: 0x5EED_0000_0000_0B03, RandomAnswer.batchOutcome)
  }

  @Test func readsPageSnapshotsAsJSONDecoderDoes() {
    checkAgreement(PageSnapshot.self, seed: 0x5EED_0000_0000_0B04, RandomAnswer.page)
  }

  @Test func readsStreamFramesAsJSONDecoderDoes() {
    checkAgreement(
      BrokerProtocol.ServerMessage.self, seed: 0x5EED_0000_0000_0B05, RandomAnswer.streamMessage)
  }

  /// Each frame is read as its `op`'s message, the one the broker writes; an unknown `op` is kept as such, and a
  /// frame that does not fit its `op` is refused, not half read.
  @Test func readsEachFrameAsItsOpsMessage() throws {
    func read(_ text: String) throws -> BrokerProtocol.ServerMessage {
      try BrokerProtocol.ServerMessage(strictJSON: text)
    }
    guard case .changed(let changed) = try read(#"{"op":"changed","pages":{"home":18,"tasks":19}}"#) else {
      Issue.record("changed")
      return
    }
    #expect(changed.pages == ["home": 18, "tasks": 19])
    guard
      case .subscribed(let subscribed) = try read(#"{"total":2,"op":"subscribed","added":2,"denied":["x"]}"#)
    else {
      Issue.record("subscribed")
      return
    }
    #expect(subscribed.added == 2 && subscribed.total == 2 && subscribed.denied == ["x"])
    guard case .revoked(let revoked) = try read(#"{"op":"revoked","revokedPages":["plans"],"total":9}"#)
    else {
      Issue.record("revoked")
      return
    }
    #expect(revoked.revokedPages == ["plans"] && revoked.total == 9)
    guard case .error(let error) = try read(#"{"op":"error","code":4400,"message":"invalid message"}"#) else {
      Issue.record("error")
      return
    }
    #expect(error.code == 4400 && error.message == "invalid message")
    guard case .unsubscribed(let unsubscribed) = try read(#"{"op":"unsubscribed","removed":1,"total":1}"#)
    else {
      Issue.record("unsubscribed")
      return
    }
    #expect(unsubscribed.removed == 1)
    #expect(try read(#"{"op":"welcome","pages":[]}"#).op == "welcome")
    // What the broker writes reads back as the same frame.
    let written = DecodingAgreement.encoded(BrokerProtocol.Changed(pages: ["p": 3]))
    #expect(try read(String(decoding: written, as: UTF8.self)).op == "changed")
    for bad in [
      #"{"op":"changed"}"#, #"{"op":"changed","pages":{"home":-1}}"#, #"{"op":"subscribed","added":1}"#,
      #"{"pages":{"home":1}}"#, #"{"op":7}"#, #"["changed"]"#, #"{"op":"changed","pages":{"home":1},}"#,
    ] {
      #expect(throws: DecodingError.self, "\(bad)") { try read(bad) }
    }
  }

  @Test func readsErrorBodiesAsJSONDecoderDoes() {
    checkAgreement(ErrorBody.self, seed: 0x5EED_0000_0000_0B06, RandomAnswer.errorBody)
  }

  /// `tree` with the integer at `path` (object keys, array indices as text) written as the trap number.
  static func withTrapNumber(_ tree: TestJSON, at path: [String]) -> [UInt8] {
    withNumber(trapNumber, tree, at: path)
  }

  /// `tree` with the integer at `path` (object keys, array indices as text) written as `number`.
  static func withNumber(_ number: String, _ tree: TestJSON, at path: [String]) -> [UInt8] {
    func replace(_ node: TestJSON, _ path: ArraySlice<String>) -> TestJSON {
      guard let first = path.first else { return .number(number) }
      switch node {
      case .object(let members):
        return .object(
          members.map { $0.key == first ? TestJSON.Member($0.key, replace($0.value, path.dropFirst())) : $0 })
      case .array(let elements):
        return .array(
          elements.enumerated().map {
            "\($0.offset)" == first ? replace($0.element, path.dropFirst()) : $0.element
          })
      default: return node
      }
    }
    return replace(tree, path[...]).compactText
  }

  /// Each integer field of each answer, written as the number that made `JSONDecoder` trap: the strict
  /// decoder refuses it (`inexactInteger`, with the field's path), and the daemon's reading of an answer says
  /// `invalidAnswer`. (`JSONDecoder` is not called on it: it would stop the test run.)
  @Test func refusesTheIntegerThatMadeJSONDecoderTrapInEveryAnswer() throws {
    var random = SplitMix64(seed: 0x5EED_0000_0000_0B07)
    let home = TestJSON.object([.init("home", .number("1"))])
    var catchUp = RandomAnswer.catchUp(&random)
    var fetch = RandomAnswer.fetch(&random)
    var batch = RandomAnswer.batchOutcome(&random)
    var stream = RandomAnswer.streamMessage(&random)
    // Make sure the maps and lists the paths go through have an element.
    func set(_ tree: inout TestJSON, _ key: String, _ value: TestJSON) {
      guard case .object(var members) = tree else { return }
      members.removeAll { $0.key == key }
      members.append(.init(key, value))
      tree = .object(members)
    }
    set(&catchUp, "changed", home)
    set(&fetch, "deltas", .array([RandomAnswer.delta(&random)]))
    set(&batch, "pages", home)
    set(
      &batch, "results",
      .array([
        .object([
          .init("mutationId", .number("1")), .init("page", .string("p")), .init("status", .string("applied")),
        ])
      ]))
    set(&stream, "pages", home)

    func expectRefused<T: Decodable>(_ type: T.Type, _ tree: TestJSON, _ path: [String]) {
      let body = Self.withTrapNumber(tree, at: path)
      do {
        _ = try StrictJSONDecoder().decode(T.self, from: body)
        Issue.record("\(T.self) at \(path): decoded")
      } catch {
        #expect(
          StrictJSONDecoder.readError(of: error)?.kind == .inexactInteger, "\(T.self) at \(path): \(error)")
        if case .dataCorrupted(let context) = error as? DecodingError {
          #expect(context.codingPath.map { $0.intValue.map(String.init) ?? $0.stringValue } == path)
        } else {
          Issue.record("\(T.self) at \(path): \(error)")
        }
      }
      let answer = HTTPBrokerLink.decodeAnswer(status: 200, body: body, as: T.self)
      guard case .failure(.invalidAnswer(let reason)) = answer else {
        Issue.record("\(T.self) at \(path): \(answer)")
        return
      }
      #expect(
        reason.contains("an integer written with a fraction or an exponent must be exactly"), "\(reason)")
    }
    expectRefused(BrokerProtocol.CatchUpResponse.self, catchUp, ["sequence"])
    expectRefused(BrokerProtocol.CatchUpResponse.self, catchUp, ["changed", "home"])
    expectRefused(BrokerProtocol.FetchResponse.self, fetch, ["deltas", "0", "since"])
    expectRefused(BrokerProtocol.FetchResponse.self, fetch, ["deltas", "0", "lastUpdatedTime"])
    expectRefused(BrokerProtocol.FetchResponse.self, fetch, ["deltas", "0", "page", "lastUpdatedTime"])
    expectRefused(BatchOutcome.self, batch, ["lastMutationId"])
    expectRefused(BatchOutcome.self, batch, ["pages", "home"])
    expectRefused(BatchOutcome.self, batch, ["results", "0", "mutationId"])
    expectRefused(PageSnapshot.self, RandomAnswer.page(&random), ["lastUpdatedTime"])
    set(&stream, "op", .string("changed"))
    expectRefused(BrokerProtocol.ServerMessage.self, stream, ["pages", "home"])
    let error = TestJSON.object([
      .init("op", .string("error")), .init("code", .number("4400")), .init("message", .string("m")),
    ])
    expectRefused(BrokerProtocol.ServerMessage.self, error, ["code"])
    let subscribed = TestJSON.object([
      .init("op", .string("subscribed")), .init("added", .number("1")), .init("total", .number("1")),
      .init("denied", .array([])),
    ])
    expectRefused(BrokerProtocol.ServerMessage.self, subscribed, ["total"])

    // An error answer: its message is read, a number in a member nobody reads is only checked as JSON.
    let errorBody =
      Array(#"{"error":"#.utf8) + Array(Self.trapNumber.utf8) + Array(#","message":"slow down"}"#.utf8)
    #expect(
      HTTPBrokerLink.decodeAnswer(status: 429, body: errorBody, as: BatchOutcome.self)
        == .failure(.status(429, "slow down")))
    // And a body that is not JSON at all is shown as the text it is.
    #expect(
      HTTPBrokerLink.decodeAnswer(status: 502, body: Array("bad gateway".utf8), as: BatchOutcome.self)
        == .failure(.status(502, "bad gateway")))
  }

  /// Each integer field that the daemon stores or acts on, written as 2^63 or 2^64-1: values the strict reader
  /// reads into a `UInt64` but that no broker keeps (SQLite integers are signed), and that trapped the daemon
  /// where it stored them (`Int64(result.mutationId)`, `Int64(delta.lastUpdatedTime)`). Each answer is not
  /// understood, naming the field; 2^63-1 is understood; a stream frame with one is unreadable.
  @Test func refusesIntegersAbove2To63InEveryAnswer() throws {
    var random = SplitMix64(seed: 0x5EED_0000_0000_0B08)
    let home = TestJSON.object([.init("home", .number("1"))])
    func set(_ tree: inout TestJSON, _ key: String, _ value: TestJSON) {
      guard case .object(var members) = tree else { return }
      members.removeAll { $0.key == key }
      members.append(.init(key, value))
      tree = .object(members)
    }
    // Every other integer small, so that the one written large is the only one out of range.
    func small(_ tree: TestJSON) -> TestJSON {
      switch tree {
      case .number(let text) where UInt64(text) != nil: .number("1")
      case .object(let members): .object(members.map { .init($0.key, small($0.value)) })
      case .array(let elements): .array(elements.map(small))
      default: tree
      }
    }
    var catchUp = RandomAnswer.catchUp(&random)
    set(&catchUp, "changed", home)
    var fetch = RandomAnswer.fetch(&random)
    set(&fetch, "deltas", .array([RandomAnswer.delta(&random)]))
    var batch = RandomAnswer.batchOutcome(&random)
    set(&batch, "pages", home)
    set(&batch, "sequence", .number("1"))
    set(
      &batch, "results",
      .array([
        .object([
          .init("mutationId", .number("1")), .init("page", .string("p")), .init("status", .string("applied")),
        ])
      ]))
    let page = small(RandomAnswer.page(&random))
    (catchUp, fetch, batch) = (small(catchUp), small(fetch), small(batch))

    func expect<T: Decodable>(_ type: T.Type, _ tree: TestJSON, _ path: [String]) {
      let field = path.joined(separator: ".")
      for number in ["9223372036854775808", "18446744073709551615"] {
        let answer = HTTPBrokerLink.decodeAnswer(
          status: 200, body: Self.withNumber(number, tree, at: path), as: T.self)
        guard case .failure(.invalidAnswer(let reason)) = answer else {
          Issue.record("\(T.self) with \(field) = \(number): \(answer)")
          continue
        }
        let named = field.replacing(".0.", with: "[0].")
        #expect(reason.contains(named) && reason.contains(number) && reason.contains("2^63-1"), "\(reason)")
      }
      let largest = HTTPBrokerLink.decodeAnswer(
        status: 200, body: Self.withNumber("9223372036854775807", tree, at: path), as: T.self)
      if case .failure(let error) = largest { Issue.record("\(T.self) with \(field) = 2^63-1: \(error)") }
    }
    expect(BrokerProtocol.CatchUpResponse.self, catchUp, ["sequence"])
    expect(BrokerProtocol.CatchUpResponse.self, catchUp, ["changed", "home"])
    expect(BrokerProtocol.FetchResponse.self, fetch, ["deltas", "0", "since"])
    expect(BrokerProtocol.FetchResponse.self, fetch, ["deltas", "0", "lastUpdatedTime"])
    expect(BrokerProtocol.FetchResponse.self, fetch, ["deltas", "0", "page", "lastUpdatedTime"])
    expect(BatchOutcome.self, batch, ["lastMutationId"])
    expect(BatchOutcome.self, batch, ["sequence"])
    expect(BatchOutcome.self, batch, ["pages", "home"])
    expect(BatchOutcome.self, batch, ["results", "0", "mutationId"])
    expect(PageSnapshot.self, page, ["lastUpdatedTime"])

    for time in ["9223372036854775808", "18446744073709551615"] {
      let frame = BrokerStreamFrame(text: #"{"op":"changed","pages":{"home":"# + time + "}}")
      guard case .unreadable = frame else {
        Issue.record("a changed frame with time \(time): \(frame)")
        continue
      }
    }
    guard
      case .message(.changed) = BrokerStreamFrame(
        text: #"{"op":"changed","pages":{"home":9223372036854775807}}"#)
    else {
      Issue.record("a changed frame with time 2^63-1 is unreadable")
      return
    }
  }
}
