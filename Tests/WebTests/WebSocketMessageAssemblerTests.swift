import ByteBuffers
import Testing

@testable import Web

/// Frames to messages: fragmentation rules, limits, incremental UTF-8 validation, close payloads.
@Suite struct WebSocketMessageAssemblerTests {
  static func frame(_ opcode: WebSocketOpcode, _ bytes: [UInt8], fin: Bool = true) -> WebSocketFrame {
    WebSocketFrame(fin: fin, opcode: opcode, payload: ByteBuffer(bytes: bytes))
  }

  static func frame(_ opcode: WebSocketOpcode, _ text: String, fin: Bool = true) -> WebSocketFrame {
    frame(opcode, Array(text.utf8), fin: fin)
  }

  /// Pushes `frames` in order; returns the messages, or the error with the index of the frame that caused it.
  static func push(_ frames: [WebSocketFrame], maxMessageSize: Int = 1000) -> (
    messages: [WebSocketMessage?], error: WebSocketError?, failedAt: Int?
  ) {
    var assembler = WebSocketMessageAssembler(maxMessageSize: maxMessageSize)
    var messages: [WebSocketMessage?] = []
    for (index, frame) in frames.enumerated() {
      do throws(WebSocketError) {
        messages.append(try assembler.push(frame))
      } catch {
        return (messages, error, index)
      }
    }
    return (messages, nil, nil)
  }

  // MARK: Messages

  @Test func unfragmentedMessages() {
    let result = Self.push([Self.frame(.text, "héllo"), Self.frame(.binary, [0, 0xFF, 0xC0])])
    #expect(result.error == nil)
    #expect(result.messages == [.text("héllo"), .binary(ByteBuffer(bytes: [0, 0xFF, 0xC0]))])
  }

  @Test func fragmentedTextIsJoined() {
    let result = Self.push([Self.frame(.text, "Hel", fin: false), Self.frame(.continuation, "lo")])
    #expect(result.messages == [nil, .text("Hello")])
  }

  /// An idle connection keeps no buffer: the fragments' buffer exists only while a message is under way.
  @Test func fragmentsAreHeldOnlyWhileAMessageIsUnderWay() throws {
    var assembler = WebSocketMessageAssembler(maxMessageSize: 1000)
    #expect(!assembler.holdsBuffer)
    #expect(try assembler.push(Self.frame(.text, "Hel", fin: false)) == nil)
    #expect(try assembler.push(Self.frame(.continuation, "l", fin: false)) == nil)
    #expect(assembler.holdsBuffer)
    #expect(try assembler.push(Self.frame(.continuation, "o")) == .text("Hello"))
    #expect(!assembler.holdsBuffer, "a finished message's fragments are released")
  }

  @Test func fragmentedBinaryWithEmptyFragmentsIsJoined() {
    let result = Self.push([
      Self.frame(.binary, [], fin: false), Self.frame(.continuation, [1, 2], fin: false),
      Self.frame(.continuation, [], fin: false), Self.frame(.continuation, [3]),
    ])
    #expect(result.messages == [nil, nil, nil, .binary(ByteBuffer(bytes: [1, 2, 3]))])
  }

