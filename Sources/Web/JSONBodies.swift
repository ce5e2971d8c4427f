import ByteBuffers
import FoundationEssentials
import StrictJSON

/// JSON bodies over HTTP, as both of pagesync's servers speak them: sorted keys (stable output for tests and
/// diffs), and decoding errors turned into a 400 that says where and what.
public struct JSONBodies {
  public let encoder: JSONEncoder
  public let decoder = JSONDecoder()

  public init() {
    let encoder = JSONEncoder()
    encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
    self.encoder = encoder
  }

  /// `value` as JSON bytes (`{}` if it cannot be encoded: our own types always can).
  public func encode(_ value: some Encodable) -> ByteBuffer {
    ByteBuffer(bytes: (try? encoder.encode(value)) ?? Data("{}".utf8))
  }

  /// `value` as JSON text.
  public func text(_ value: some Encodable) -> String {
    String(decoding: (try? encoder.encode(value)) ?? Data("{}".utf8), as: UTF8.self)
  }

  /// A response with `value` as its JSON body.
  public func response(_ value: some Encodable, status: HTTPStatus = .ok) -> HTTPResponse {
    HTTPResponse(status: status, headers: ["Content-Type": "application/json"], body: encode(value))
  }

  /// Decodes a request body, or the 400 naming what is wrong with it.
  public func decode<T: Decodable>(_ type: T.Type, _ request: HTTPRequest) -> Result<T, HTTPResponseError> {
    let bytes = request.body.readableBytesArray
    // JSON is UTF-8 (RFC 8259): say so, rather than the decoder's bare "not valid JSON".
    guard bytes.withUnsafeBytes({ UTF8Validator.isValid($0) }) else {
      return .failure(HTTPResponseError(.badRequest, "invalid JSON body: it is not valid UTF-8"))
    }
    do {
      return .success(try decoder.decode(type, from: Data(bytes)))
    } catch DecodingError.dataCorrupted(let context)
      where context.codingPath.isEmpty && (try? decoder.decode(AnyJSONValue.self, from: Data(bytes))) != nil
    {
      // The decoder says "not valid JSON", without a place, also for well-formed JSON whose number does not
      // fit its field (-1 or 2.5 for an id).
      return .failure(
        HTTPResponseError(
          .badRequest,
          "invalid JSON body: a number does not fit its field (negative, fractional or too large)"))
    } catch let error as DecodingError {
      return .failure(HTTPResponseError(.badRequest, "invalid JSON body: \(Self.describe(error))"))
    } catch {
      return .failure(HTTPResponseError(.badRequest, "invalid JSON body: \(error)"))
    }
  }

  /// Reads a request body with its type's strict reader (StrictJSON), or the 400 naming what is wrong: the same
  /// values as `decode` for the same bodies, at a fraction of the cost, and stricter where docs/protocol.md
  /// says ("Strict JSON"). For the bodies the broker reads most.
  public func read<T: JSONReadable>(_ type: T.Type, _ request: HTTPRequest) -> Result<T, HTTPResponseError> {
    request.body.withUnsafeReadableBytes { bytes in
      // As `decode`: a body that is not UTF-8 is told so first, wherever the bad byte is.
      guard UTF8Validator.isValid(bytes) else {
        return .failure(HTTPResponseError(.badRequest, "invalid JSON body: it is not valid UTF-8"))
      }
      do throws(JSONReadError) {
        return .success(try JSONReader.decode(type, from: bytes))
      } catch {
        return .failure(HTTPResponseError(.badRequest, "invalid JSON body: \(error)"))
      }
    }
  }

  /// A decoding error in one line: where and what.
  public static func describe(_ error: DecodingError) -> String {
    func path(_ context: DecodingError.Context) -> String {
      let path = context.codingPath.map { $0.intValue.map { "[\($0)]" } ?? ".\($0.stringValue)" }.joined()
      return path.isEmpty ? "" : "at \(path.hasPrefix(".") ? String(path.dropFirst()) : path): "
    }
    switch error {
    case .typeMismatch(_, let context), .valueNotFound(_, let context), .dataCorrupted(let context):
      return path(context) + context.debugDescription
    case .keyNotFound(let key, let context):
      return path(context) + "missing field \"\(key.stringValue)\""
    @unknown default:
      return "\(error)"
    }
  }
}

/// Any JSON value, read only to tell a body that is not JSON from one whose numbers do not fit their fields.
private struct AnyJSONValue: Decodable {
  private struct Key: CodingKey {
    var stringValue: String
    var intValue: Int? { nil }
    init(stringValue: String) { self.stringValue = stringValue }
    init?(intValue: Int) { nil }
  }

  init(from decoder: any Decoder) throws {
    if var array = try? decoder.unkeyedContainer() {
      while !array.isAtEnd { _ = try array.decode(AnyJSONValue.self) }
    } else if let object = try? decoder.container(keyedBy: Key.self) {
      for key in object.allKeys { _ = try object.decode(AnyJSONValue.self, forKey: key) }
    } else {
      let value = try decoder.singleValueContainer()
      if value.decodeNil() || (try? value.decode(Bool.self)) != nil || (try? value.decode(Double.self)) != nil
      {
        return
      }
      _ = try value.decode(String.self)
    }
  }
}
