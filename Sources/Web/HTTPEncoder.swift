import ByteBuffers

/// Writes HTTP/1.x messages as bytes. Pure functions; the caller owns the buffer.
///
/// Header names and values are already free of CR, LF and NUL (`HTTPHeaders` sanitizes them); the method,
/// target and reason phrase are made safe here, so nothing a caller passes can start another line.
public enum HTTPEncoder {
  /// Appends the status line and headers and CRLF. Adds `Content-Length: N` when `contentLength` is given and
  /// no Content-Length/Transfer-Encoding header is present.
  public static func encodeResponseHead(
    _ head: HTTPResponseHead, contentLength: Int?, into buffer: inout ByteBuffer
  ) {
    appendVersion(head.version, into: &buffer)
    buffer.append(byte: space)
    buffer.append(decimal: head.status.code)
    buffer.append(byte: space)
    appendText(head.status.reasonPhrase, into: &buffer)
    appendLineEnd(into: &buffer)
    appendHeaders(head.headers, contentLength: contentLength, into: &buffer)
  }

  /// Appends the head and the body with Content-Length. A 1xx, 204 or 304 response gets neither body bytes
  /// nor Content-Length.
  public static func encodeResponse(_ response: HTTPResponse, into buffer: inout ByteBuffer) {
    let code = response.status.code
    let bodiless = (100..<200).contains(code) || code == 204 || code == 304
    encodeResponseHead(
      response.head, contentLength: bodiless ? nil : response.body.readableBytes, into: &buffer)
    if !bodiless { buffer.append(response.body) }
  }

  /// Appends the request line and headers and CRLF. Adds `Content-Length: N` when `contentLength` is given and
  /// no Content-Length/Transfer-Encoding header is present.
  public static func encodeRequestHead(
    _ head: HTTPRequestHead, contentLength: Int?, into buffer: inout ByteBuffer
  ) {
    // A method is a token; anything else would break the request line, so such bytes become "_".
    for byte in head.method.rawValue.utf8 {
      buffer.append(byte: HTTPMessageParser.isTokenByte(byte) ? byte : UInt8(ascii: "_"))
    }
    buffer.append(byte: space)
    appendTarget(head.target, into: &buffer)
    buffer.append(byte: space)
    appendVersion(head.version, into: &buffer)
    appendLineEnd(into: &buffer)
    appendHeaders(head.headers, contentLength: contentLength, into: &buffer)
  }

  /// Appends the head and the body, with Content-Length when the body is not empty or the method is
  /// POST, PUT or PATCH (which servers expect to carry a length even when empty).
  public static func encodeRequest(_ request: HTTPRequest, into buffer: inout ByteBuffer) {
    let method = request.head.method
    let needsLength = !request.body.isEmpty || method == .POST || method == .PUT || method == .PATCH
    encodeRequestHead(
      request.head, contentLength: needsLength ? request.body.readableBytes : nil, into: &buffer)
    buffer.append(request.body)
  }

  /// Appends one chunk of a chunked body: hex size CRLF data CRLF. An empty chunk is NOT written (it would
  /// end the body): use `encodeLastChunk`.
  public static func encodeChunk(_ data: ByteBuffer, into buffer: inout ByteBuffer) {
    guard !data.isEmpty else { return }
    buffer.append(string: String(data.readableBytes, radix: 16))
    appendLineEnd(into: &buffer)
    buffer.append(data)
    appendLineEnd(into: &buffer)
  }

  /// Appends the last chunk and the empty trailer section: "0\r\n\r\n".
  public static func encodeLastChunk(into buffer: inout ByteBuffer) {
    buffer.append(string: "0\r\n\r\n")
  }

  // MARK: - Pieces

  private static let space = UInt8(ascii: " ")
  /// CR LF, as a literal: an array literal or a generic collection would cost an allocation or a witness call per
  /// line (a tenth of a one-mutation batch's answer).
  private static func appendLineEnd(into buffer: inout ByteBuffer) {
    buffer.append("\r\n")
  }

  private static func appendVersion(_ version: HTTPVersion, into buffer: inout ByteBuffer) {
    switch (version.major, version.minor) {
    case (1, 1): buffer.append(string: "HTTP/1.1")  // a literal: no interpolation per response
    case (1, 0): buffer.append(string: "HTTP/1.0")
    default: buffer.append(string: "HTTP/\(version.major).\(version.minor)")
    }
  }

  private static func appendHeaders(
    _ headers: HTTPHeaders, contentLength: Int?, into buffer: inout ByteBuffer
  ) {
    // Literals and digits written in place: a byte at a time, and the length through a `String`, this took ~5,600
    // instructions for a one-mutation batch's answer (callgrind), more than its JSON.
    for (name, value) in headers {
      buffer.append(string: name)
      buffer.append(": ")
      buffer.append(string: value)
      buffer.append("\r\n")
    }
    if let contentLength, headers["Content-Length"] == nil, headers["Transfer-Encoding"] == nil {
      buffer.append("Content-Length: ")
      buffer.append(decimal: contentLength)
      buffer.append("\r\n")
    }
    buffer.append("\r\n")
  }

  /// A reason phrase: CR, LF and NUL become spaces.
  private static func appendText(_ text: String, into buffer: inout ByteBuffer) {
    for byte in text.utf8 {
      buffer.append(byte: byte == 13 || byte == 10 || byte == 0 ? space : byte)
    }
  }

  /// A request target: controls, space and DEL are percent-encoded, so the request line stays one line of
  /// three parts.
  private static func appendTarget(_ target: String, into buffer: inout ByteBuffer) {
    let hex = Array("0123456789ABCDEF".utf8)
    for byte in target.utf8 {
      if byte <= 32 || byte == 127 {
        buffer.append(contentsOf: [UInt8(ascii: "%"), hex[Int(byte >> 4)], hex[Int(byte & 15)]])
      } else {
        buffer.append(byte: byte)
      }
    }
  }
}