  @Test func controlFramesBetweenFragmentsAreReturnedAtOnce() {
    let result = Self.push([
      Self.frame(.text, "a", fin: false), Self.frame(.ping, "p1"), Self.frame(.continuation, "b", fin: false),
      Self.frame(.pong, "p2"), Self.frame(.close, [0x03, 0xE8]), Self.frame(.continuation, "c"),
      Self.frame(.binary, [7]),
    ])
    #expect(result.error == nil)
    #expect(
      result.messages == [
        nil, .ping(ByteBuffer(string: "p1")), nil, .pong(ByteBuffer(string: "p2")),
        .close(code: .normalClosure, reason: ""), .text("abc"), .binary(ByteBuffer(bytes: [7])),
      ])
  }

  @Test func assemblerIsReusableAcrossMessages() {
    let result = Self.push([
      Self.frame(.binary, [1], fin: false), Self.frame(.continuation, [2]),
      Self.frame(.text, "x", fin: false), Self.frame(.continuation, "y"),
    ])
    #expect(result.messages == [nil, .binary(ByteBuffer(bytes: [1, 2])), nil, .text("xy")])
  }

  // MARK: Fragmentation violations

  @Test func continuationWithoutAMessageIsAProtocolError() {
    #expect(Self.push([Self.frame(.continuation, "x")]).error?.closeCode == .protocolError)
    let afterComplete = Self.push([Self.frame(.text, "a"), Self.frame(.continuation, "b", fin: false)])
    #expect(afterComplete.error?.closeCode == .protocolError)
    #expect(afterComplete.failedAt == 1)
  }

  @Test(arguments: [WebSocketOpcode.text, .binary], [WebSocketOpcode.text, .binary])
  func newDataFrameWhileFragmentedIsAProtocolError(first: WebSocketOpcode, second: WebSocketOpcode) {
    let result = Self.push([Self.frame(first, "a", fin: false), Self.frame(second, "b")])
    #expect(result.error?.closeCode == .protocolError)
    #expect(result.failedAt == 1)
  }

  @Test func fragmentedControlFrameIsAProtocolError() {
    for opcode in [WebSocketOpcode.ping, .pong, .close] {
      #expect(Self.push([Self.frame(opcode, [], fin: false)]).error?.closeCode == .protocolError)
    }
    let oversized = Self.push([Self.frame(.ping, [UInt8](repeating: 0, count: 126))])
    #expect(oversized.error?.closeCode == .protocolError)
    #expect(Self.push([Self.frame(.ping, [UInt8](repeating: 0, count: 125))]).error == nil)
  }

  @Test func errorIsSticky() {
    var assembler = WebSocketMessageAssembler(maxMessageSize: 100)
    let first = #expect(throws: WebSocketError.self) { try assembler.push(Self.frame(.continuation, "x")) }
    let second = #expect(throws: WebSocketError.self) { try assembler.push(Self.frame(.text, "fine")) }
    #expect(first != nil)
    #expect(first == second)
  }

  // MARK: Limits

  @Test func messageOverTheLimitAcrossFragmentsFailsAsSoonAsExceeded() {
    let result = Self.push(
      [
        Self.frame(.binary, [UInt8](repeating: 1, count: 6), fin: false),
        Self.frame(.continuation, [UInt8](repeating: 2, count: 5), fin: false),
        Self.frame(.continuation, [], fin: true),
      ], maxMessageSize: 10)
    #expect(result.error?.closeCode == .messageTooBig)
    #expect(result.failedAt == 1)  // not waiting for the final fragment
  }

  @Test func messageExactlyAtTheLimitIsAccepted() {
    let result = Self.push(
      [Self.frame(.text, "12345", fin: false), Self.frame(.continuation, "67890")], maxMessageSize: 10)
    #expect(result.messages == [nil, .text("1234567890")])
  }

  @Test func singleFramesOverTheLimitFail() {
    #expect(
      Self.push([Self.frame(.text, "12345678901")], maxMessageSize: 10).error?.closeCode == .messageTooBig)
    let firstFragment = Self.push(
      [Self.frame(.binary, [UInt8](repeating: 0, count: 11), fin: false)], maxMessageSize: 10)
    #expect(firstFragment.error?.closeCode == .messageTooBig)
  }

  @Test func controlFramesDoNotCountTowardsTheMessage() {
    let result = Self.push(
      [
        Self.frame(.text, "12345", fin: false), Self.frame(.ping, "0123456789"),
        Self.frame(.continuation, "67890"),
      ], maxMessageSize: 10)
    #expect(result.error == nil)
    #expect(result.messages.last == .text("1234567890"))
  }

  // MARK: UTF-8

  @Test func invalidUTF8InASingleTextFrameIs1007() {
    #expect(Self.push([Self.frame(.text, [0x61, 0xC0, 0x80])]).error?.closeCode == .invalidFramePayloadData)
    // The same bytes are fine as binary.
    #expect(Self.push([Self.frame(.binary, [0x61, 0xC0, 0x80])]).error == nil)
  }

  @Test func codePointSplitAcrossFragmentsIsFine() {
    let result = Self.push([
      Self.frame(.text, [0x61, 0xF0, 0x9F], fin: false), Self.frame(.continuation, [0x98], fin: false),
      Self.frame(.continuation, [0x80, 0x62]),
    ])
    #expect(result.error == nil)
    #expect(result.messages.last == .text("a😀b"))
  }

  @Test func invalidContinuationInALaterFragmentFailsAtThatFragment() {
    // The first fragment ends with a valid partial sequence; the second cannot continue it. The error comes
    // with the second fragment, not at the end of the message.
    let result = Self.push([
      Self.frame(.text, [0x61, 0xF0, 0x9F], fin: false), Self.frame(.continuation, [0x41], fin: false),
      Self.frame(.continuation, "rest"),
    ])
    #expect(result.messages == [nil])
    #expect(result.error?.closeCode == .invalidFramePayloadData)
    #expect(result.failedAt == 1)
  }

  @Test func invalidFirstFragmentFailsImmediately() {
    let result = Self.push([Self.frame(.text, [0x61, 0xED, 0xA0], fin: false)])
    #expect(result.error?.closeCode == .invalidFramePayloadData)
    #expect(result.failedAt == 0)
  }

  @Test func messageEndingInsideACodePointIs1007() {
    let result = Self.push([
      Self.frame(.text, [0x61, 0xE2, 0x82], fin: false), Self.frame(.continuation, []),
    ])
    #expect(result.messages == [nil])
    #expect(result.error?.closeCode == .invalidFramePayloadData)
    #expect(Self.push([Self.frame(.text, [0xE2, 0x82])]).error?.closeCode == .invalidFramePayloadData)
  }

  // MARK: Close frames

  @Test func emptyCloseHasNoCode() {
    #expect(Self.push([Self.frame(.close, [])]).messages == [.close(code: nil, reason: "")])
  }

  @Test func closeWithOneByteIsAProtocolError() {
    #expect(Self.push([Self.frame(.close, [0x03])]).error?.closeCode == .protocolError)
  }

  @Test(arguments: [0, 999, 1004, 1005, 1006, 1015, 1016, 2999, 5000, 65535] as [UInt16])
  func closeWithAnUnsendableCodeIsAProtocolError(code: UInt16) {
    let payload = [UInt8(code >> 8), UInt8(code & 0xFF)]
    #expect(Self.push([Self.frame(.close, payload)]).error?.closeCode == .protocolError)
  }

  @Test(
    arguments: [1000, 1001, 1002, 1003, 1007, 1008, 1009, 1010, 1011, 1012, 1013, 1014, 3000, 4999]
      as [UInt16])
  func closeWithASendableCodeIsParsed(code: UInt16) {
    let payload = [UInt8(code >> 8), UInt8(code & 0xFF)] + Array("bye ✓".utf8)
    #expect(
      Self.push([Self.frame(.close, payload)]).messages == [
        .close(code: WebSocketCloseCode(code), reason: "bye ✓")
      ])
  }

  @Test func closeReasonThatIsNotUTF8Is1007() {
    #expect(
      Self.push([Self.frame(.close, [0x03, 0xE8, 0x61, 0xFF])]).error?.closeCode == .invalidFramePayloadData)
    #expect(
      Self.push([Self.frame(.close, [0x03, 0xE8, 0xE2, 0x82])]).error?.closeCode == .invalidFramePayloadData)
  }

  @Test func closePayloadIsCodeThenReason() {
    let payload = WebSocketFrameEncoder.closePayload(code: .goingAway, reason: "bye")
    #expect(payload.readableBytesArray == [0x03, 0xE9] + Array("bye".utf8))
    #expect(
      WebSocketFrameEncoder.closePayload(code: .normalClosure, reason: "").readableBytesArray == [0x03, 0xE8])
  }

  @Test func closePayloadTruncatesTheReasonOnAUTF8Boundary() throws {
    // 2 + 122 ASCII + a 2-byte "é" would be 126 bytes: the "é" must go whole, not half.
    let ascii = String(repeating: "a", count: 122)
    let cut = WebSocketFrameEncoder.closePayload(code: .policyViolation, reason: ascii + "é")
    #expect(cut.readableBytes == 124)
    #expect(cut.readableBytesArray == [0x03, 0xF0] + Array(ascii.utf8))

    // 41 three-byte "€" fill exactly 123 bytes; the 42nd is dropped whole.
    let euros = WebSocketFrameEncoder.closePayload(
      code: .policyViolation, reason: String(repeating: "€", count: 50))
    #expect(euros.readableBytes == 125)
    #expect(euros.slice(from: 2, count: 123).readableString == String(repeating: "€", count: 41))

    // A four-byte character that straddles the limit.
    let emoji = WebSocketFrameEncoder.closePayload(
      code: .policyViolation, reason: "ab" + String(repeating: "😀", count: 40))
    #expect(emoji.readableBytes == 2 + 2 + 30 * 4)

    // Whatever is cut, the result parses back as a valid close frame.
    for payload in [cut, euros, emoji] {
      let message = try WebSocketMessageAssembler.parseClose(payload)
      guard case .close(let code, _) = message else {
        Issue.record("not a close message")
        continue
      }
      #expect(code == .policyViolation)
    }
  }

  @Test func reasonWithinTheLimitIsKept() {
    let reason = String(repeating: "é", count: 61) + "a"  // 123 bytes exactly
    #expect(WebSocketFrameEncoder.closePayload(code: .normalClosure, reason: reason).readableBytes == 125)
  }

  @Test func errorReasonIsCutTo123Bytes() {
    let error = WebSocketError(.protocolError, String(repeating: "€", count: 100))
    #expect(error.reason == String(repeating: "€", count: 41))
    #expect(WebSocketError(.protocolError, "short").reason == "short")
  }

  @Test func sendableCloseCodes() {
    let sendable = (0...5100).filter { WebSocketCloseCode(UInt16($0)).isSendable }
    let expected = Array(1000...1003) + Array(1007...1014) + Array(3000...4999)
    #expect(sendable == expected)
    #expect(!WebSocketCloseCode(65535).isSendable)
  }

  @Test func closeCodeDescriptionAndConstants() {
    #expect(WebSocketCloseCode.protocolError.description == "1002 (protocol error)")
    #expect(WebSocketCloseCode(4000).description == "4000")
    let constants: [WebSocketCloseCode] = [
      .normalClosure, .goingAway, .protocolError, .unsupportedData, .noStatusReceived, .abnormalClosure,
      .invalidFramePayloadData, .policyViolation, .messageTooBig, .mandatoryExtension, .internalError,
      .serviceRestart, .tryAgainLater,
    ]
    #expect(
      constants.map(\.rawValue) == [
        1000, 1001, 1002, 1003, 1005, 1006, 1007, 1008, 1009, 1010, 1011, 1012, 1013,
      ])
    #expect(WebSocketCloseCode(rawValue: 1000) == .normalClosure)
  }
}
