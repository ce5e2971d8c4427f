import Testing

@testable import LoadCore

@Suite struct DeliveryLedgerTests {
  @Test func aCoalescedFrameCompletesASubscriberThatSawTheNewestToken() {
    var ledger = DeliveryLedger(mode: .coalescing, subscribers: 2)
    ledger.acknowledged(token: 10, scheduledAt: 1_000)
    ledger.acknowledged(token: 11, scheduledAt: 2_000)
    ledger.received(subscriber: 0, token: 11, at: 3_000)
    #expect(ledger.completeSubscribers == 1)
    #expect(!ledger.isSettled)
    #expect(ledger.incompleteSubscribers == [1])
    ledger.received(subscriber: 1, token: 10, at: 3_000)
    ledger.received(subscriber: 1, token: 11, at: 4_000)
    #expect(ledger.isSettled)
    #expect(ledger.frames == 3)
  }

  @Test func latencyIsFromTheScheduledSendOfTheNewestBatchInTheFrame() {
    var ledger = DeliveryLedger(mode: .coalescing, subscribers: 1)
    ledger.acknowledged(token: 7, scheduledAt: 1_000_000)
    ledger.received(subscriber: 0, token: 7, at: 6_000_000)
    #expect(abs(ledger.latency.summary.max - 5) < 0.01)
  }

  @Test func aFrameBeforeItsBatchsAnswerIsParkedThenTimed() {
    var ledger = DeliveryLedger(mode: .coalescing, subscribers: 1)
    ledger.received(subscriber: 0, token: 3, at: 4_000_000)
    #expect(ledger.unmatchedFrames == 1)
    #expect(ledger.latency.count == 0)
    ledger.acknowledged(token: 3, scheduledAt: 1_000_000)
    #expect(ledger.unmatchedFrames == 0)
    #expect(abs(ledger.latency.summary.max - 3) < 0.01)
    #expect(ledger.isSettled)
  }

  @Test func aRepeatedOrOlderTokenIsARegression() {
    var ledger = DeliveryLedger(mode: .coalescing, subscribers: 1)
    ledger.acknowledged(token: 5, scheduledAt: 0)
    ledger.acknowledged(token: 6, scheduledAt: 0)
    ledger.received(subscriber: 0, token: 6, at: 1)
    ledger.received(subscriber: 0, token: 5, at: 2)
    #expect(ledger.regressions == 1)
    #expect(ledger.isSettled)
  }

  @Test func everyMessageModeNeedsOneMessagePerBatch() {
    var ledger = DeliveryLedger(mode: .everyMessage, subscribers: 1)
    ledger.acknowledged(token: 1, scheduledAt: 0)
    ledger.acknowledged(token: 2, scheduledAt: 0)
    ledger.received(subscriber: 0, token: 2, at: 1)
    // The newest was seen but message 1 was lost: not complete.
    #expect(!ledger.isSettled)
    ledger.received(subscriber: 0, token: 1, at: 1)
    #expect(ledger.regressions == 1)
    #expect(ledger.isSettled)
  }

  @Test func nothingAcknowledgedIsNeverSettled() {
    let ledger = DeliveryLedger(mode: .coalescing, subscribers: 0)
    #expect(!ledger.isSettled)
  }
}

@Suite struct ChangedFrameTests {
  @Test func readsEveryPageTimeOfTheBrokersEncoding() {
    let text = #"{"op":"changed","pages":{"home":18,"tasks":19}}"#
    let pages = ChangedFrame.parse(text)
    #expect(pages?.map { String($0.id) } == ["home", "tasks"])
    #expect(pages?.map(\.time) == [18, 19])
    #expect(ChangedFrame.time(of: "tasks", in: text) == 19)
    #expect(ChangedFrame.time(of: "other", in: text) == nil)
  }

  @Test func encodeAndParseAgree() {
    let text = ChangedFrame.encode(pages: [(id: "load-b1", time: 123_456)])
    #expect(text == #"{"op":"changed","pages":{"load-b1":123456}}"#)
    #expect(ChangedFrame.time(of: "load-b1", in: text) == 123_456)
  }

  @Test func anythingElseIsNotANotification() {
    for text in [
      #"{"op":"subscribed","added":1,"total":1,"denied":[]}"#, #"{"op":"changed","pages":{"a":}}"#,
      #"{"op":"changed","pages":{"a":1"#, #"{"op":"changed","pages":{"a\"b":1}}"#,
      #"{"op":"changed","pages":{"a":99999999999999999999999}}"#, "",
    ] {
      #expect(ChangedFrame.parse(text) == nil, "\(text)")
    }
    #expect(ChangedFrame.parse(#"{"op":"changed","pages":{}}"#)?.isEmpty == true)
  }
}

@Suite struct DeliveryLedgerChannelTests {
  @Test func eachSubscriberIsCompleteAgainstItsOwnChannel() {
    // Subscriber i watches channel i % 2: B2's spread, a page each.
    var ledger = DeliveryLedger(mode: .coalescing, subscribers: 4, channels: 2)
    ledger.acknowledged(token: 5, scheduledAt: 0, channel: 0)
    ledger.acknowledged(token: 6, scheduledAt: 0, channel: 1)
    ledger.acknowledged(token: 7, scheduledAt: 0, channel: 0)
    #expect(ledger.finalToken(of: 0) == 7)
    #expect(ledger.finalToken(of: 1) == 6)
    ledger.received(subscriber: 0, token: 7, at: 1)
    ledger.received(subscriber: 1, token: 6, at: 1)
    ledger.received(subscriber: 2, token: 5, at: 1)
    ledger.received(subscriber: 3, token: 6, at: 1)
    #expect(ledger.incompleteSubscribers == [2])
    ledger.received(subscriber: 2, token: 7, at: 2)
    #expect(ledger.isSettled)
    #expect(ledger.lastSeen(by: 2) == 7)
  }

  @Test func everyMessageCountsTheMessagesOfTheSubscribersChannel() {
    var ledger = DeliveryLedger(mode: .everyMessage, subscribers: 2, channels: 2)
    ledger.acknowledged(token: 1, scheduledAt: 0, channel: 0)
    ledger.acknowledged(token: 2, scheduledAt: 0, channel: 1)
    ledger.acknowledged(token: 3, scheduledAt: 0, channel: 0)
    ledger.received(subscriber: 0, token: 3, at: 1)
    ledger.received(subscriber: 1, token: 2, at: 1)
    #expect(ledger.incompleteSubscribers == [0], "channel 0 had two messages")
    ledger.received(subscriber: 0, token: 1, at: 1)
    #expect(ledger.isSettled, "both of channel 0's messages arrived, the older one late")
    #expect(ledger.regressions == 1)
  }

  @Test func aChannelNobodyWroteLeavesItsSubscribersComplete() {
    var ledger = DeliveryLedger(mode: .coalescing, subscribers: 2, channels: 2)
    ledger.acknowledged(token: 9, scheduledAt: 0, channel: 0)
    ledger.received(subscriber: 0, token: 9, at: 1)
    #expect(ledger.isSettled)
  }
}
