/// Why a message could not be parsed; `status` is what a server answers before closing.
///
/// A decoder that throws one is finished: the connection cannot be resynchronised, so the server answers
/// `status` (with `Connection: close`) and closes, and a client closes.
public struct HTTPParseError: Error, Equatable, Sendable, CustomStringConvertible {
  /// The class of failure; it decides `status`.
  public enum Kind: Equatable, Sendable {
    /// The bytes are not HTTP/1.x: bad syntax, bad framing, or a message cut short by EOF (400).
    case malformed
    /// The start line and header fields exceed `HTTPParserLimits.maxHeaderBytes` (431).
    case headersTooLarge
    /// The body exceeds `HTTPParserLimits.maxBodyBytes` (413).
    case bodyTooLarge
    /// A well-formed message of an HTTP version other than 1.0 or 1.1 (505).
    case unsupportedVersion
  }

  public var kind: Kind
  /// Names the problem, e.g. "invalid character in header name while parsing headers".
  public var detail: String
  /// What a server answers: malformed → 400, headersTooLarge → 431, bodyTooLarge → 413,
  /// unsupportedVersion → 505.
  public var status: HTTPStatus

  /// An error of `kind`, with the status that kind calls for.
  public init(kind: Kind, detail: String) {
    self.kind = kind
    self.detail = detail
    switch kind {
    case .malformed: status = .badRequest
    case .headersTooLarge: status = .requestHeaderFieldsTooLarge
    case .bodyTooLarge: status = .payloadTooLarge
    case .unsupportedVersion: status = .httpVersionNotSupported
    }
  }

  public var description: String { "HTTP parse error \(status): \(detail)" }
}

/// Limits a decoder enforces on each message, so a peer cannot make it buffer without bound.
public struct HTTPParserLimits: Sendable {
  /// Bytes of request target or status reason plus every header name and value, and 4 per header line for
  /// its ": " and CRLF (trailers included), counted as they arrive; exceeding it fails with `headersTooLarge`.
  /// Default 16 KiB. (http-parser adds its own 80 KiB ceiling on the whole head, which also fails with
  /// `headersTooLarge`.)
  public var maxHeaderBytes: Int
  /// Bytes of de-chunked body. A Content-Length above it fails with `bodyTooLarge` as soon as the head is
  /// complete, before any body arrives; a chunked or EOF-delimited body fails as soon as it would exceed it.
  /// Default 1 MiB.
  public var maxBodyBytes: Int

  public init(maxHeaderBytes: Int = 16 * 1024, maxBodyBytes: Int = 1024 * 1024) {
    self.maxHeaderBytes = maxHeaderBytes
    self.maxBodyBytes = maxBodyBytes
  }
}
