import ByteBuffers
import Testing
import Web

@Suite struct WebSmokeTests {
  @Test func webReexportsByteBuffer() {
    #expect(ByteBuffer(string: "x").readableBytes == 1)
  }
}
