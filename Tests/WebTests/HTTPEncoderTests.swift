import ByteBuffers
import Testing

@testable import Web

@Suite struct HTTPEncoderTests {
  typealias H = HTTPCodecHarness

  private func encoded(_ write: (inout ByteBuffer) -> Void) -> String {
    var buffer = ByteBuffer()
    write(&buffer)
    return buffer.readableString
  }

  @Test func responseExactBytes() {
    let text = encoded { HTTPEncoder.encodeResponse(.text(.ok, "hi"), into: &$0) }
    #expect(
      text == "HTTP/1.1 200 OK\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: 2\r\n\r\nhi")
  }

  @Test func emptyResponseStillSaysContentLengthZero() {
    let text = encoded { HTTPEncoder.encodeResponse(HTTPResponse(status: .notFound), into: &$0) }
    #expect(text == "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n")
  }

  @Test(arguments: [101, 103, 204, 304])
  func bodilessStatusesGetNeitherBodyNorContentLength(code: Int) {
    let response = HTTPResponse(
      status: HTTPStatus(code: code, reasonPhrase: "R"), body: ByteBuffer(string: "xyz"))
    let text = encoded { HTTPEncoder.encodeResponse(response, into: &$0) }
    #expect(text == "HTTP/1.1 \(code) R\r\n\r\n")
  }

  @Test func existingFramingHeadersAreNotDuplicated() {
    let withLength = HTTPResponseHead(status: .ok, headers: ["Content-Length": "7"])
    #expect(
      encoded { HTTPEncoder.encodeResponseHead(withLength, contentLength: 3, into: &$0) }
        == "HTTP/1.1 200 OK\r\nContent-Length: 7\r\n\r\n")
    let chunked = HTTPResponseHead(status: .ok, headers: ["transfer-encoding": "chunked"])
    #expect(
      encoded { HTTPEncoder.encodeResponseHead(chunked, contentLength: 3, into: &$0) }
        == "HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n")
    let noLength = HTTPResponseHead(status: .ok, version: .http1_0)
    #expect(
      encoded { HTTPEncoder.encodeResponseHead(noLength, contentLength: nil, into: &$0) }
        == "HTTP/1.0 200 OK\r\n\r\n")
  }

  @Test func requestExactBytes() {
    let get = HTTPRequest(head: HTTPRequestHead(method: .GET, target: "/a?b=1", headers: ["Host": "h"]))
    #expect(encoded { HTTPEncoder.encodeRequest(get, into: &$0) } == "GET /a?b=1 HTTP/1.1\r\nHost: h\r\n\r\n")

    let emptyPost = HTTPRequest(head: HTTPRequestHead(method: .POST, target: "/p"))
    #expect(
      encoded { HTTPEncoder.encodeRequest(emptyPost, into: &$0) }
        == "POST /p HTTP/1.1\r\nContent-Length: 0\r\n\r\n")

    let put = HTTPRequest(
      head: HTTPRequestHead(method: .PUT, target: "/x", version: .http1_0, headers: ["Host": "h"]),
      body: ByteBuffer(string: "data"))
    #expect(
      encoded { HTTPEncoder.encodeRequest(put, into: &$0) }
        == "PUT /x HTTP/1.0\r\nHost: h\r\nContent-Length: 4\r\n\r\ndata")

    let deleteWithBody = HTTPRequest(
      head: HTTPRequestHead(method: .DELETE, target: "/d"), body: ByteBuffer(string: "z"))
    #expect(
      encoded { HTTPEncoder.encodeRequest(deleteWithBody, into: &$0) }
        == "DELETE /d HTTP/1.1\r\nContent-Length: 1\r\n\r\nz")
  }

  @Test func requestHeadWithoutLength() {
    let head = HTTPRequestHead(method: .POST, target: "/s", headers: ["Transfer-Encoding": "chunked"])
    #expect(
      encoded { HTTPEncoder.encodeRequestHead(head, contentLength: nil, into: &$0) }
        == "POST /s HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n")
  }

  @Test func chunkEncoding() {
    let data = ByteBuffer(bytes: [UInt8](repeating: UInt8(ascii: "q"), count: 26))
    let text = encoded { buffer in
      HTTPEncoder.encodeChunk(ByteBuffer(string: "hello"), into: &buffer)
      HTTPEncoder.encodeChunk(ByteBuffer(), into: &buffer)  // must not end the body early
      HTTPEncoder.encodeChunk(data, into: &buffer)
      HTTPEncoder.encodeLastChunk(into: &buffer)
    }
    #expect(text == "5\r\nhello\r\n1a\r\n" + String(repeating: "q", count: 26) + "\r\n0\r\n\r\n")
  }

  @Test func lineBreaksCannotBeInjected() throws {
    let head = HTTPRequestHead(
      method: HTTPMethod("GET X"), target: "/a b\r\nEvil: 1",
      headers: HTTPHeaders([("X-A", "v\r\nEvil: 2"), ("X-B\r\n", "w")]))
    var buffer = ByteBuffer()
    HTTPEncoder.encodeRequestHead(head, contentLength: nil, into: &buffer)
    #expect(
      buffer.readableString == "GET_X /a%20b%0D%0AEvil:%201 HTTP/1.1\r\nX-A: v  Evil: 2\r\nX-B  : w\r\n\r\n")

    let status = HTTPStatus(code: 200, reasonPhrase: "OK\r\nEvil: 3")
    let text = encoded {
      HTTPEncoder.encodeResponseHead(HTTPResponseHead(status: status), contentLength: 0, into: &$0)
    }
    #expect(text == "HTTP/1.1 200 OK  Evil: 3\r\nContent-Length: 0\r\n\r\n")
    let decoded = H.runResponses([H.bytes(text)])
    #expect(decoded.responses.count == 1)
    #expect(decoded.responses.first?.headers["Evil"] == nil)
  }

  @Test func requestRoundTrip() throws {
    let requests = [
      HTTPRequest(
        head: HTTPRequestHead(
          method: .POST, target: "/v1/pages?x=%20", headers: ["Host": "h", "X-A": "a, b"]),
        body: ByteBuffer(bytes: (0..<300).map { UInt8(truncatingIfNeeded: $0) })),
      HTTPRequest(
        head: HTTPRequestHead(method: .GET, target: "/", version: .http1_0, headers: ["Host": "h"])),
      HTTPRequest(head: HTTPRequestHead(method: .PATCH, target: "/p")),
    ]
    var buffer = ByteBuffer()
    for request in requests { HTTPEncoder.encodeRequest(request, into: &buffer) }
    let run = H.runRequests([buffer.readableBytesArray])
    #expect(run.error == nil)
    #expect(run.requests.map(\.head.method) == requests.map(\.head.method))
    #expect(run.requests.map(\.head.target) == requests.map(\.head.target))
    #expect(run.requests.map(\.head.version) == requests.map(\.head.version))
    #expect(run.requests.map(\.body) == requests.map(\.body))
    // The decoded head has every header sent plus the Content-Length the encoder added.
    #expect(run.requests[0].headers == ["Host": "h", "X-A": "a, b", "Content-Length": "300"])
    #expect(run.requests[1].headers == requests[1].headers)
  }

  @Test func responseRoundTripIncludingChunked() throws {
    let response = HTTPResponse(
      status: HTTPStatus(code: 409, reasonPhrase: "Conflict"), headers: ["ETag": "\"v2\""],
      body: ByteBuffer(string: "stale"))
    var buffer = ByteBuffer()
    HTTPEncoder.encodeResponse(response, into: &buffer)
    var streamed = HTTPResponseHead(status: .ok, headers: ["Transfer-Encoding": "chunked"])
    HTTPEncoder.encodeResponseHead(streamed, contentLength: nil, into: &buffer)
    for piece in ["first ", "second ", "third"] {
      HTTPEncoder.encodeChunk(ByteBuffer(string: piece), into: &buffer)
    }
    HTTPEncoder.encodeLastChunk(into: &buffer)

    let run = H.runResponses([buffer.readableBytesArray])
    #expect(run.error == nil)
    #expect(run.responses.count == 2)
    var expected = response
    expected.head.headers.add(name: "Content-Length", value: "5")
    #expect(run.responses.first == expected)
    streamed.headers = ["Transfer-Encoding": "chunked"]
    #expect(
      run.responses.last == HTTPResponse(head: streamed, body: ByteBuffer(string: "first second third")))
  }
}
