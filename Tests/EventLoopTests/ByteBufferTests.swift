import ByteBuffers
import Testing

@testable import EventLoop

@Suite struct ByteBufferTests {
  @Test func appendAndReadKeepOrder() {
    var buffer = ByteBuffer(capacity: 4)
    buffer.append(string: "hello")
    buffer.append(bigEndian: UInt16(0x0102))
    buffer.append(byte: 0xFF)
    #expect(buffer.readableBytes == 8)
    #expect(buffer.readBytes(5) == Array("hello".utf8))
    #expect(buffer.readBytes(3) == [1, 2, 0xFF])
    #expect(buffer.isEmpty)
    #expect(buffer.readBytes(1) == nil)
  }

  @Test func copiesAreIndependent() {
    var a = ByteBuffer(string: "abc")
    let b = a
    a.append(string: "def")
    #expect(b.readableString == "abc")
    #expect(a.readableString == "abcdef")
    var c = a
    c.withUnsafeMutableReadableBytes { $0[0] = UInt8(ascii: "X") }
    #expect(a.readableString == "abcdef")
    #expect(c.readableString == "Xbcdef")
  }

  @Test func growsAndCompactsAcrossManyAppends() {
    var buffer = ByteBuffer(capacity: 16)
    var expected: [UInt8] = []
    for i in 0..<10_000 {
      let byte = UInt8(truncatingIfNeeded: i &* 31)
      buffer.append(byte: byte)
      expected.append(byte)
      if i % 7 == 0, let first = buffer.readBytes(3) {
        #expect(first == Array(expected.prefix(3)))
        expected.removeFirst(3)
      }
    }
    #expect(buffer.readableBytesArray == expected)
  }

  @Test func sliceAndEquality() {
    let buffer = ByteBuffer(string: "0123456789")
    #expect(buffer.slice(from: 2, count: 3) == ByteBuffer(string: "234"))
    #expect(buffer != ByteBuffer(string: "012345678"))
    #expect(buffer[9] == UInt8(ascii: "9"))
  }

  /// Decimal digits as `String(value)` writes them, for every magnitude, both signs and the extremes, after
  /// whatever the buffer holds, with literals between them.
  @Test func decimalsAndLiteralsAreWrittenAsTheirTextWouldBe() {
    var values: [Int] = [0, 1, -1, 9, 10, -10, 99, 100, Int.max, Int.min, Int.max - 1, Int.min + 1]
    var power = 1
    for _ in 0..<18 {
      power *= 10
      values += [power - 1, power, power + 1, -power]
    }
    var buffer = ByteBuffer(capacity: 1)
    var expected = ""
    for value in values {
      buffer.append(decimal: value)
      buffer.append(", ")
      expected += "\(value), "
    }
    #expect(buffer.readBytes(buffer.readableBytes).map { String(decoding: $0, as: UTF8.self) } == expected)
    // A literal outside ASCII goes in as its UTF-8 bytes.
    let one: StaticString = "é"
    buffer.append(one)
    buffer.append("\n")
    #expect(buffer.readBytes(buffer.readableBytes) == Array("é\n".utf8))
  }
}
