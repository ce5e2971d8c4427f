import BrokerCore
import BrokerStore
import ByteBuffers
import EventLoop
import StrictJSON
import SyncModel
import SyncProtocol
import Web

/// What a device stream needs of its socket: a `WebSocket`, or in tests a scripted one that records frames.
///
/// Threading: the loop thread of the broker.
protocol StreamSocket: AnyObject {
  /// The upgrade request (its token is checked again on reload).
  var request: HTTPRequest? { get }
  var isOpen: Bool { get }
  /// Bytes written and not yet taken by the kernel.
  var queuedBytes: Int { get }
  /// Hears its messages, drains and close (a session: one object, no closure per callback). Held weakly.
  var delegate: (any WebSocketDelegate)? { get set }
  /// Called once, when the connection is over (either side, any way); for a stream refused before it had a
  /// session.
  var onClose: ((WebSocketCloseInfo) -> Void)? { get set }
  func send(text: String)
  /// A frame encoded once for many sockets (`WebSocket.encodeServerFrame`).
  func send(encodedFrame: ByteBuffer)
  /// The same, written at once when nothing else of the socket waits (`WebSocket.sendNow(encodedFrame:)`).
  func sendNow(encodedFrame: ByteBuffer)
  func close(code: WebSocketCloseCode, reason: String)
  func pauseReading()
  func resumeReading()
  /// Keeps of the upgrade request only the header fields named (`WebSocket.keepRequest(headers:)`).
  func keepRequest(headers names: [String])
}

extension WebSocket: StreamSocket {}

/// What a device stream may ask of the broker, and all it may: a `StreamSession` holds the broker as this only.
/// The broker owns the sessions and calls them (to send, to close, to write notifications); a session calls back
/// with what its device asked and when its socket drained or closed.
///
/// Threading: the broker's loop thread. Nothing is asked for a session once it has closed.
protocol StreamSessionHost: AnyObject {
  /// Whether the store is being read for a subscription: frames then wait, in order, until `whenStoreIdle`.
  var isReadingStore: Bool { get }
  /// Runs `body` once no store read for subscriptions is under way, after those that asked before it: at once if
  /// none is.
  func whenStoreIdle(_ body: @escaping () -> Void)
  /// Subscribes `session` to the pages of `frame` if it is a `subscribe` whose pages the channel index knows with
  /// their workspaces (no store read, no decoding); nil for any other frame, which the session then decodes.
  func subscribeKnownPages(of frame: String, for session: StreamSession) -> BrokerProtocol.Subscribed?
  /// Subscribes `session` to `pages` once it is known where they are (at once, or after a store read: no read
  /// may be under way, `isReadingStore`). `denied`: ids the session refused already (malformed), listed first.
  /// `completion` runs only if the session is still open, with the answer or the store's error.
  func subscribe(
    _ pages: [EntityID], denied: [String], for session: StreamSession,
    completion: @escaping (Result<BrokerProtocol.Subscribed, any Error>) -> Void)
  /// Ends `session`'s subscriptions to `pageIDs` (and drops their pending notifications).
  func unsubscribe(_ pageIDs: [String], for session: StreamSession) -> BrokerProtocol.Unsubscribed
  /// `session`'s socket drained after a flush left notifications pending: write them.
  func flushNotifications(to session: StreamSession)
  /// `session` sent its device an error message (counted by code).
  func session(_ session: StreamSession, sent error: BrokerProtocol.StreamErrorCode)
  /// `session`'s socket closed (either side): forget it.
  func sessionClosed(_ session: StreamSession, _ info: WebSocketCloseInfo)
}

/// One device's `/v1/stream` WebSocket, as I/O: frames in, answers out, in order. What its frames do, its
/// subscriptions and its pending notifications are the broker's (`StreamSessionHost`, `FanOut` under `id`).
///
/// ```
///  text frame ──▶ waiting frames (in order) ──▶ handle: subscribe from the index ──────────────▶ "subscribed"
///                     ▲      │                          decode ─▶ subscribe (maybe a store read) ▶ "subscribed"
///                     │      │                                 ─▶ unsubscribe ─────────────────▶ "unsubscribed"
///                     │      └─ a store read under way: pause reading until the host is idle
///                     └──────── the read is over: resume, handle what waits
/// ```
///
/// Threading: the broker's loop thread.
final class StreamSession {
  // Stored properties: wide ones first, the narrow ones last and together (Swift lays a class out in declaration
  // order; a `Bool` between two words costs a word, B6).

  /// Its number for logs (never reused).
  let connection: UInt64
  let socket: any StreamSocket
  private unowned let host: any StreamSessionHost
  private let json: JSONBodies
  /// The user its subscriptions count against (`[limits] subscriptions_per_user`): the one it opened as.
  let quotaUser: String
  /// Its subscriptions as last recorded in the host's quota.
  var countedSubscriptions = 0
  /// The workspaces this stream holds on the bus (`BrokerBus.hold`): its grant's, as of the last sync.
  var busWorkspaces: Set<String> = []
  /// Closes the stream when its JSON Web Token expires (4401); nil for a token that does not expire.
  var expiryTimer: LoopTimer?
  /// Frames wait here, as text, while a `subscribe` waits for the store (its own, or another device's that the
  /// broker is reading for), so that a device's frames take effect, and are answered, in the order it sent them.
  /// Reading pauses meanwhile, which bounds the queue to what one read delivered.
  private var waitingFrames: [String] = []
  /// Who the device is; replaced when a reload changes what its token may see (`BrokerServer.reload`).
  var grant: Grant
  /// Its subscriber id in the fan-out (reused once the stream closed).
  let id: SubscriberID
  /// Set once its socket closed: the host has forgotten it, and its id may stand for another stream.
  private(set) var isClosed = false
  /// Set by the host when its socket was too full to take every pending notification: the socket's drain
  /// callback then asks for the rest. (A socket drains after every write; most find nothing left to send.)
  var notificationsWaitForDrain = false
  /// Set by the host while a narrowed grant's subscriptions are being withdrawn (a store read): notifications
  /// wait until the pages it may no longer see are unsubscribed.
  var notificationsHeld = false

