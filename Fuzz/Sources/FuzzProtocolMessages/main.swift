import ByteBuffers
import EventLoop
import FoundationEssentials
import FuzzSupport
import StrictJSON
import StrictJSONTestKit
import SyncModel
import SyncProtocol
import Web

@testable import PagesyncClient

// Every JSON message of docs/protocol.md that a process decodes from a peer, each decoded from every input the
// way its reader decodes it: the broker's request bodies through `JSONBodies` (a 400 naming the problem), the
// device stream's text frames and the daemon's answers through the same `JSONDecoder`, and the daemon's local
// API answers as `pagesync` reads them (`JSONValue`). What decodes must survive its sender's encoding: decode,
// encode, decode gives the same value (`==` where the type has it, the same bytes re-encoded where not). The
// broker reads batches, catch-up and fetch bodies and stream messages with their strict readers: each agrees
// with JSONDecoder on every input (StrictJSONTestKit's DecodingAgreement), and a body it refuses is a 400 that
// names the problem. The input is also read as the daemon's change stream (Server-Sent Events) the way the client
// library reads it: the same events however the bytes are split, each a typed event, skipped or refused.

nonisolated(unsafe) private let bodies = JSONBodies()

/// The same value after a trip through the sender's encoder and the reader's decoder.
private func requireRoundTrip<T: Codable & Equatable>(_ value: T) {
  let bytes = encoded(value)
  let again = redecoded(T.self, bytes)
  require(again == value, "\(T.self) changed on the round trip: \(value) became \(again)")
}

/// For types without `==`: the value re-encodes to the same bytes once decoded again.
private func requireRoundTrip<T: Codable>(_ value: T) {
  let bytes = encoded(value)
  let again = encoded(redecoded(T.self, bytes))
  require(
    again == bytes,
    "\(T.self) changed on the round trip: \(String(decoding: bytes, as: UTF8.self)) became "
      + "\(String(decoding: again, as: UTF8.self))")
}

private func encoded(_ value: some Encodable) -> [UInt8] {
  do {
    return Array(try bodies.encoder.encode(value))
  } catch {
    preconditionFailure("property violated: a decoded \(type(of: value)) cannot be encoded: \(error)")
  }
}

private func redecoded<T: Decodable>(_ type: T.Type, _ bytes: [UInt8]) -> T {
  do {
    return try bodies.decoder.decode(type, from: Data(bytes))
  } catch {
    preconditionFailure(
      "property violated: \(T.self) as its sender encodes it does not decode: \(error): "
        + String(decoding: bytes, as: UTF8.self))
  }
}

/// A request body as the broker decodes it: the value, or a 400 whose message says what is wrong.
private func requestBody<T: Decodable>(_ type: T.Type, _ bytes: [UInt8]) -> T? {
  let request = HTTPRequest(
    head: HTTPRequestHead(method: .POST, target: "/v1/fuzz"), body: ByteBuffer(bytes: bytes))
  switch bodies.decode(type, request) {
  case .success(let value):
    return value
  case .failure(let error):
    require(error.status == .badRequest, "a bad \(T.self) body got \(error.status), not 400")
    let prefix = "invalid JSON body: "
    require(
      error.message.hasPrefix(prefix) && error.message.count > prefix.count,
      "a bad \(T.self) body got a message that names nothing: \(error.message)")
    return nil
  }
}

/// A request body as the broker reads it (the strict reader, `JSONBodies.read`), held to what `JSONDecoder`
/// makes of the same bytes: the value, or a 400 whose message says what is wrong.
private func strictBody<T: Codable & JSONReadable>(_ type: T.Type, _ bytes: [UInt8]) -> T? {
  if case .disagreement(let what) = DecodingAgreement.check(T.self, bytes) {
    preconditionFailure("property violated: the strict \(T.self) reader and JSONDecoder disagree: \(what)")
  }
  let request = HTTPRequest(
    head: HTTPRequestHead(method: .POST, target: "/v1/fuzz"), body: ByteBuffer(bytes: bytes))
  switch bodies.read(type, request) {
  case .success(let value):
    return value
  case .failure(let error):
    let prefix = "invalid JSON body: "
    require(
      error.status == .badRequest && error.message.hasPrefix(prefix) && error.message.count > prefix.count,
      "a bad \(T.self) body got \(error.status) \(error.message)")
    return nil
  }
}

