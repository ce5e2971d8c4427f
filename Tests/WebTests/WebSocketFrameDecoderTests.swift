import ByteBuffers
import EventLoopTestKit
import Testing

@testable import Web

/// The frame decoder and encoder: RFC 6455 section 5.7 examples byte for byte, round trips at every length
/// encoding boundary, arbitrary input splits, and every framing violation with its close code.
@Suite struct WebSocketFrameDecoderTests {
  // MARK: RFC 6455 section 5.7 examples

  struct Example: Sendable, CustomTestStringConvertible {
    var name: String
    var wire: [UInt8]
    /// Who receives `wire`: masked examples are client-to-server.
    var receiver: WebSocketRole
    var frames: [WebSocketFrame]
    var testDescription: String { name }
  }

  static let hello = ByteBuffer(string: "Hello")

  static let examples: [Example] = [
    Example(
      name: "unmasked text Hello", wire: hexBytes("81 05 48 65 6c 6c 6f"), receiver: .client,
      frames: [WebSocketFrame(opcode: .text, payload: hello)]),
    Example(
      name: "masked text Hello", wire: hexBytes("81 85 37 fa 21 3d 7f 9f 4d 51 58"), receiver: .server,
      frames: [WebSocketFrame(opcode: .text, payload: hello)]),
    Example(
      name: "fragmented unmasked text Hel + lo", wire: hexBytes("01 03 48 65 6c 80 02 6c 6f"),
      receiver: .client,
      frames: [
        WebSocketFrame(fin: false, opcode: .text, payload: ByteBuffer(string: "Hel")),
        WebSocketFrame(opcode: .continuation, payload: ByteBuffer(string: "lo")),
      ]),
    Example(
      name: "unmasked ping Hello", wire: hexBytes("89 05 48 65 6c 6c 6f"), receiver: .client,
      frames: [WebSocketFrame(opcode: .ping, payload: hello)]),
    Example(
      name: "masked pong Hello", wire: hexBytes("8a 85 37 fa 21 3d 7f 9f 4d 51 58"), receiver: .server,
      frames: [WebSocketFrame(opcode: .pong, payload: hello)]),
  ]

  @Test(arguments: examples)
  func decodesRFCExample(_ example: Example) throws {
    let frames = try decodeFrames(example.wire, role: example.receiver).get()
    #expect(frames == example.frames)
  }

  @Test(arguments: examples)
  func encodesRFCExampleByteForByte(_ example: Example) {
    var wire = ByteBuffer()
    for frame in example.frames {
      let key: UInt32? = example.receiver == .server ? 0x37FA_213D : nil
      WebSocketFrameEncoder.encode(
        opcode: frame.opcode, payload: frame.payload, fin: frame.fin, maskingKey: key, into: &wire)
    }
    #expect(wire.readableBytesArray == example.wire)
  }

  /// An idle connection keeps no receive buffer: the decoder holds one only while a frame is partly read, and
  /// releases it (whatever its size) once every byte read is returned as frames.
  @Test func theReceiveBufferIsReleasedOnceDrained() throws {
    var decoder = WebSocketFrameDecoder(role: .client, maxFramePayload: 1 << 20)
    #expect(!decoder.holdsBuffer)
    let wire: [UInt8] = hexBytes("81 05 48 65 6c 6c 6f") + hexBytes("82 02 01 02")
    wire[..<3].withUnsafeBytes { decoder.append($0) }
    #expect(try decoder.nextFrame() == nil)
    #expect(decoder.holdsBuffer, "a partial frame is buffered")
    wire[3...].withUnsafeBytes { decoder.append($0) }
    #expect(try decoder.nextFrame()?.payload == Self.hello)
    #expect(decoder.holdsBuffer, "the second frame is still buffered")
    #expect(try decoder.nextFrame()?.payload == ByteBuffer(bytes: [1, 2]))
    #expect(!decoder.holdsBuffer, "a drained decoder keeps no buffer")
    #expect(try decoder.nextFrame() == nil)
  }

  @Test func binary256UsesA16BitLength() throws {
    let payload = (0..<256).map { UInt8(truncatingIfNeeded: $0) }
    let wire = encodedFrame(.binary, payload)
    #expect(Array(wire.prefix(4)) == hexBytes("82 7E 01 00"))
    #expect(wire.count == 4 + 256)
    #expect(Array(wire.dropFirst(4)) == payload)
    let frames = try decodeFrames(wire, role: .client).get()
    #expect(frames == [WebSocketFrame(opcode: .binary, payload: ByteBuffer(bytes: payload))])
  }

