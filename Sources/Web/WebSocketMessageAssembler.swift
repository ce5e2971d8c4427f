import ByteBuffers

/// Turns decoded frames into messages (RFC 6455 sections 5.4-5.5 and 8.1): joins fragments, validates text as
/// UTF-8 as it arrives, parses close frames, and enforces `maxMessageSize`.
///
/// ```
///   idle ──text/binary, FIN──▶ (message) idle
///   idle ──text/binary, no FIN──▶ open ──continuation, no FIN──▶ open
///                                 open ──continuation, FIN──▶ (message) idle
///   idle, open ──ping/pong/close──▶ (message) unchanged
///   anything else ──▶ failed (sticky)
/// ```
///
/// Errors are sticky: after `push` throws, every later call throws the same error. Not thread-safe; owned by
/// the connection's loop.
public struct WebSocketMessageAssembler {
  /// The largest text or binary message accepted, summed over its fragments; a larger one fails with 1009.
  public let maxMessageSize: Int

  /// The opcode of the fragmented message being assembled (text or binary), nil between messages.
  private var openOpcode: WebSocketOpcode?
  private var fragments = ByteBuffer.empty
  private var validator = UTF8Validator()
  private var failure: WebSocketError?

  public init(maxMessageSize: Int) {
    precondition(maxMessageSize >= 0, "maxMessageSize must not be negative")
    self.maxMessageSize = maxMessageSize
  }

  /// Whether a fragmented message has started and not yet finished.
  public var isAssembling: Bool { openOpcode != nil }

  /// Whether the assembler holds a buffer of its own (it does only while a fragmented message is under way).
  public var holdsBuffer: Bool { !fragments.sharesEmptyStorage }

  /// Takes the next frame; returns a message when one is complete, nil while a fragmented message is still
  /// incomplete. Control frames may arrive between fragments and are returned at once.
  ///
  /// - Throws: `WebSocketError` with 1002 for a fragmentation or close-frame violation, 1007 for text or a close
  ///   reason that is not UTF-8, 1009 for a message over `maxMessageSize`.
  public mutating func push(_ frame: WebSocketFrame) throws(WebSocketError) -> WebSocketMessage? {
    if let failure { throw failure }
    do throws(WebSocketError) {
      return try assemble(frame)
    } catch {
      failure = error
      openOpcode = nil
      fragments = .empty
      throw error
    }
  }

  private mutating func assemble(_ frame: WebSocketFrame) throws(WebSocketError) -> WebSocketMessage? {
    switch frame.opcode {
    case .ping, .pong, .close:
      // The decoder already enforces these; checked again because frames can be built by hand.
      guard frame.fin else { throw .protocolError("fragmented control frame") }
      guard frame.payload.readableBytes <= 125 else {
        throw .protocolError("control frame payload longer than 125 bytes")
      }
      switch frame.opcode {
      case .ping: return .ping(frame.payload)
      case .pong: return .pong(frame.payload)
      default: return try Self.parseClose(frame.payload)
      }

    case .text, .binary:
      guard openOpcode == nil else {
        throw .protocolError("new \(frame.opcode) frame while a fragmented message is unfinished")
      }
      try checkSize(frame.payload.readableBytes)
      if frame.fin {
        // The common case, an unfragmented message: no copy into `fragments`.
        return try Self.message(frame.opcode, frame.payload)
      }
      openOpcode = frame.opcode
      validator = UTF8Validator()
      try add(frame.payload)
      return nil

    case .continuation:
      guard let opcode = openOpcode else {
        throw .protocolError("continuation frame without a message to continue")
      }
      try checkSize(fragments.readableBytes + frame.payload.readableBytes)
      try add(frame.payload)
      guard frame.fin else { return nil }
      if opcode == .text && !validator.isComplete {
        throw WebSocketError(.invalidFramePayloadData, "text message ends inside a UTF-8 sequence")
      }
      let payload = fragments
      openOpcode = nil
      fragments = .empty
      if opcode == .text { return .text(payload.readableString) }
      return .binary(payload)
    }
  }

  private func checkSize(_ size: Int) throws(WebSocketError) {
    if size > maxMessageSize {
      throw WebSocketError(.messageTooBig, "message exceeds the limit of \(maxMessageSize) bytes")
    }
  }

  /// Appends a fragment of the open message, validating text as it comes so a bad fragment fails at once.
  private mutating func add(_ payload: ByteBuffer) throws(WebSocketError) {
    if openOpcode == .text {
      let valid = payload.withUnsafeReadableBytes { validator.feed($0) }
      if !valid { throw WebSocketError(.invalidFramePayloadData, "text message is not valid UTF-8") }
    }
    fragments.append(payload)
  }

  private static func message(_ opcode: WebSocketOpcode, _ payload: ByteBuffer) throws(WebSocketError)
    -> WebSocketMessage
  {
    guard opcode == .text else { return .binary(payload) }
    guard payload.withUnsafeReadableBytes({ UTF8Validator.isValid($0) }) else {
      throw WebSocketError(.invalidFramePayloadData, "text message is not valid UTF-8")
    }
    return .text(payload.readableString)
  }

  /// Parses a close payload (RFC 6455 section 5.5.1): empty, or a 2-byte code a peer may send and a UTF-8
  /// reason.
  static func parseClose(_ payload: ByteBuffer) throws(WebSocketError) -> WebSocketMessage {
    let count = payload.readableBytes
    if count == 0 { return .close(code: nil, reason: "") }
    guard count >= 2 else { throw .protocolError("close payload of 1 byte") }
    let code = WebSocketCloseCode(UInt16(payload[0]) << 8 | UInt16(payload[1]))
    guard code.isSendable else { throw .protocolError("close code \(code.rawValue) may not be sent") }
    let reason = payload.slice(from: 2, count: count - 2)
    guard reason.withUnsafeReadableBytes({ UTF8Validator.isValid($0) }) else {
      throw WebSocketError(.invalidFramePayloadData, "close reason is not valid UTF-8")
    }
    return .close(code: code, reason: reason.readableString)
  }
}