/// A message as a stream reader or the daemon's broker link decodes it: the value, or a `DecodingError` that
/// `JSONBodies.describe` turns into a line.
private func message<T: Decodable>(_ type: T.Type, _ bytes: [UInt8]) -> T? {
  do {
    return try bodies.decoder.decode(type, from: Data(bytes))
  } catch let error as DecodingError {
    require(!JSONBodies.describe(error).isEmpty, "a bad \(T.self) gave an empty decoding error")
    return nil
  } catch {
    preconditionFailure("property violated: a bad \(T.self) threw \(error), not a DecodingError")
  }
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> Int32 {
  let bytes = Array(UnsafeRawBufferPointer(start: data, count: size))

  // The broker's request bodies: POST /v1/batch and /v1/sync, /v1/catchup, /v1/fetch.
  if let batch = requestBody(MutationBatch.self, bytes) {
    requireRoundTrip(batch)
    // What the broker checks before the store: both must not trap on any decoded batch.
    _ = batch.hasConsecutiveIDs
    for mutation in batch.mutations { _ = mutation.validate() }
  }
  if let catchUp = requestBody(BrokerProtocol.CatchUpRequest.self, bytes) { requireRoundTrip(catchUp) }
  if let fetch = requestBody(BrokerProtocol.FetchRequest.self, bytes) { requireRoundTrip(fetch) }
  // As the broker reads them.
  _ = strictBody(MutationBatch.self, bytes)
  _ = strictBody(BrokerProtocol.CatchUpRequest.self, bytes)
  _ = strictBody(BrokerProtocol.FetchRequest.self, bytes)

  // The device stream, both ways: text frames are UTF-8 by the time they are read (WebSocketMessageAssembler).
  let frame = Array(String(decoding: bytes, as: UTF8.self).utf8)
  if let client = message(BrokerProtocol.ClientMessage.self, frame) { requireRoundTrip(client) }
  if case .disagreement(let what) = DecodingAgreement.check(BrokerProtocol.ClientMessage.self, frame) {
    preconditionFailure(
      "property violated: the strict ClientMessage reader and JSONDecoder disagree: \(what)")
  }
  if let subscribed = message(BrokerProtocol.Subscribed.self, frame) { requireRoundTrip(subscribed) }
  if let unsubscribed = message(BrokerProtocol.Unsubscribed.self, frame) { requireRoundTrip(unsubscribed) }
  if let changed = message(BrokerProtocol.Changed.self, frame) { requireRoundTrip(changed) }
  if let revoked = message(BrokerProtocol.Revoked.self, frame) { requireRoundTrip(revoked) }
  if let error = message(BrokerProtocol.StreamError.self, frame) { requireRoundTrip(error) }

  // The broker's answers, as the daemon (and pagesync-load) decode them.
  if let outcome = message(BatchOutcome.self, bytes) { requireRoundTrip(outcome) }
  if let answer = message(BrokerProtocol.CatchUpResponse.self, bytes) { requireRoundTrip(answer) }
  if let answer = message(BrokerProtocol.FetchResponse.self, bytes) { requireRoundTrip(answer) }
  if let snapshot = message(PageSnapshot.self, bytes) { requireRoundTrip(snapshot) }
  if let delta = message(PageDelta.self, bytes) { requireRoundTrip(delta) }
  if let pull = message(BrokerProtocol.SyncPull.self, bytes) { requireRoundTrip(pull) }
  if let metadata = message(BrokerProtocol.SyncMetadata.self, bytes) { requireRoundTrip(metadata) }
  if let health = message(BrokerProtocol.Health.self, bytes) { requireRoundTrip(health) }

  // The daemon's local API answers as pagesync reads them: printed (`--json` and tables read `jsonText`'s
  // value), the text reads back as the same text.
  do throws(JSONValue.ParseError) {
    let value = try JSONValue(parsing: bytes)
    let text = value.jsonText
    do throws(JSONValue.ParseError) {
      let again = try JSONValue(parsing: Array(text.utf8)).jsonText
      require(again == text, "pagesync's JSON text changed on the round trip: \(text) became \(again)")
    } catch {
      preconditionFailure("property violated: pagesync's own JSON text does not parse: \(error): \(text)")
    }
  } catch {
    require(!error.description.isEmpty, "a bad local API answer gave an empty parse error")
  }
  readAsEventStream(bytes)
  return 0
}

/// The input as a Server-Sent Events stream: parsed whole and cut in two where its first byte says, the same
/// events, last event ID and reconnection time (or the same error); every event typed, skipped or refused with
/// a message.
private func readAsEventStream(_ bytes: [UInt8]) {
  func parse(_ pieces: [ArraySlice<UInt8>]) -> String {
    var parser = ServerSentEventParser(lastEventID: "0", maxEventBytes: 512)
    var events: [ServerSentEvent] = []
    for piece in pieces {
      let failure = piece.withUnsafeBytes { raw -> ServerSentEventParser.ParseError? in
        do throws(ServerSentEventParser.ParseError) {
          try parser.parse(raw, into: &events)
          return nil
        } catch {
          return error
        }
      }
      // The events before a line that is too long count too: they were read the same either way.
      if let failure { return "\(events) \(failure)" }
    }
    for event in events {
      do throws(PagesyncEvent.DecodingFailure) {
        if let typed = try PagesyncEvent(event) {
          require(typed.json == event.data, "an event's JSON changed")
        }
      } catch {
        require(!error.description.isEmpty, "a refused event gave an empty message")
      }
    }
    return "\(events) \(parser.lastEventID) \(String(describing: parser.reconnectionTime))"
  }
  let cut = bytes.isEmpty ? 0 : Int(bytes[0]) % (bytes.count + 1)
  let whole = parse([bytes[...]])
  let split = parse([bytes[..<cut], bytes[cut...]])
  require(whole == split, "the change stream reads differently when cut at \(cut): \(whole) became \(split)")
}

runLibFuzzer { data, size in fuzz(data ?? UnsafePointer(bitPattern: 1)!, size) }
