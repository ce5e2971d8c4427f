import ByteBuffers
import EventLoopTestKit
import Testing

@testable import Web

/// Seeded random and mutated input through decoder and assembler together, as a connection would drive them.
/// Every run is deterministic (SplitMix64, fixed seeds), so a failure reproduces.
@Suite struct WebSocketFuzzTests {
  static let maxFramePayload = 256
  static let maxMessageSize = 512
  /// The only close codes the codec may fail with.
  static let codecCodes: Set<UInt16> = [1002, 1007, 1009]

  struct Outcome: Equatable {
    var messages: [WebSocketMessage] = []
    var error: WebSocketError?
  }

  /// Feeds `stream` in pieces of the given sizes (then the rest at once), draining frames into the assembler
  /// after every append, as a connection does; stops at the first error.
  static func run(_ stream: [UInt8], role: WebSocketRole = .server, pieces: [Int] = []) -> Outcome {
    var decoder = WebSocketFrameDecoder(role: role, maxFramePayload: maxFramePayload)
    var assembler = WebSocketMessageAssembler(maxMessageSize: maxMessageSize)
    var outcome = Outcome()
    var offset = 0
    var sizes = pieces[...]
    while offset < stream.count {
      let size = min(sizes.popFirst() ?? stream.count, stream.count - offset)
      stream[offset..<offset + size].withUnsafeBytes { decoder.append($0) }
      offset += size
      do throws(WebSocketError) {
        while let frame = try decoder.nextFrame() {
          if let message = try assembler.push(frame) { outcome.messages.append(message) }
        }
      } catch {
        outcome.error = error
        return outcome
      }
    }
    return outcome
  }

  static func randomPieces(_ total: Int, _ random: inout SplitMix64) -> [Int] {
    var pieces: [Int] = []
    var covered = 0
    while covered < total {
      let size = Int.random(in: 1...max(1, min(total - covered, 24)), using: &random)
      pieces.append(size)
      covered += size
    }
    return pieces
  }

  /// Checks the invariants of one fuzz input: it is decoded the same however it is split, and it either
  /// yields messages or fails with a codec close code.
  static func check(_ stream: [UInt8], _ random: inout SplitMix64, role: WebSocketRole = .server) -> Outcome {
    let whole = Self.run(stream, role: role)
    let split = Self.run(stream, role: role, pieces: Self.randomPieces(stream.count, &random))
    #expect(split == whole, "split changed the outcome of \(hexString(stream))")
    if let error = whole.error {
      #expect(codecCodes.contains(error.closeCode.rawValue), "\(error) for \(hexString(stream))")
    }
    return whole
  }

  // MARK: Valid traffic

  static let textPalette: [Unicode.Scalar] = [
    "a", "z", " ", "\u{0}", "\u{7F}", "\u{80}", "é", "\u{7FF}", "\u{800}", "€", "\u{D7FF}", "\u{E000}",
    "\u{FFFF}", "\u{10000}", "😀", "\u{10FFFF}",
  ]

  static func randomText(_ random: inout SplitMix64, maxScalars: Int) -> String {
    var text = String.UnicodeScalarView()
    for _ in 0..<Int.random(in: 0...maxScalars, using: &random) {
      text.append(textPalette.randomElement(using: &random)!)
    }
    return String(text)
  }

  static func randomControl(_ random: inout SplitMix64) -> (WebSocketOpcode, [UInt8], WebSocketMessage) {
    switch Int.random(in: 0..<3, using: &random) {
    case 0:
      let payload = random.bytes(Int.random(in: 0...125, using: &random))
      return (.ping, payload, .ping(ByteBuffer(bytes: payload)))
    case 1:
      let payload = random.bytes(Int.random(in: 0...20, using: &random))
      return (.pong, payload, .pong(ByteBuffer(bytes: payload)))
    default:
      if Bool.random(using: &random) { return (.close, [], .close(code: nil, reason: "")) }
      let code = WebSocketCloseCode(
        [1000, 1001, 1003, 1008, 1011, 3000, 4999].randomElement(using: &random)!)
      let reason = randomText(&random, maxScalars: 20)
      let payload = WebSocketFrameEncoder.closePayload(code: code, reason: reason)
      let parsedReason = payload.slice(from: 2, count: payload.readableBytes - 2).readableString
      return (.close, payload.readableBytesArray, .close(code: code, reason: parsedReason))
    }
  }

