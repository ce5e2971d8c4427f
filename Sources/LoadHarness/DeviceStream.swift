import EventLoop
import Foundation
import LoadCore
import Web

/// A simulated device: one `/v1/stream` WebSocket, subscribed to a set of pages, reporting the `changed` messages
/// it receives as its `Reporting` says.
///
/// Either `open` (connect and subscribe at once: B1, B2, B5, B6, C1), or `connect` first and `subscribe` later with
/// a message built ahead (`subscribeMessage`), so that a timed bulk subscribe (B3) times neither the connections
/// nor the encoding.
///
/// Threading: the run's loop only.
final class DeviceStream {
  /// What the device reports of each `changed` message.
  enum Reporting {
    /// Nothing: the subscriptions only need to be in place (C1, B6, B4, B5's twin).
    case nothing
    /// The newest time of one page in each message that names it, found by one scan of the message's bytes with
    /// no string made (B1, B2, B5's healthy devices: the harness reads up to a million a second, and its CPU is
    /// part of what a fan-out run reports).
    case time(of: String, (UInt64) -> Void)
    /// Every `(page id, time)` of every message, in order (B3, B5's slow device, B7).
    case entries((Substring, UInt64) -> Void)
  }

  private let reporting: Reporting
  private(set) var socket: WebSocket?
  private var onSubscribed: ((Result<Int, LoadError>) -> Void)?
  /// The stream closed (by the broker or the network) after it opened; not called after `drop()`.
  var onLost: ((String) -> Void)?

  init(reporting: Reporting = .nothing) { self.reporting = reporting }

  var isOpen: Bool { socket?.isOpen ?? false }
  var bytesSent: Int { socket?.bytesWritten ?? 0 }
  var bytesReceived: Int { socket?.bytesRead ?? 0 }

  /// Opens the stream; `done` once the WebSocket handshake completed.
  func connect(loop: Loop, endpoint: BrokerEndpoint, _ done: @escaping (Result<Void, LoadError>) -> Void) {
    endpoint.openStream(loop: loop) { [self] result in
      switch result {
      case .failure(let error):
        done(.failure(error))
      case .success(let socket):
        self.socket = socket
        socket.onText = { [weak self] text in self?.received(text) }
        socket.onClose = { [weak self] info in
          guard let self else { return }
          if let done = onSubscribed {
            onSubscribed = nil
            done(.failure(.connectFailed("device stream closed before subscribing: \(info)")))
          } else {
            onLost?("\(info)")
          }
        }
        done(.success(()))
      }
    }
  }

  /// Connects and subscribes `pages`; `done` once the broker answered `subscribed` with nothing denied. The
  /// message is written while the connection is being made (a device knows its set before it connects).
  func open(
    loop: Loop, endpoint: BrokerEndpoint, pages: [String], _ done: @escaping (Result<Void, LoadError>) -> Void
  ) {
    var message: String?
    connect(loop: loop, endpoint: endpoint) { [self] result in
      guard case .success = result else { return done(result) }
      subscribe(message: message ?? Self.subscribeMessage(pages)) { done($0.map { _ in () }) }
    }
    message = Self.subscribeMessage(pages)
  }

  /// The subscribe message for `pages`: built ahead so that a timed bulk subscribe does not time its encoding.
  /// Written as bytes (a `String` built id by id cost about 0.3 µs an id); the harness's ids need no escaping.
  static func subscribeMessage(_ pages: [String]) -> String {
    var out: [UInt8] = []
    out.reserveCapacity(pages.count * 40 + 40)
    out.append(contentsOf: #"{"op":"subscribe","pages":["#.utf8)
    for (index, page) in pages.enumerated() {
      if index > 0 { out.append(UInt8(ascii: ",")) }
      out.append(UInt8(ascii: "\""))
      out.append(contentsOf: page.utf8)
      out.append(UInt8(ascii: "\""))
    }
    out.append(contentsOf: "]}".utf8)
    return String(decoding: out, as: UTF8.self)
  }

  /// Sends `message` (from `subscribeMessage`); `done` gets the broker's `added` count once it answered
  /// `subscribed`, or a failure when it denied a page or the stream closed first.
  func subscribe(message: String, _ done: @escaping (Result<Int, LoadError>) -> Void) {
    guard let socket, socket.isOpen else { return done(.failure(.connectFailed("device stream is closed"))) }
    onSubscribed = done
    socket.send(text: message)
  }

  /// Every message, on the hot path of a fan-out run: a `changed` message is reported and done with first, and
  /// only another message (rare) is looked at for `subscribed`.
  private func received(_ text: String) {
    switch reporting {
    case .time(let page, let report):
      if let time = ChangedFrame.time(of: page, in: text) { return report(time) }
    case .entries(let report):
      if let entries = ChangedFrame.parse(text) {
        for entry in entries { report(entry.id, entry.time) }
        return
      }
    case .nothing:
      break
    }
    guard let done = onSubscribed, text.contains(#""op":"subscribed""#) else { return }
    onSubscribed = nil
    let object = (try? JSONSerialization.jsonObject(with: Data(text.utf8))) as? [String: Any] ?? [:]
    let denied = (object["denied"] as? [Any])?.count ?? 0
    let added = (object["added"] as? NSNumber)?.intValue ?? 0
    if denied > 0 {
      done(.failure(.setupFailed("the broker denied \(denied) subscriptions: \(text.prefix(300))")))
    } else {
      done(.success(added))
    }
  }

  /// Drops the stream at once (no close handshake), as a device that loses its network does; also how a run
  /// closes its devices. Nothing is reported afterwards.
  func drop() {
    onSubscribed = nil
    socket?.onClose = nil
    socket?.onText = nil
    socket?.abort(reason: "load device dropped")
  }
}
