@testable import Web

/// Feeds the HTTP decoders the way a connection does, for the codec tests.
enum HTTPCodecHarness {
  static func bytes(_ text: String) -> [UInt8] { Array(text.utf8) }

  /// Everything a sequence of `decode` calls produced: requests in order, the upgrade (if any), the bytes left
  /// for the new protocol, and the error that ended decoding (if any).
  struct RequestRun: Equatable {
    var requests: [HTTPRequest] = []
    var upgrade: HTTPRequest?
    var leftover: [UInt8] = []
    var error: HTTPParseError?
    /// `consumed` of every call, in order.
    var consumedTrace: [Int] = []
  }

  static func decode(
    _ decoder: HTTPRequestDecoder, _ bytes: [UInt8], maxRequests: Int = .max
  ) -> Result<HTTPRequestDecoder.Output, HTTPParseError> {
    bytes.withUnsafeBytes { raw in
      Result { () throws(HTTPParseError) in try decoder.decode(raw, maxRequests: maxRequests) }
    }
  }

  static func decode(_ decoder: HTTPResponseDecoder, _ bytes: [UInt8]) -> Result<
    HTTPResponseDecoder.Output, HTTPParseError
  > {
    bytes.withUnsafeBytes { raw in Result { () throws(HTTPParseError) in try decoder.decode(raw) } }
  }

  /// Feeds `chunks` in order, keeping unconsumed bytes and feeding them again first (as a connection keeps
  /// its read buffer), until the input runs out, an upgrade happens or decoding fails.
  static func runRequests(
    _ chunks: [[UInt8]], maxRequests: Int = .max, limits: HTTPParserLimits = HTTPParserLimits()
  ) -> RequestRun {
    let decoder = HTTPRequestDecoder(limits: limits)
    var run = RequestRun()
    var pending: [UInt8] = []
    for (index, chunk) in chunks.enumerated() {
      pending += chunk
      while !pending.isEmpty {
        switch decode(decoder, pending, maxRequests: maxRequests) {
        case .success(let output):
          precondition(output.consumed <= pending.count)
          run.consumedTrace.append(output.consumed)
          run.requests += output.requests
          pending.removeFirst(output.consumed)
          if let upgrade = output.upgrade {
            run.upgrade = upgrade
            run.leftover = pending + chunks[(index + 1)...].joined()
            return run
          }
          if output.requests.isEmpty {
            precondition(pending.isEmpty, "no request, no upgrade, no error, yet bytes left over")
          }
        case .failure(let error):
          run.error = error
          return run
        }
      }
    }
    return run
  }

  /// Everything a sequence of response `decode` calls (and optionally `finish`) produced.
  struct ResponseRun: Equatable {
    var responses: [HTTPResponse] = []
    var upgrade: HTTPResponse?
    var leftover: [UInt8] = []
    var error: HTTPParseError?
  }

  static func runResponses(
    _ chunks: [[UInt8]], answering methods: [HTTPMethod] = [], finish: Bool = false,
    limits: HTTPParserLimits = HTTPParserLimits()
  ) -> ResponseRun {
    let decoder = HTTPResponseDecoder(limits: limits)
    for method in methods { decoder.expectResponse(to: method) }
    var run = ResponseRun()
    var pending: [UInt8] = []
    for (index, chunk) in chunks.enumerated() {
      pending += chunk
      while !pending.isEmpty {
        switch decode(decoder, pending) {
        case .success(let output):
          run.responses += output.responses
          pending.removeFirst(output.consumed)
          if let upgrade = output.upgrade {
            run.upgrade = upgrade
            run.leftover = pending + chunks[(index + 1)...].joined()
            return run
          }
        case .failure(let error):
          run.error = error
          return run
        }
      }
    }
    if finish {
      do throws(HTTPParseError) {
        run.responses += try decoder.finish().responses
      } catch {
        run.error = error
      }
    }
    return run
  }

  /// `bytes` in one-byte pieces.
  static func byteByByte(_ bytes: [UInt8]) -> [[UInt8]] { bytes.map { [$0] } }

  /// `bytes` cut in two at `offset`.
  static func split(_ bytes: [UInt8], at offset: Int) -> [[UInt8]] {
    [Array(bytes[..<offset]), Array(bytes[offset...])]
  }
}
