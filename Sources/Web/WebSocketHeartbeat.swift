import EventLoop

/// One timer for the heartbeats of many sockets, instead of a timer each: every `period` ms it asks each socket it
/// holds to check how long its peer has been silent (`WebSocket.checkHeartbeat`). A server's sockets of one ping
/// interval share one (`HTTPServer`), which saves an idle connection its own `uv_timer_t` and `LoopTimer`
/// (~0.25 KB, B6 in docs/benchmarks.md). The bounds are a socket's own timer's: each check compares the loop's
/// clock with when the socket last heard its peer, so a ping goes out between `pingInterval` and
/// `pingInterval + period` after that, whatever the phase of the shared timer.
///
/// The timer runs only while a socket is held, so an idle loop can end. Sockets are held strongly from `add` to
/// `remove` (their closing does that, `WebSocket.stopTimers`); a socket holds it weakly.
///
/// Threading: its loop's thread only.
final class WebSocketHeartbeat {
  let period: UInt64
  private let loop: Loop
  private var timer: LoopTimer?
  private var sockets: [WebSocket] = []

  init(loop: Loop, period: UInt64) {
    self.loop = loop
    self.period = period
  }

  deinit { timer?.close() }

  func add(_ socket: WebSocket) {
    guard socket.heartbeatSlot < 0 else { return }
    socket.heartbeatSlot = Int32(sockets.count)
    sockets.append(socket)
    // A timer the loop closed behind our back (shutdown) is replaced, never restarted.
    if let timer, !timer.isClosing { return }
    let timer = LoopTimer(loop: loop)
    self.timer = timer
    timer.start(after: period, repeatEvery: period) { [unowned self] in self.tick() }
  }

  func remove(_ socket: WebSocket) {
    let slot = Int(socket.heartbeatSlot)
    guard slot >= 0, slot < sockets.count, sockets[slot] === socket else { return }
    socket.heartbeatSlot = -1
    let last = sockets.removeLast()
    if slot < sockets.count {
      sockets[slot] = last
      last.heartbeatSlot = Int32(slot)
    }
    if sockets.isEmpty {
      sockets = []
      timer?.close()
      timer = nil
    }
  }

  private func tick() {
    // A socket that a check closes leaves `sockets` meanwhile: the loop walks the array as it was.
    for socket in sockets { socket.checkHeartbeat() }
  }
}