  @Test func binary64KiBUsesA64BitLength() throws {
    let payload = (0..<65536).map { UInt8(truncatingIfNeeded: $0 &* 7) }
    let wire = encodedFrame(.binary, payload)
    #expect(Array(wire.prefix(10)) == hexBytes("82 7F 00 00 00 00 00 01 00 00"))
    #expect(wire.count == 10 + 65536)
    let frames = try decodeFrames(wire, role: .client).get()
    #expect(frames == [WebSocketFrame(opcode: .binary, payload: ByteBuffer(bytes: payload))])
  }

  // MARK: Round trips

  @Test(arguments: [0, 1, 125, 126, 127, 65535, 65536, 70000], [false, true])
  func roundTripsEveryLengthEncoding(length: Int, masked: Bool) throws {
    var random = SplitMix64(seed: UInt64(length))
    let payload = random.bytes(length)
    let key: UInt32? = masked ? 0xA1B2_C3D4 : nil
    let wire = encodedFrame(.binary, payload, fin: false, maskingKey: key)

    let lengthBytes = length < 126 ? 0 : length < 65536 ? 2 : 8
    #expect(wire.count == 2 + lengthBytes + (masked ? 4 : 0) + length)
    #expect(wire[0] == 0x02)
    #expect(wire[1] & 0x80 == (masked ? 0x80 : 0))
    if masked && length >= 8 {
      // The payload really is masked on the wire.
      #expect(Array(wire.suffix(length)) != payload)
    }

    let frames = try decodeFrames(wire, role: masked ? .server : .client).get()
    #expect(frames == [WebSocketFrame(fin: false, opcode: .binary, payload: ByteBuffer(bytes: payload))])
  }

  @Test func maskingMatchesTheRFCDefinitionAtEveryLengthAndKey() throws {
    // The encoder and decoder mask a word at a time; compare with byte-wise `payload[i] ^ key[i % 4]` for
    // lengths around the word size and an odd large one, so the tail handling is exercised.
    var random = SplitMix64(seed: 55)
    for length in Array(0...40) + [1021, 70001] {
      let payload = random.bytes(length)
      let key = UInt32.random(in: .min ... .max, using: &random)
      let keyBytes = withUnsafeBytes(of: key.bigEndian) { Array($0) }
      let expected = payload.enumerated().map { $0.element ^ keyBytes[$0.offset % 4] }

      let wire = encodedFrame(.binary, payload, maskingKey: key)
      #expect(Array(wire.suffix(length + 4)) == keyBytes + expected, "length \(length)")
      let frames = try decodeFrames(wire, role: .server).get()
      #expect(frames.map(\.payload) == [ByteBuffer(bytes: payload)], "length \(length)")
    }
  }

  @Test func encodesFrameFromByteBufferWithReaderOffset() {
    var payload = ByteBuffer(string: "xxHello")
    payload.moveReaderIndex(forwardBy: 2)
    var wire = ByteBuffer()
    WebSocketFrameEncoder.encode(opcode: .text, payload: payload, into: &wire)
    #expect(wire.readableBytesArray == hexBytes("81 05 48 65 6c 6c 6f"))
  }

  @Test func encodesIntoTheBufferThatHoldsThePayload() {
    var buffer = ByteBuffer(string: "Hello")
    WebSocketFrameEncoder.encode(opcode: .text, payload: buffer, into: &buffer)
    #expect(buffer.readableBytesArray == Array("Hello".utf8) + hexBytes("81 05 48 65 6c 6c 6f"))
  }

  // MARK: Input splits

  /// Several frames of every kind and length encoding, masked as a client sends them.
  static func mixedStream() -> (wire: [UInt8], frames: [WebSocketFrame]) {
    var random = SplitMix64(seed: 7)
    let specs: [(WebSocketOpcode, Bool, Int)] = [
      (.text, false, 3), (.ping, true, 0), (.continuation, false, 130), (.pong, true, 125),
      (.continuation, true, 1), (.binary, true, 300), (.close, true, 2), (.binary, true, 0),
    ]
    var wire: [UInt8] = []
    var frames: [WebSocketFrame] = []
    for (opcode, fin, length) in specs {
      let payload = random.bytes(length)
      wire += encodedFrame(
        opcode, payload, fin: fin, maskingKey: UInt32.random(in: 1 ... .max, using: &random))
      frames.append(WebSocketFrame(fin: fin, opcode: opcode, payload: ByteBuffer(bytes: payload)))
    }
    return (wire, frames)
  }

