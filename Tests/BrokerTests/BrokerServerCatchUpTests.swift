import Testing
import Web

@testable import Broker

/// `POST /v1/catchup` driven in-process: the answer the channel index gives for pages somebody follows is the
/// answer the store gives for them.
@Suite struct BrokerServerCatchUpTests {
  @Test func aCatchUpFromTheIndexAnswersWhatTheStoreAnswers() throws {
    try withBroker { harness in
      let created = try harness.commit(
        client: "laptop", [.create("p1", title: "1"), .create("p2", title: "2"), .create("p3", title: "3")])
      let edited = try harness.commit(client: "laptop", [.setTitle("p1", "one")])
      let epoch = harness.broker.epoch
      // Every page followed (p3 by nobody, so it is left out), from each side of the device's times, in this
      // epoch, another or none, and for a token of another workspace.
      let requests: [(body: String, token: String)] = [
        (#"{"pages":{"p1":0,"p2":0}}"#, BrokerHarness.alice),
        (#"{"epoch":"\#(epoch)","pages":{"p1":\#(created),"p2":\#(created)}}"#, BrokerHarness.alice),
        (#"{"epoch":"\#(epoch)","pages":{"p1":\#(edited),"p2":\#(created)}}"#, BrokerHarness.alice),
        (#"{"epoch":"another","pages":{"p1":\#(edited),"p2":\#(created)}}"#, BrokerHarness.alice),
        (#"{"pages":{"p2":0,"p1":0}}"#, BrokerHarness.bob),
      ]
      let alice = try harness.openStream()
      #expect(try harness.subscribe(alice, ["p1", "p2"]).added == 2)
      let fromIndexBefore = harness.broker.catchUpsFromIndex
      let fromIndex = try requests.map {
        try harness.request(.POST, "/v1/catchup", token: $0.token, body: $0.body)
      }
      #expect(
        harness.broker.catchUpsFromIndex == fromIndexBefore + requests.count, "each answered from the index")
      // Nobody follows them any more: the same requests read the store.
      #expect(try harness.unsubscribe(alice, ["p1", "p2"]).total == 0)
      let fromStore = try requests.map {
        try harness.request(.POST, "/v1/catchup", token: $0.token, body: $0.body)
      }
      #expect(harness.broker.catchUpsFromIndex == fromIndexBefore + requests.count, "none from the index")
      for (position, (index, store)) in zip(fromIndex, fromStore).enumerated() {
        #expect(index.status == .ok && store.status == .ok)
        #expect(
          index.body.readableString == store.body.readableString,
          "request \(position): \(index.body.readableString) from the index, \(store.body.readableString) from the store"
        )
      }
      // And they say what they should (so that two equally wrong answers do not pass).
      let first = fromIndex[0].body.readableString
      #expect(first.contains(#""changed":{"p1":\#(edited),"p2":\#(created)}"#), "\(first)")
      #expect(fromIndex[2].body.readableString.contains(#""changed":{}"#))
      #expect(fromIndex[3].body.readableString.contains(#""epochChanged":true"#))
      #expect(fromIndex[4].body.readableString.contains(#""gone":["p1","p2"]"#))
    }
  }
}
