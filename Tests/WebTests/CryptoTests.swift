import EventLoopTestKit
import Testing

@testable import Web

/// Digests, HMAC, randomness, constant-time comparison, Base64 and the WebSocket handshake values, against
/// published test vectors.
@Suite struct CryptoTests {
  // MARK: Digests and HMAC

  @Test func sha1KnownVectors() {
    #expect(hexString(Crypto.sha1(Array("abc".utf8))) == "a9993e364706816aba3e25717850c26c9cd0d89d")
    #expect(hexString(Crypto.sha1([UInt8]())) == "da39a3ee5e6b4b0d3255bfef95601890afd80709")
    #expect(
      hexString(Crypto.sha1(Array("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq".utf8)))
        == "84983e441c3bd26ebaae4aa1f95129e5e54670f1")
  }

  @Test func sha256KnownVectors() {
    #expect(
      hexString(Crypto.sha256(Array("abc".utf8)))
        == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
    #expect(
      hexString(Crypto.sha256([UInt8]()))
        == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
  }

  @Test func digestsAcceptNonContiguousCollections() {
    // A reversed view has no contiguous storage; the bytes must still be hashed in collection order.
    let reversed = Array("cba".utf8).reversed()
    #expect(Crypto.sha256(reversed) == Crypto.sha256(Array("abc".utf8)))
    #expect(Crypto.sha1("abc".utf8) == Crypto.sha1(Array("abc".utf8)))
  }

  @Test func hmacSHA256RFC4231() {
    // Test case 1: 20-byte key of 0x0b.
    #expect(
      hexString(Crypto.hmacSHA256(key: [UInt8](repeating: 0x0B, count: 20), message: Array("Hi There".utf8)))
        == "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7")
    // Test case 2: key "Jefe".
    #expect(
      hexString(
        Crypto.hmacSHA256(key: Array("Jefe".utf8), message: Array("what do ya want for nothing?".utf8)))
        == "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843")
    // Test case 6: a key longer than the block size is hashed first.
    #expect(
      hexString(
        Crypto.hmacSHA256(
          key: [UInt8](repeating: 0xAA, count: 131),
          message: Array("Test Using Larger Than Block-Size Key - Hash Key First".utf8)))
        == "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54")
  }

  @Test func hmacWithEmptyKeyAndMessage() {
    // Known value of HMAC-SHA256("", "").
    #expect(
      hexString(Crypto.hmacSHA256(key: [UInt8](), message: [UInt8]()))
        == "b613679a0814d9ec772f95d778c35fc5ff1697c493715653c6c712144292c5ad")
  }

  // MARK: Randomness and comparison

  @Test func randomBytesHaveTheRequestedLengthAndVary() {
    #expect(Crypto.randomBytes(0).isEmpty)
    let a = Crypto.randomBytes(32)
    let b = Crypto.randomBytes(32)
    #expect(a.count == 32)
    #expect(a != b)
    #expect(Set(Crypto.randomBytes(4096)).count > 200)  // all 256 values expected; 200 leaves no flakiness
  }

  @Test func randomUInt32Varies() {
    let values = (0..<8).map { _ in Crypto.randomUInt32() }
    #expect(Set(values).count > 1)
    #expect(values.reduce(0, |) > UInt32(UInt16.max))  // the high bytes are filled too
  }

  @Test func constantTimeEquals() {
    let a: [UInt8] = [1, 2, 3, 4]
    #expect(Crypto.constantTimeEquals(a, [1, 2, 3, 4]))
    #expect(!Crypto.constantTimeEquals(a, [1, 2, 3, 5]))
    #expect(!Crypto.constantTimeEquals(a, [0, 2, 3, 4]))
    #expect(!Crypto.constantTimeEquals(a, [1, 2, 3]))
    #expect(!Crypto.constantTimeEquals(a, [1, 2, 3, 4, 5]))
    #expect(Crypto.constantTimeEquals([UInt8](), [UInt8]()))
    #expect(!Crypto.constantTimeEquals([UInt8](), [0]))
    #expect(Crypto.constantTimeEquals(a.reversed(), [4, 3, 2, 1]))
  }

  // MARK: Base64

  static let rfc4648: [(String, String)] = [
    ("", ""), ("f", "Zg=="), ("fo", "Zm8="), ("foo", "Zm9v"), ("foob", "Zm9vYg=="), ("fooba", "Zm9vYmE="),
    ("foobar", "Zm9vYmFy"),
  ]

  @Test(arguments: rfc4648)
  func base64RFC4648Vectors(plain: String, encoded: String) {
    #expect(Base64.encode(Array(plain.utf8)) == encoded)
    #expect(Base64.decode(encoded) == Array(plain.utf8))
  }

  @Test func base64UsesTheStandardAlphabet() {
    #expect(Base64.encode([0xFB, 0xFF]) == "+/8=")
    #expect(Base64.decode("+/8=") == [0xFB, 0xFF])
  }

  @Test func base64RoundTripsEveryLengthAndByte() {
    var random = SplitMix64(seed: 64)
    for length in 0...100 {
      let bytes = random.bytes(length)
      let encoded = Base64.encode(bytes)
      #expect(encoded.utf8.count == (length + 2) / 3 * 4)
      #expect(Base64.decode(encoded) == bytes, "length \(length)")
    }
    let all = (0...255).map { UInt8($0) }
    #expect(Base64.decode(Base64.encode(all)) == all)
  }

  @Test(arguments: [
    "Zg=", "Zg", "Z", "Zm9", "Z===", "====", "=Zg=", "Z=g=", "Zg==Zg==", "Zm9v YmFy", " Zm9v", "Zm9v\n",
    "Zm9v\r\n",
    "Zh==", "Zm9=", "Zm-v", "Zm_v", "Zm9v!", "Zé=", "Zm9vYmFy=", "Zm9\u{0}",
  ])
  func base64RejectsInvalidInput(_ input: String) {
    #expect(Base64.decode(input) == nil)
  }

  // MARK: Handshake

  @Test func acceptValueMatchesRFC6455() {
    // RFC 6455 section 1.3 (also checked against Python's hashlib and base64).
    #expect(
      WebSocketHandshake.acceptValue(forKey: "dGhlIHNhbXBsZSBub25jZQ==") == "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=")
  }

  @Test func validKeysDecodeToSixteenBytes() {
    #expect(WebSocketHandshake.isValidKey("dGhlIHNhbXBsZSBub25jZQ=="))
    #expect(WebSocketHandshake.isValidKey(Base64.encode([UInt8](repeating: 0xFF, count: 16))))
  }

  @Test(arguments: [
    "", "dGhlIHNhbXBsZSBub25jZQ", "dGhlIHNhbXBsZSBub25jZQ=", " dGhlIHNhbXBsZSBub25jZQ==",
    "dGhlIHNhbXBsZSBub25jZQ== ", "dGhlIHNhbXBsZSBub25j", "dGhlIHNhbXBsZSBub25jZWVl",
  ])
  func invalidKeysAreRejected(_ key: String) {
    #expect(!WebSocketHandshake.isValidKey(key))
  }

  @Test func keysOfOtherLengthsAreRejected() {
    #expect(!WebSocketHandshake.isValidKey(Base64.encode([UInt8](repeating: 1, count: 15))))
    #expect(!WebSocketHandshake.isValidKey(Base64.encode([UInt8](repeating: 1, count: 17))))
  }

  @Test func madeKeysAreValidAndFresh() {
    let a = WebSocketHandshake.makeKey()
    let b = WebSocketHandshake.makeKey()
    #expect(WebSocketHandshake.isValidKey(a))
    #expect(a.utf8.count == 24)
    #expect(a != b)
  }

  @Test func handshakeConstants() {
    #expect(WebSocketHandshake.guid == "258EAFA5-E914-47DA-95CA-C5AB0DC85B11")
    #expect(WebSocketHandshake.supportedVersion == "13")
  }
}
