import SyncModel
import SyncProtocol

/// Why a request to the broker failed.
enum BrokerLinkError: Error, Equatable, CustomStringConvertible {
  /// No answer: connect refused, connection lost, timed out. Worth retrying later.
  case unreachable(String)
  /// The broker answered with an error status; `message` is its JSON `message` (or the body).
  case status(Int, String)
  /// The broker answered 2xx with a body that is not the expected JSON.
  case invalidAnswer(String)

  var description: String {
    switch self {
    case .unreachable(let reason): "the broker is unreachable: \(reason)"
    case .status(let code, let message): "the broker answered \(code): \(message)"
    case .invalidAnswer(let reason): "the broker's answer is not understood: \(reason)"
    }
  }

  /// Whether the same request may succeed later unchanged (network trouble, a broker busy or shutting down).
  var isRetryable: Bool {
    switch self {
    case .unreachable: true
    case .status(let code, _): code == 408 || code == 429 || code >= 500
    case .invalidAnswer: false
    }
  }
}

/// The daemon's calls to the broker (docs/protocol.md), typed: each call names its request and answer types, so
/// no caller builds a path or picks how an answer is read. `HTTPBrokerLink` makes them over HTTP and a WebSocket;
/// tests substitute a scripted broker.
///
/// Completions run on the loop thread, later (never inside the call). Loop thread only.
protocol BrokerLink: AnyObject {
  /// Called with the broker's clock (`Pagesync-Clock`) from every answer that carries one.
  var onClock: ((HLCTimestamp) -> Void)? { get set }
  /// Bytes read from and sent to the broker by the requests (the streams count their own).
  var requestBytes: (received: Int, sent: Int) { get }

  /// `POST /v1/catchup`: which of the pages changed since their times.
  func catchUp(
    _ request: BrokerProtocol.CatchUpRequest,
    completion: @escaping (Result<BrokerProtocol.CatchUpResponse, BrokerLinkError>) -> Void)
  /// `POST /v1/fetch`: one page of deltas.
  func fetch(
    _ request: BrokerProtocol.FetchRequest,
    completion: @escaping (Result<BrokerProtocol.FetchResponse, BrokerLinkError>) -> Void)
  /// `POST /v1/batch`: pushes mutations; the outcome of each.
  func push(_ batch: MutationBatch, completion: @escaping (Result<BatchOutcome, BrokerLinkError>) -> Void)
  /// `GET /v1/pages/ID`: the whole page (read-through).
  func page(_ page: EntityID, completion: @escaping (Result<PageSnapshot, BrokerLinkError>) -> Void)
  /// Opens the device stream (`GET /v1/stream`); the caller sets the stream's callbacks at once.
  func openStream(
    pingInterval: UInt64, maxMessageSize: Int,
    completion: @escaping (Result<any BrokerStream, BrokerLinkError>) -> Void)

  /// New credentials and answer timeout (a configuration reload), for requests and streams opened from now on.
  func update(token: String, timeoutMillis: UInt64)
  /// Closes the request connection (streams are their owners' to close).
  func close()

  /// How many brokers (`[broker] url`) the link can reach.
  var brokerCount: Int { get }
  /// Sends every request and stream from now on to broker `index` of the list (the one the device stream is
  /// on); a request connection to another one is closed.
  func select(broker index: Int)
}

extension BrokerLink {
  /// One broker (a scripted one in tests).
  var brokerCount: Int { 1 }
  func select(broker index: Int) {}
}

/// What the broker sent on the device stream.
enum BrokerStreamFrame {
  /// A frame read as one of the broker's messages.
  case message(BrokerProtocol.ServerMessage)
  /// A frame that could not be read (its first 200 characters): logged and dropped.
  case unreadable(String)

  /// A text frame, read with the strict decoder: a frame from the broker (or anyone on the path) must not be
  /// able to make the daemon trap. A frame with a time above 2^63-1 (`BrokerNumbers`) is unreadable too.
  init(text: String) {
    if let message = try? BrokerProtocol.ServerMessage(strictJSON: text), message.numberOutOfRange == nil {
      self = .message(message)
    } else {
      self = .unreadable(String(text.prefix(200)))
    }
  }
}

/// How a device stream ended: the close code and reason (docs/protocol.md, "Codes").
struct BrokerStreamClose: Equatable, CustomStringConvertible {
  /// The code of the close frame that ended it (1006 when the connection dropped without one).
  var code: UInt16
  var reason: String
  /// Whether the broker (or the network) ended it, not the daemon.
  var byBroker: Bool

  /// The broker's close of a stream whose JSON Web Token expired (`token expired`).
  static let tokenExpiredCode = BrokerProtocol.StreamCloseReason.tokenExpired.code

  var description: String {
    "\(code)\(reason.isEmpty ? "" : " \(reason)") (\(byBroker ? "peer" : "local"))"
  }
}

/// One open device stream. Loop thread only.
protocol BrokerStream: AnyObject {
  /// Each frame the broker sends, in order.
  var onFrame: ((BrokerStreamFrame) -> Void)? { get set }
  /// Called once when the stream is gone, whoever closed it, with why; callbacks are dropped after it.
  var onClose: ((BrokerStreamClose) -> Void)? { get set }
  /// Bytes read from and sent on the stream, the opening handshake included (final once closed).
  var bytes: (received: Int, sent: Int) { get }

  /// Sends one `subscribe` frame for `pages`.
  func subscribe(_ pages: some Collection<EntityID>)
  /// Sends one `unsubscribe` frame for `pages`.
  func unsubscribe(_ pages: some Collection<EntityID>)
  /// Closes the stream (`1001 going away` with `reason`); `onClose` follows.
  func close(reason: String)
}
