import EventLoop
import LoadCore
import Web

/// A simulated device: one `/v1/stream` WebSocket subscribed to a set of pages, reporting each `changed` time
/// of the page it watches.
///
/// Threading: the run's loop only.
final class DeviceStream {
  private(set) var socket: WebSocket?
  private var onSubscribed: ((Result<Void, LoadError>) -> Void)?

  /// Connects, subscribes `pages`, and calls `done` once the broker answered `subscribed`. Afterwards every
  /// `changed` message naming `watched` calls `onTime` with its time, and every message at all `onFrame`.
  func open(
    loop: Loop, endpoint: BrokerEndpoint, pages: [String], watched: String = "",
    onTime: ((UInt64) -> Void)? = nil, onFrame: ((String) -> Void)? = nil,
    _ done: @escaping (Result<Void, LoadError>) -> Void
  ) {
    endpoint.openStream(loop: loop) { [self] result in
      switch result {
      case .failure(let error):
        done(.failure(error))
      case .success(let socket):
        self.socket = socket
        onSubscribed = done
        socket.onText = { [weak self] text in
          guard let self else { return }
          onFrame?(text)
          if let time = ChangedFrame.time(of: watched, in: text) {
            onTime?(time)
          } else if text.contains(#""op":"subscribed""#), let done = onSubscribed {
            onSubscribed = nil
            done(.success(()))
          }
        }
        socket.onClose = { [weak self] info in
          guard let self else { return }
          if let done = onSubscribed {
            onSubscribed = nil
            done(.failure(.connectFailed("device stream closed before subscribing: \(info)")))
          }
        }
        let list = pages.map { "\"\($0)\"" }.joined(separator: ",")
        socket.send(text: #"{"op":"subscribe","pages":[\#(list)]}"#)
      }
    }
  }

  var bytesSent: Int { socket?.bytesWritten ?? 0 }
  var bytesReceived: Int { socket?.bytesRead ?? 0 }

  func close() {
    socket?.onClose = nil
    socket?.abort(reason: "load run over")
  }
}
