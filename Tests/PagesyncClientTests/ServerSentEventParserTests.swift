import EventLoopTestKit
import Testing

@testable import PagesyncClient

/// The Server-Sent Events parser against the HTML standard's rules and examples
/// (https://html.spec.whatwg.org/multipage/server-sent-events.html, "Interpreting an event stream" and the
/// examples of "Event stream format"), and the same result however the bytes are split.
@Suite struct ServerSentEventParserTests {
  /// What a run produced: the events, and the parser's last event ID and reconnection time at the end.
  struct Run: Equatable, CustomStringConvertible {
    var events: [ServerSentEvent] = []
    var lastEventID = ""
    var reconnectionTime: UInt64?
    var error: ServerSentEventParser.ParseError?

    var description: String {
      "\(events.map { "[\($0.type) \($0.data.debugDescription) last=\($0.lastEventID) id=\($0.id ?? "-")]" })"
        + " last=\(lastEventID) retry=\(reconnectionTime.map(String.init) ?? "-")"
        + (error.map { " error=\($0)" } ?? "")
    }
  }

  static func run(_ pieces: [[UInt8]], maxEventBytes: Int = 1 << 20, lastEventID: String = "") -> Run {
    var parser = ServerSentEventParser(lastEventID: lastEventID, maxEventBytes: maxEventBytes)
    var run = Run()
    for piece in pieces {
      let failure = piece.withUnsafeBytes { raw -> ServerSentEventParser.ParseError? in
        do throws(ServerSentEventParser.ParseError) {
          try parser.parse(raw, into: &run.events)
          return nil
        } catch {
          return error
        }
      }
      if let failure {
        run.error = failure
        break
      }
    }
    run.lastEventID = parser.lastEventID
    run.reconnectionTime = parser.reconnectionTime
    return run
  }

  static func run(_ text: String) -> Run { run([Array(text.utf8)]) }

  static func event(_ data: String, type: String = "message", last: String = "", id: String? = nil)
    -> ServerSentEvent
  {
    ServerSentEvent(type: type, data: data, lastEventID: last, id: id)
  }

  // MARK: The standard's examples

  @Test func dataLinesAreJoinedWithLineFeeds() {
    // "data: YHOO / data: +2 / data: 10": one event, the three values on three lines.
    #expect(Self.run("data: YHOO\ndata: +2\ndata: 10\n\n").events == [Self.event("YHOO\n+2\n10")])
  }

