import ByteBuffers
import EventLoop
import Testing
import Web

@testable import Broker

/// A device stream's socket without a network, for `BrokerHarness`: the test plays the device.
///
/// - What the device sends: `receive(_:)` (text) and `receiveBinary(_:)` deliver a frame at once, as a read
///   callback would, unless the broker paused reading; then frames wait and arrive on a later loop turn after
///   `resumeReading`, in order.
/// - What the broker sends: `frames`, each frame's text (encoded frames decoded), in order; `onSend` sees each
///   as it goes (a test records there what was true at that moment).
/// - Backpressure: `queuedBytes` is whatever the test sets (a slow reader); `drain()` empties it and tells the
///   broker (the socket's delegate) that it drained, as a socket that wrote its queue does.
/// - Closing: `close` sends nothing, records the code and reason, and completes on a later loop turn (as the
///   peer's answer would); `closeFromDevice` is the device closing.
///
/// Threading: the test's loop thread.
final class EmbeddedStreamSocket: StreamSocket {
  private(set) var request: HTTPRequest?
  private let loop: Loop
  private(set) var isOpen = true
  var queuedBytes = 0
  weak var delegate: (any WebSocketDelegate)?
  var onClose: ((WebSocketCloseInfo) -> Void)?
  /// Called with each frame's text as the broker sends it.
  var onSend: ((String) -> Void)?

  /// The text of every frame the broker sent, in order.
  private(set) var frames: [String] = []
  /// How the broker closed the stream, once it did.
  private(set) var closedWith: WebSocketCloseInfo?
  /// Whether the broker has paused reading (frames the device sends meanwhile wait).
  private(set) var isReadingPaused = false
  private var inbox: [Frame] = []

  private enum Frame {
    case text(String)
    case binary(ByteBuffer)
  }

  init(loop: Loop, request: HTTPRequest) {
    self.loop = loop
    self.request = request
  }

  // MARK: The device's side

  /// The device sends a text frame.
  func receive(_ text: String) { deliver(.text(text)) }

  /// The device sends a binary frame.
  func receiveBinary(_ bytes: [UInt8]) { deliver(.binary(ByteBuffer(bytes: bytes))) }

  /// The socket wrote what was queued: the broker may write more.
  func drain() {
    queuedBytes = 0
    delegate?.webSocketDrained()
  }

  /// The device closes the stream.
  func closeFromDevice(code: WebSocketCloseCode = .normalClosure) {
    guard isOpen else { return }
    isOpen = false
    report(WebSocketCloseInfo(code: code, reason: "", initiatedByPeer: true))
  }

  // MARK: StreamSocket (the broker's side)

  func send(text: String) {
    frames.append(text)
    onSend?(text)
  }

  func sendNow(encodedFrame: ByteBuffer) { send(encodedFrame: encodedFrame) }

  func send(encodedFrame: ByteBuffer) {
    var decoder = WebSocketFrameDecoder(role: .client, maxFramePayload: 64 << 20)
    decoder.append(encodedFrame)
    let frame = try? decoder.nextFrame()
    #expect(frame?.opcode == .text && decoder.bufferedBytes == 0, "an encoded frame is one text frame")
    send(text: frame?.payload.readableString ?? "")
  }

  func close(code: WebSocketCloseCode, reason: String) {
    guard isOpen else { return }
    isOpen = false
    let info = WebSocketCloseInfo(code: code, reason: reason, initiatedByPeer: false)
    closedWith = info
    later { self.report(info) }
  }

  func pauseReading() { isReadingPaused = true }

  func keepRequest(headers names: [String]) { request = request?.keeping(headers: names) }

  func resumeReading() {
    isReadingPaused = false
    later { self.deliverWaiting() }
  }

  // MARK: Internals

  private func deliver(_ frame: Frame) {
    precondition(isOpen, "the stream is closed")
    inbox.append(frame)
    if !isReadingPaused { deliverWaiting() }
  }

  private func deliverWaiting() {
    while isOpen && !isReadingPaused && !inbox.isEmpty {
      switch inbox.removeFirst() {
      case .text(let text): delegate?.webSocketReceived(text: text)
      case .binary(let bytes): delegate?.webSocketReceived(binary: bytes)
      }
    }
  }

  private func report(_ info: WebSocketCloseInfo) {
    let callback = onClose
    let told = delegate
    delegate = nil
    onClose = nil
    told?.webSocketClosed(info)
    callback?(info)
  }

  /// Runs `body` on a later loop turn (a timer of 0 ms, which keeps the loop running until it fired).
  private func later(_ body: @escaping () -> Void) {
    let timer = LoopTimer(loop: loop)
    timer.start(after: 0) {
      timer.close()
      body()
    }
  }
}
