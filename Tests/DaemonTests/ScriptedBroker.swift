import FoundationEssentials
import SyncModel
import SyncProtocol
import Testing

@testable import Daemon

/// One call the daemon made to the broker, answered when the test says (in the spirit of swift-nio's
/// `EmbeddedChannel`: nothing happens until the test makes it happen).
final class ScriptedCall<Request, Answer> {
  let request: Request
  private var completion: ((Result<Answer, BrokerLinkError>) -> Void)?

  init(_ request: Request, _ completion: @escaping (Result<Answer, BrokerLinkError>) -> Void) {
    self.request = request
    self.completion = completion
  }

  /// Whether the test has answered it.
  var isAnswered: Bool { completion == nil }

  /// Delivers the answer to the daemon, now, on the caller's thread (the loop's). A call is answered once.
  func answer(_ result: Result<Answer, BrokerLinkError>) {
    guard let completion else {
      Issue.record("a scripted call answered twice: \(request)")
      return
    }
    self.completion = nil
    completion(result)
  }

  func succeed(_ answer: Answer) { self.answer(.success(answer)) }
  func fail(_ error: BrokerLinkError) { answer(.failure(error)) }

  /// Drops the completion unanswered, as a link that is closed drops what it was waiting for: the completion
  /// holds the daemon (its nested functions capture it), so one kept past the test would keep the daemon alive.
  func abandon() { completion = nil }
}

/// A broker whose every answer and frame is chosen by the test: `BrokerLink` for `SyncDriver` and `LocalAPI`.
/// Calls are recorded in order, each waiting for `answer`; streams open only when the test accepts them. Loop
/// thread only (the test's).
final class ScriptedBroker: BrokerLink {
  var onClock: ((HLCTimestamp) -> Void)?
  var requestBytes = (received: 0, sent: 0)

  private(set) var catchUps: [ScriptedCall<BrokerProtocol.CatchUpRequest, BrokerProtocol.CatchUpResponse>] =
    []
  private(set) var fetches: [ScriptedCall<BrokerProtocol.FetchRequest, BrokerProtocol.FetchResponse>] = []
  private(set) var pushes: [ScriptedCall<MutationBatch, BatchOutcome>] = []
  private(set) var pageReads: [ScriptedCall<EntityID, PageSnapshot>] = []
  /// `openStream` calls: accept one with `accept(_:)`, refuse it with `fail`.
  private(set) var streamOpens: [ScriptedCall<UInt64, any BrokerStream>] = []
  /// The streams accepted, oldest first.
  private(set) var streams: [ScriptedStream] = []
  /// Tokens given by `update(token:timeoutMillis:)`, in order.
  private(set) var tokens: [String] = []
  private(set) var isClosed = false
  /// How many brokers the link stands for (`[broker] url`); set before the daemon is made.
  var brokerCount = 1
  /// The broker `select(broker:)` chose last, and what went to which: "stream 0", "catchUp 1", "push 1", ….
  private(set) var selected = 0
  private(set) var routed: [String] = []

  func select(broker index: Int) { selected = index }

  func catchUp(
    _ request: BrokerProtocol.CatchUpRequest,
    completion: @escaping (Result<BrokerProtocol.CatchUpResponse, BrokerLinkError>) -> Void
  ) {
    routed.append("catchUp \(selected)")
    catchUps.append(ScriptedCall(request, completion))
  }

  func fetch(
    _ request: BrokerProtocol.FetchRequest,
    completion: @escaping (Result<BrokerProtocol.FetchResponse, BrokerLinkError>) -> Void
  ) {
    routed.append("fetch \(selected)")
    fetches.append(ScriptedCall(request, completion))
  }

  func push(_ batch: MutationBatch, completion: @escaping (Result<BatchOutcome, BrokerLinkError>) -> Void) {
    routed.append("push \(selected)")
    pushes.append(ScriptedCall(batch, completion))
  }

  func page(_ page: EntityID, completion: @escaping (Result<PageSnapshot, BrokerLinkError>) -> Void) {
    pageReads.append(ScriptedCall(page, completion))
  }

  func openStream(
    pingInterval: UInt64, maxMessageSize: Int,
    completion: @escaping (Result<any BrokerStream, BrokerLinkError>) -> Void
  ) {
    routed.append("stream \(selected)")
    streamOpens.append(ScriptedCall(pingInterval, completion))
  }