  @Test func theFourEventsExample() {
    let stream = ": test stream\n\ndata: first event\nid: 1\n\ndata:second event\nid\n\ndata:  third event\n"
    let run = Self.run(stream)
    // The comment dispatches nothing; `id` with no value resets the last event ID; one space only is dropped;
    // the last event has no blank line after it, so it is never dispatched.
    #expect(
      run.events == [
        Self.event("first event", last: "1", id: "1"), Self.event("second event", last: "", id: ""),
      ])
    #expect(Self.run(stream + "\n").events.last == Self.event(" third event"))
  }

  @Test func emptyDataAndAnUnfinishedEvent() {
    // "data / (blank) / data / data / (blank) / data:": an empty event, a "\n" event, and nothing for the last.
    let run = Self.run("data\n\ndata\ndata\n\ndata:")
    #expect(run.events == [Self.event(""), Self.event("\n")])
  }

  @Test func aSpaceAfterTheColonIsOptional() {
    #expect(Self.run("data:test\n\ndata: test\n\n").events == [Self.event("test"), Self.event("test")])
  }

  // MARK: Lines

  @Test(arguments: ["\n", "\r", "\r\n"])
  func everyLineEndWorks(end: String) {
    let stream = ["id: 4", "event: page", "data: a", "data: b", ""].joined(separator: end) + end
    #expect(Self.run(stream).events == [Self.event("a\nb", type: "page", last: "4", id: "4")])
  }

  @Test func mixedLineEndsAndCRThenCRIsABlankLine() {
    let run = Self.run("data: a\r\ndata: b\rdata: c\n\r\rdata: d\r\n\r\n")
    #expect(run.events == [Self.event("a\nb\nc"), Self.event("d")])
  }

  @Test func aCRAtTheEndOfAPieceAndAnLFAtTheStartOfTheNextAreOneLineEnd() {
    let pieces = [Array("data: a\r".utf8), Array("\ndata: b\r".utf8), Array("\n\r".utf8), Array("\n".utf8)]
    // Had the LF counted as a line of its own, "a" would be dispatched alone.
    #expect(Self.run(pieces).events == [Self.event("a\nb")])
  }

  @Test func commentsAndUnknownFieldsAreIgnored() {
    let run = Self.run(":comment\n: keep-alive\nfoo: bar\nDATA: shout\nevent\ndata: x\n:\n\n")
    #expect(run.events == [Self.event("x")])
  }

  @Test func aFieldWithoutAColonHasAnEmptyValueAndAValueMayHoldColons() {
    #expect(Self.run("data\n\n").events == [Self.event("")])
    #expect(Self.run("data: a: b:c\n\n").events == [Self.event("a: b:c")])
    // Only one space goes; tabs stay.
    #expect(Self.run("data:\t x\ndata:   y\n\n").events == [Self.event("\t x\n  y")])
  }

  @Test func theTypeIsPerEventAndDefaultsToMessage() {
    let run = Self.run(
      "event: page\ndata: 1\n\ndata: 2\n\nevent: a\nevent: b\ndata: 3\n\nevent: lost\n\ndata: 4\n\n")
    #expect(run.events.map(\.type) == ["page", "message", "b", "message"])
  }

  // MARK: Byte order mark and UTF-8

  @Test func oneLeadingByteOrderMarkIsDropped() {
    #expect(Self.run("\u{FEFF}data: x\n\n").events == [Self.event("x")])
    // A second one is part of the first field's name, which is then no field.
    #expect(Self.run("\u{FEFF}\u{FEFF}data: x\n\ndata: y\n\n").events == [Self.event("y")])
    // Later in the stream it is text.
    #expect(Self.run("data: \u{FEFF}x\n\n").events == [Self.event("\u{FEFF}x")])
  }

  @Test func bytesThatOnlyBeginLikeAByteOrderMarkAreKept() {
    // EF then "data": had EF been dropped, this would be a data line.
    #expect(Self.run([[0xEF], Array("data: x\n\ndata: y\n\n".utf8)]).events == [Self.event("y")])
    #expect(Self.run([[0xEF, 0xBB], Array("data: x\n\ndata: y\n\n".utf8)]).events == [Self.event("y")])
  }

  @Test func invalidUTF8ReadsAsReplacementCharacters() {
    let bytes: [UInt8] = Array("data: a".utf8) + [0xFF, 0xC3] + Array("\ndata: é\n\n".utf8)
    #expect(Self.run([bytes]).events == [Self.event("a\u{FFFD}\u{FFFD}\né")])
  }

  // MARK: id and retry

  @Test func theLastEventIDPersistsAndAnEventsOwnIDIsKnown() {
    let run = Self.run("id: 7\ndata: a\n\ndata: b\n\nid: 8\n\ndata: c\n\nid\ndata: d\n\n")
    #expect(
      run.events == [
        Self.event("a", last: "7", id: "7"), Self.event("b", last: "7"),
        // An id in an event without data is not an event, but it is the last event ID from then on.
        Self.event("c", last: "8"), Self.event("d", last: "", id: ""),
      ])
    #expect(run.lastEventID == "")
  }

  @Test func anIDHoldingNULIsIgnored() {
    let run = Self.run("id: 1\ndata: a\n\nid: 2\u{0}3\ndata: b\n\n")
    #expect(run.events == [Self.event("a", last: "1", id: "1"), Self.event("b", last: "1")])
  }

  @Test func theLastEventIDChangesOnlyAtADispatch() {
    // The standard sets the last event ID from its buffer when an event is dispatched, not when the id line
    // is read: a stream that ends mid-event resumes from the event before.
    let run = Self.run("id: 1\ndata: a\n\nid: 2\ndata: b\n")
    #expect(run.lastEventID == "1")
  }

  @Test func aReconnectingParserStartsFromTheLastEventIDItWasGiven() {
    // As browsers do: an unnumbered event after a reconnect does not forget where to resume.
    let run = Self.run([Array("data: snapshot\n\n".utf8)], lastEventID: "41")
    #expect(run.events == [Self.event("snapshot", last: "41")])
    #expect(run.lastEventID == "41")
  }

  @Test func retryTakesASCIIDigitsOnly() {
    #expect(Self.run("retry: 1000\n\n").reconnectionTime == 1000)
    #expect(
      Self.run("retry: 1000\nretry: 10a\nretry:\nretry: -5\nretry: 1 0\nretry:  7\n").reconnectionTime == 1000
    )
    #expect(Self.run("retry:0\n").reconnectionTime == 0)
    #expect(Self.run("retry: 99999999999999999999999\n").reconnectionTime == UInt64.max)
    // A retry line alone dispatches nothing.
    #expect(Self.run("retry: 5\n\n").events.isEmpty)
  }

  // MARK: Ends and bounds

  @Test func resetDropsAHalfEventAndKeepsTheLastEventID() throws {
    var parser = ServerSentEventParser()
    let before = try parser.parse(Array("id: 3\ndata: a\n\nretry: 20\nid: 4\ndata: half".utf8))
    #expect(before == [Self.event("a", last: "3", id: "3")])
    parser.reset()
    #expect(parser.lastEventID == "3")
    #expect(parser.reconnectionTime == 20)
    // A new stream: its byte order mark is dropped again, and "half" is gone.
    let after = try parser.parse(Array("\u{FEFF}data: b\n\n".utf8))
    #expect(after == [Self.event("b", last: "3")])
  }

  @Test func aLineOrAnEventOverTheLimitThrowsAfterTheEventsBeforeIt() {
    let long = Self.run(
      [Array(("data: ok\n\n" + "data: " + String(repeating: "x", count: 100)).utf8)], maxEventBytes: 64)
    #expect(long.events == [Self.event("ok")])
    #expect(long.error == .eventTooLarge(limit: 64))
    // Many short data lines add up.
    let many = Self.run([Array(String(repeating: "data: 0123456789\n", count: 10).utf8)], maxEventBytes: 64)
    #expect(many.error == .eventTooLarge(limit: 64))
    // Exactly at the limit is fine: a 64-byte line (its data, 58 bytes and a line feed, is under it too).
    let line = String(repeating: "y", count: 58)
    #expect(Self.run([Array(("data: " + line + "\n\n").utf8)], maxEventBytes: 64).error == nil)
    // A comment is a line too: the limit holds however a line is spelt.
    #expect(Self.run([Array((":" + String(repeating: "c", count: 64)).utf8)], maxEventBytes: 64).error != nil)
    // And a parser that threw keeps throwing.
    let again = Self.run([Array("data: 0123456789".utf8), Array("\n\n".utf8)], maxEventBytes: 8)
    #expect(again.error == .eventTooLarge(limit: 8))
    var parser = ServerSentEventParser(maxEventBytes: 8)
    for piece in ["data: 0123456789", "\n\n"] {
      do throws(ServerSentEventParser.ParseError) {
        _ = try parser.parse(Array(piece.utf8))
        Issue.record("\(piece.debugDescription) was parsed after the limit was passed")
      } catch {
        #expect(error == .eventTooLarge(limit: 8))
      }
    }
  }

  // MARK: Splits

  /// Every rule above in one stream: a byte order mark, all three line ends, comments, a multi-line event,
  /// types, ids (one with NUL), retry, multi-byte characters, an unfinished event at the end.
  static let mixed: [UInt8] = Array(
    ("\u{FEFF}retry: 1500\r\n: hello\r\n\r\nevent: page\rid: 1\rdata: é€😀\rdata:  two\r\r"
      + "id: 2\u{0}x\ndata: {\"type\":\"sync\"}\n\ndata: x\r\ndata: y\r\n\r\n:c\r\n\r\nid: 9\n\nevent: x\ndata\n\n"
      + "retry: 77\ndata: tail")
      .utf8)

  @Test func theMixedStreamReadsAsTheRulesSay() {
    let run = Self.run([Self.mixed])
    #expect(
      run.events == [
        Self.event("é€😀\n two", type: "page", last: "1", id: "1"),
        Self.event(#"{"type":"sync"}"#, last: "1"),
        Self.event("x\ny", last: "1"),
        Self.event("", type: "x", last: "9"),
      ])
    #expect(run.lastEventID == "9")
    #expect(run.reconnectionTime == 77)
  }

  @Test func splittingAtEveryByteChangesNothing() {
    let whole = Self.run([Self.mixed])
    for offset in 0...Self.mixed.count {
      let pieces = [Array(Self.mixed[..<offset]), Array(Self.mixed[offset...])]
      #expect(Self.run(pieces) == whole, "split at \(offset)")
    }
    #expect(Self.run(Self.mixed.map { [$0] }) == whole, "byte by byte")
  }

  @Test func everyThreeWaySplitChangesNothing() {
    let whole = Self.run([Self.mixed])
    let bytes = Self.mixed
    for first in 0...bytes.count {
      for second in first...bytes.count {
        let pieces = [Array(bytes[..<first]), Array(bytes[first..<second]), Array(bytes[second...])]
        if Self.run(pieces) != whole {
          Issue.record("split at \(first) and \(second): \(Self.run(pieces))")
          return
        }
      }
    }
  }

  @Test func randomSplitsOfManyEventsChangeNothing() {
    var text = ""
    for id in 1...300 {
      let end = ["\n", "\r", "\r\n"][id % 3]
      text += "id: \(id)\(end)event: page\(end)data: {\"id\":\"p\(id)\",\"é\":\(id)}\(end)"
      if id % 7 == 0 { text += ": keep-alive\(end)" }
      text += end
    }
    let bytes = Array(text.utf8)
    let whole = Self.run([bytes])
    #expect(whole.events.count == 300)
    var random = SplitMix64(seed: 17)
    for _ in 0..<50 {
      var pieces: [[UInt8]] = []
      var offset = 0
      while offset < bytes.count {
        let size = Int(random.next() % 40) + 1
        pieces.append(Array(bytes[offset..<min(offset + size, bytes.count)]))
        offset += size
      }
      #expect(Self.run(pieces) == whole)
    }
  }
}