  @Test func decodesSeveralFramesFromOneAppend() throws {
    let (wire, frames) = Self.mixedStream()
    var decoder = WebSocketFrameDecoder(role: .server, maxFramePayload: 1000)
    wire.withUnsafeBytes { decoder.append($0) }
    var decoded: [WebSocketFrame] = []
    while let frame = try decoder.nextFrame() { decoded.append(frame) }
    #expect(decoded == frames)
    #expect(decoder.bufferedBytes == 0)
  }

  @Test func byteByByteGivesTheSameFrames() throws {
    let (wire, frames) = Self.mixedStream()
    let decoded = try decodeFrames(wire, pieces: Array(repeating: 1, count: wire.count)).get()
    #expect(decoded == frames)
  }

  @Test func everyTwoPartSplitGivesTheSameFrames() throws {
    let (wire, frames) = Self.mixedStream()
    for split in 0...wire.count {
      let decoded = try decodeFrames(wire, pieces: [split]).get()
      #expect(decoded == frames, "split at \(split)")
    }
  }

  @Test func partialFrameStaysBufferedUntilComplete() throws {
    let wire = hexBytes("81 85 37 fa 21 3d 7f 9f 4d 51 58")
    var decoder = WebSocketFrameDecoder(role: .server, maxFramePayload: 125)
    decoder.append(ByteBuffer(bytes: wire.prefix(7)))
    #expect(try decoder.nextFrame() == nil)
    #expect(decoder.bufferedBytes == 7)
    decoder.append(ByteBuffer(bytes: wire.dropFirst(7)))
    #expect(try decoder.nextFrame() == WebSocketFrame(opcode: .text, payload: Self.hello))
    #expect(try decoder.nextFrame() == nil)
    #expect(decoder.bufferedBytes == 0)
  }

  // MARK: Violations

  struct Violation: Sendable, CustomTestStringConvertible {
    var name: String
    var wire: [UInt8]
    var receiver: WebSocketRole = .server
    var code: WebSocketCloseCode = .protocolError
    var testDescription: String { name }
  }

  static let key = "01 02 03 04"

  static let violations: [Violation] = [
    Violation(name: "RSV1 set", wire: hexBytes("c1 80 \(key)")),
    Violation(name: "RSV2 set", wire: hexBytes("a1 80 \(key)")),
    Violation(name: "RSV3 set", wire: hexBytes("91 80 \(key)")),
    Violation(name: "RSV set on a control frame", wire: hexBytes("c9 80 \(key)")),
    Violation(name: "reserved data opcode 3", wire: hexBytes("83 80 \(key)")),
    Violation(name: "reserved data opcode 7", wire: hexBytes("87 80 \(key)")),
    Violation(name: "reserved control opcode 0xB", wire: hexBytes("8b 80 \(key)")),
    Violation(name: "reserved control opcode 0xF", wire: hexBytes("8f 80 \(key)")),
    Violation(
      name: "ping longer than 125 bytes",
      wire: hexBytes("89 fe 00 7e \(key)") + Array(repeating: 0, count: 126)),
    Violation(name: "close with 64-bit length", wire: hexBytes("88 ff 00 00 00 00 00 01 00 00 \(key)")),
    Violation(name: "fragmented ping", wire: hexBytes("09 80 \(key)")),
    Violation(name: "fragmented close", wire: hexBytes("08 82 \(key) 03 e8")),
    Violation(name: "fragmented pong", wire: hexBytes("0a 80 \(key)")),
    Violation(name: "server receives an unmasked frame", wire: hexBytes("81 05 48 65 6c 6c 6f")),
    Violation(
      name: "client receives a masked frame", wire: hexBytes("81 85 37 fa 21 3d 7f 9f 4d 51 58"),
      receiver: .client),
    Violation(
      name: "64-bit length with the top bit set", wire: hexBytes("82 ff 80 00 00 00 00 00 00 00 \(key)")),
    Violation(name: "64-bit length all ones", wire: hexBytes("82 ff ff ff ff ff ff ff ff ff \(key)")),
    Violation(name: "16-bit length for 0 bytes", wire: hexBytes("82 fe 00 00 \(key)")),
    Violation(
      name: "16-bit length for 125 bytes",
      wire: hexBytes("82 fe 00 7d \(key)") + Array(repeating: 0, count: 125)),
    Violation(name: "64-bit length for 125 bytes", wire: hexBytes("82 ff 00 00 00 00 00 00 00 7d \(key)")),
    Violation(name: "64-bit length for 65535 bytes", wire: hexBytes("82 ff 00 00 00 00 00 00 ff ff \(key)")),
    Violation(
      name: "frame over the limit (16-bit length)", wire: hexBytes("82 fe 03 e9 \(key)"), code: .messageTooBig
    ),
    Violation(
      name: "frame over the limit (64-bit length)", wire: hexBytes("82 ff 00 00 00 01 00 00 00 00 \(key)"),
      code: .messageTooBig),
    Violation(
      name: "continuation over the limit", wire: hexBytes("80 fe ff ff \(key)"), code: .messageTooBig),
  ]