  /// A random conversation: data messages fragmented at random byte offsets (so code points straddle
  /// frames), control frames between fragments, each frame masked with its own key when `masked`. Returns
  /// the wire bytes and the messages an assembler must produce from them, in order.
  static func randomTraffic(_ random: inout SplitMix64, masked: Bool, messages: Int, maxSize: Int)
    -> (wire: [UInt8], messages: [WebSocketMessage])
  {
    var wire: [UInt8] = []
    var expected: [WebSocketMessage] = []
    func emit(_ opcode: WebSocketOpcode, _ payload: [UInt8], fin: Bool, _ random: inout SplitMix64) {
      let key: UInt32? = masked ? UInt32.random(in: .min ... .max, using: &random) : nil
      wire += encodedFrame(opcode, payload, fin: fin, maskingKey: key)
    }
    for _ in 0..<messages {
      if Int.random(in: 0..<4, using: &random) == 0 {
        let (opcode, payload, message) = randomControl(&random)
        emit(opcode, payload, fin: true, &random)
        expected.append(message)
        continue
      }
      let isText = Bool.random(using: &random)
      let bytes: [UInt8]
      if isText {
        bytes = Array(randomText(&random, maxScalars: maxSize / 4).utf8)
        expected.append(.text(String(decoding: bytes, as: UTF8.self)))
      } else {
        bytes = random.bytes(Int.random(in: 0...maxSize, using: &random))
        expected.append(.binary(ByteBuffer(bytes: bytes)))
      }
      let cuts = (0..<Int.random(in: 0...3, using: &random)).map { _ in
        Int.random(in: 0...bytes.count, using: &random)
      }
      let bounds = [0] + cuts.sorted() + [bytes.count]
      var interleaved: [WebSocketMessage] = []
      for index in 0..<bounds.count - 1 {
        let fin = index == bounds.count - 2
        emit(
          index == 0 ? (isText ? .text : .binary) : .continuation,
          Array(bytes[bounds[index]..<bounds[index + 1]]), fin: fin, &random)
        if !fin && Int.random(in: 0..<3, using: &random) == 0 {
          let (opcode, payload, message) = randomControl(&random)
          emit(opcode, payload, fin: true, &random)
          interleaved.append(message)
        }
      }
      // Control frames between fragments come out before the message they interrupt.
      expected.insert(contentsOf: interleaved, at: expected.count - 1)
    }
    return (wire, expected)
  }

  @Test func encodeThenDecodeIsTheIdentity() {
    var random = SplitMix64(seed: 0xC0DEC)
    for round in 0..<1500 {
      let masked = round % 2 == 0
      let (wire, messages) = Self.randomTraffic(
        &random, masked: masked, messages: Int.random(in: 1...4, using: &random), maxSize: 200)
      let outcome = Self.run(
        wire, role: masked ? .server : .client, pieces: Self.randomPieces(wire.count, &random))
      #expect(outcome.error == nil, "round \(round)")
      #expect(outcome.messages == messages, "round \(round)")
    }
  }

  // MARK: Hostile input

  @Test func randomBytesNeverCrashAndFailOnlyWithCodecCodes() {
    var random = SplitMix64(seed: 0xF00D)
    var failures = 0
    for round in 0..<10_000 {
      var stream = random.bytes(Int.random(in: 0...48, using: &random))
      // Half the time make the first header plausible so the fuzzer gets past the first two bytes.
      if round % 2 == 0 && stream.count >= 2 {
        stream[0] &= 0x8F
        stream[1] |= 0x80
      }
      if Self.check(stream, &random).error != nil { failures += 1 }
    }
    #expect(failures > 1000)
  }

  @Test func mutatedValidTrafficNeverCrashesAndFailsOnlyWithCodecCodes() {
    var random = SplitMix64(seed: 0xBADC0DE)
    var outcomes: [UInt16: Int] = [:]
    for _ in 0..<10_000 {
      var (stream, _) = Self.randomTraffic(
        &random, masked: true, messages: Int.random(in: 1...3, using: &random), maxSize: 300)
      for _ in 0..<Int.random(in: 1...3, using: &random) where !stream.isEmpty {
        let position = Int.random(in: 0..<stream.count, using: &random)
        switch Int.random(in: 0..<6, using: &random) {
        case 0: stream[position] ^= 1 << UInt8.random(in: 0...7, using: &random)
        case 1: stream[position] = UInt8.random(in: 0...255, using: &random)
        case 2: stream.insert(contentsOf: random.bytes(Int.random(in: 1...4, using: &random)), at: position)
        case 3:
          stream.removeSubrange(
            position..<min(stream.count, position + Int.random(in: 1...4, using: &random)))
        case 4: stream.removeSubrange(position...)
        default:
          let end = min(stream.count, position + Int.random(in: 1...16, using: &random))
          stream.insert(contentsOf: stream[position..<end], at: end)
        }
      }
      let code = Self.check(stream, &random).error?.closeCode.rawValue ?? 0
      outcomes[code, default: 0] += 1
    }
    // The corpus reaches every outcome, so the checks above were not vacuous.
    for code: UInt16 in [0, 1002, 1007, 1009] {
      #expect(outcomes[code, default: 0] > 20, "outcome \(code): \(outcomes)")
    }
  }
}