  init(
    id: SubscriberID, connection: UInt64, socket: any StreamSocket, grant: Grant, host: any StreamSessionHost,
    json: JSONBodies
  ) {
    self.id = id
    self.connection = connection
    self.socket = socket
    self.grant = grant
    self.quotaUser = grant.user.rawValue
    self.host = host
    self.json = json
    // Its socket's delegate rather than four closures on it: each would be a closure context of its own, for as
    // long as the stream is open (B6). The socket holds it weakly: the host owns the session.
    socket.delegate = self
  }

  /// Sends a message (JSON text).
  func send(_ message: some Encodable) {
    socket.send(text: json.text(message))
  }

  /// Closes the stream for `reason`, with its code; the host hears of it once the close completes.
  func close(_ reason: BrokerProtocol.StreamCloseReason) {
    socket.close(code: WebSocketCloseCode(reason.code), reason: reason.reason)
  }

  // MARK: Frames

  /// A `subscribe` waits for the store: frames wait in `waitingFrames`.
  private var waitingForStore = false
  private var processing = false

  /// Whether the session holds an array for waiting frames: only while frames wait (tests).
  var holdsWaitingFrames: Bool { waitingFrames.capacity > 0 }

  private func received(_ text: String) {
    waitingFrames.append(text)
    processFrames()
  }

  private func processFrames() {
    guard !processing else { return }
    processing = true
    defer { processing = false }
    while !waitingForStore && !waitingFrames.isEmpty {
      if host.isReadingStore {
        waitingForStore = true
        host.whenStoreIdle { [weak self] in self?.storeIsIdle() }
        break
      }
      handle(waitingFrames.removeFirst())
    }
    // Frames rarely wait: an idle stream keeps no array for them.
    if waitingFrames.isEmpty { waitingFrames = [] }
    if waitingForStore { socket.pauseReading() }
  }

  private func storeIsIdle() {
    guard !isClosed, socket.isOpen else { return }
    waitingForStore = false
    socket.resumeReading()
    processFrames()
  }

  private func handle(_ text: String) {
    if let answer = host.subscribeKnownPages(of: text, for: self) {
      send(answer)
      return
    }
    let message: BrokerProtocol.ClientMessage
    do throws(JSONReadError) {
      // The strict reader (StrictJSON): a subscribe may carry thousands of ids.
      message = try JSONReader.decode(BrokerProtocol.ClientMessage.self, from: text)
    } catch {
      fail(.invalidMessage, "invalid message: \(error)")
      return
    }
    switch message.op {
    case "subscribe": subscribe(message.pages ?? [])
    case "unsubscribe": send(host.unsubscribe(message.pages ?? [], for: self))
    default:
      fail(.invalidMessage, "unknown op \"\(message.op.prefix(40))\": expected subscribe or unsubscribe")
    }
  }

  /// Sends an error message; the connection stays open.
  private func fail(_ code: BrokerProtocol.StreamErrorCode, _ message: String) {
    send(BrokerProtocol.StreamError(code, message))
    host.session(self, sent: code)
  }

  /// Subscribes to pages the device may see: ids of another workspace's pages are denied (pages that do not exist
  /// yet are accepted, and notified only once they exist in one of the device's workspaces). The answer goes out
  /// after the subscriptions are in place, so a catch-up sent after it cannot miss a change.
  private func subscribe(_ pageIDs: [String]) {
    var denied: [String] = []
    var valid: [EntityID] = []
    for text in pageIDs {
      if let id = try? EntityID(validating: text) {
        valid.append(id)
      } else {
        denied.append(String(text.prefix(80)))
      }
    }
    waitingForStore = true
    var answeredAtOnce = true
    host.subscribe(valid, denied: denied, for: self) { [weak self] result in
      guard let self, self.socket.isOpen else { return }
      self.waitingForStore = false
      switch result {
      case .success(let answer): self.send(answer)
      case .failure: self.fail(.subscriptionNotChecked, "the subscription could not be checked; try again")
      }
      if !answeredAtOnce {
        self.socket.resumeReading()
        self.processFrames()
      }
    }
    answeredAtOnce = false
  }
}

extension StreamSession: WebSocketDelegate {
  func webSocketReceived(text: String) { received(text) }

  func webSocketReceived(binary: ByteBuffer) { fail(.invalidMessage, "frames are JSON text") }

  func webSocketDrained() {
    guard notificationsWaitForDrain, !isClosed else { return }
    notificationsWaitForDrain = false
    host.flushNotifications(to: self)
  }

  func webSocketClosed(_ info: WebSocketCloseInfo) {
    guard !isClosed else { return }
    isClosed = true
    host.sessionClosed(self, info)
  }
}