  @Test(arguments: violations)
  func violationFailsWithItsCloseCode(_ violation: Violation) {
    let result = decodeFrames(violation.wire, role: violation.receiver, maxFramePayload: 1000)
    #expect(closeCode(result) == violation.code)
  }

  @Test(arguments: violations)
  func violationFailsTheSameWayByteByByte(_ violation: Violation) {
    let whole = decodeFrames(violation.wire, role: violation.receiver, maxFramePayload: 1000)
    let pieces = Array(repeating: 1, count: violation.wire.count)
    let split = decodeFrames(violation.wire, role: violation.receiver, maxFramePayload: 1000, pieces: pieces)
    #expect(closeCode(split) == violation.code)
    #expect(closeCode(split) == closeCode(whole))
  }

  @Test(arguments: violations)
  func violationAfterAValidFrameStillYieldsTheValidFrame(_ violation: Violation) throws {
    let key: UInt32? = violation.receiver == .server ? 0x0102_0304 : nil
    let valid = encodedFrame(.text, Array("ok".utf8), maskingKey: key)
    var decoder = WebSocketFrameDecoder(role: violation.receiver, maxFramePayload: 1000)
    (valid + violation.wire).withUnsafeBytes { decoder.append($0) }
    #expect(try decoder.nextFrame() == WebSocketFrame(opcode: .text, payload: ByteBuffer(string: "ok")))
    let error = #expect(throws: WebSocketError.self) { try decoder.nextFrame() }
    #expect(error?.closeCode == violation.code)
  }

  @Test func rsvViolationIsReportedFromTheFirstTwoBytes() {
    // No need to wait for the length, key or payload of a frame that is already wrong.
    #expect(closeCode(decodeFrames(hexBytes("c1 ff"))) == .protocolError)
  }

  @Test(arguments: ["82 fe 03 e9", "82 ff 00 00 00 01 00 00 00 00"])
  func oversizedFrameIsRefusedFromItsHeaderAlone(header: String) {
    // Only the header is appended: the payload (4 GiB in the second case), and even the masking key, never
    // has to arrive.
    var decoder = WebSocketFrameDecoder(role: .server, maxFramePayload: 1000)
    decoder.append(ByteBuffer(bytes: hexBytes(header)))
    let error = #expect(throws: WebSocketError.self) { try decoder.nextFrame() }
    #expect(error?.closeCode == .messageTooBig)
  }

  @Test func frameExactlyAtTheLimitIsAccepted() throws {
    let payload = [UInt8](repeating: 0x61, count: 1000)
    let frames = try decodeFrames(encodedFrame(.binary, payload, maskingKey: 9), maxFramePayload: 1000).get()
    #expect(frames.map(\.payload.readableBytes) == [1000])
    #expect(
      closeCode(decodeFrames(encodedFrame(.binary, payload, maskingKey: 9), maxFramePayload: 999))
        == .messageTooBig)
  }

  @Test func minimalLengthBoundariesAreAccepted() throws {
    // 126 is the smallest 16-bit length and 65536 the smallest 64-bit one (unmasked, client side).
    let frames = try decodeFrames(
      hexBytes("82 7e 00 7e") + Array(repeating: 1, count: 126) + hexBytes("82 7f 00 00 00 00 00 01 00 00")
        + Array(repeating: 2, count: 65536), role: .client
    ).get()
    #expect(frames.map(\.payload.readableBytes) == [126, 65536])
  }

  @Test func errorIsStickyAndInputIsDroppedAfterIt() {
    var decoder = WebSocketFrameDecoder(role: .server, maxFramePayload: 100)
    decoder.append(ByteBuffer(bytes: hexBytes("c1 80 01 02 03 04")))
    let first = #expect(throws: WebSocketError.self) { try decoder.nextFrame() }
    decoder.append(ByteBuffer(bytes: encodedFrame(.text, [0x61], maskingKey: 1)))
    let second = #expect(throws: WebSocketError.self) { try decoder.nextFrame() }
    #expect(first != nil)
    #expect(first == second)
    #expect(decoder.bufferedBytes == 0)
  }

  @Test func opcodeControlClassification() {
    #expect(WebSocketOpcode.allControl == [.close, .ping, .pong])
  }
}

extension WebSocketOpcode {
  static var allControl: [WebSocketOpcode] {
    [.continuation, .text, .binary, .close, .ping, .pong].filter(\.isControl)
  }
}