  func update(token: String, timeoutMillis: UInt64) { tokens.append(token) }
  /// The daemon closes its link when it stops: the calls still waiting are dropped, as the real link's
  /// connection drops them (a kept completion would keep the daemon, which holds this broker, alive: a cycle).
  func close() {
    isClosed = true
    for call in catchUps { call.abandon() }
    for call in fetches { call.abandon() }
    for call in pushes { call.abandon() }
    for call in pageReads { call.abandon() }
    for call in streamOpens { call.abandon() }
  }

  /// Accepts the newest `openStream` call: the daemon gets a new stream, which is returned.
  @discardableResult
  func acceptStream(sourceLocation: SourceLocation = #_sourceLocation) -> ScriptedStream {
    let stream = ScriptedStream()
    guard let open = streamOpens.last, !open.isAnswered else {
      Issue.record("no stream open is waiting", sourceLocation: sourceLocation)
      return stream
    }
    streams.append(stream)
    open.succeed(stream)
    return stream
  }

  /// The newest stream.
  var stream: ScriptedStream? { streams.last }
}

/// A device stream scripted by the test: frames the daemon sends are recorded; frames the broker sends are pushed
/// by the test and read as the real stream reads them (`BrokerStreamFrame(text:)`, the strict decoder); the
/// broker may drop it. Its close is reported at once (a WebSocket reports it after the closing handshake).
final class ScriptedStream: BrokerStream {
  /// What the daemon sent on a stream.
  enum Sent: Equatable, CustomStringConvertible {
    case subscribe([EntityID])
    case unsubscribe([EntityID])

    var description: String {
      switch self {
      case .subscribe(let pages): "subscribe \(pages)"
      case .unsubscribe(let pages): "unsubscribe \(pages)"
      }
    }
  }

  var onFrame: ((BrokerStreamFrame) -> Void)?
  var onClose: ((BrokerStreamClose) -> Void)?
  var bytes = (received: 0, sent: 0)
  private(set) var sent: [Sent] = []
  /// Why the daemon closed it, nil while it has not.
  private(set) var closedByDaemon: String?
  private(set) var isOpen = true

  func subscribe(_ pages: some Collection<EntityID>) { sent.append(.subscribe(Array(pages))) }
  func unsubscribe(_ pages: some Collection<EntityID>) { sent.append(.unsubscribe(Array(pages))) }

  func close(reason: String) {
    guard isOpen else { return }
    closedByDaemon = reason
    finish(BrokerStreamClose(code: 1001, reason: reason, byBroker: false))
  }

  /// The broker sends `message`, written as the broker writes it.
  func send(_ message: BrokerProtocol.ServerMessage, sourceLocation: SourceLocation = #_sourceLocation) {
    let encoder = JSONEncoder()
    encoder.outputFormatting = [.sortedKeys]
    guard let data = try? encoder.encode(message) else {
      Issue.record("cannot encode \(message)", sourceLocation: sourceLocation)
      return
    }
    send(text: String(decoding: data, as: UTF8.self), sourceLocation: sourceLocation)
  }

  /// The broker sends a text frame, whatever it holds.
  func send(text: String, sourceLocation: SourceLocation = #_sourceLocation) {
    guard isOpen else {
      Issue.record("a frame on a closed stream", sourceLocation: sourceLocation)
      return
    }
    bytes.received += text.utf8.count
    onFrame?(BrokerStreamFrame(text: text))
  }

  /// The broker answers the oldest `subscribe` frame not answered yet.
  func answerSubscribe(total: Int = 0, denied: [String] = []) {
    send(.subscribed(BrokerProtocol.Subscribed(added: total, total: total, denied: denied)))
  }

  /// The broker (or the network) drops the stream: 1006 by default, as a connection lost without a close frame.
  func closeByBroker(code: UInt16 = 1006, reason: String = "") {
    guard isOpen else { return }
    finish(BrokerStreamClose(code: code, reason: reason, byBroker: true))
  }

  private func finish(_ reason: BrokerStreamClose) {
    isOpen = false
    let callback = onClose
    onFrame = nil
    onClose = nil
    callback?(reason)
  }
}
