import FuzzSupport
import Web

private enum Outcome: Equatable {
  case requests([HTTPRequest])
  case failed(HTTPParseError.Kind)
}

/// Decodes `parts` in order as a server would: bytes not consumed are kept and fed again with the next part.
private func decode(_ parts: [UnsafeRawBufferPointer]) -> Outcome {
  let decoder = HTTPRequestDecoder(limits: HTTPParserLimits(maxHeaderBytes: 4096, maxBodyBytes: 4096))
  var requests: [HTTPRequest] = []
  var kept: [UInt8] = []
  for part in parts {
    kept.append(contentsOf: part)
    // Decode until no progress: an error after complete requests surfaces on the next call.
    decoding: while !kept.isEmpty {
      let result = kept.withUnsafeBytes { raw in
        Result { () throws(HTTPParseError) in try decoder.decode(raw) }
      }
      switch result {
      case .failure(let error):
        return .failed(error.kind)
      case .success(let output):
        requests += output.requests
        if let upgrade = output.upgrade { return .requests(requests + [upgrade]) }
        kept.removeFirst(output.consumed)
        if output.consumed == 0 && output.requests.isEmpty { break decoding }
      }
    }
  }
  return .requests(requests)
}

/// Feeds the input to a request decoder whole and split in two at a point the input chooses: both must agree on
/// the requests completed before the end, and on the error if both fail.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> Int32 {
  let bytes = UnsafeRawBufferPointer(start: data, count: size)
  let whole = decode([bytes])
  let cut = size == 0 ? 0 : Int(bytes[0]) % (size + 1)
  let split = decode([
    UnsafeRawBufferPointer(rebasing: bytes[..<cut]), UnsafeRawBufferPointer(rebasing: bytes[cut...]),
  ])
  switch (whole, split) {
  case (.requests(let a), .requests(let b)):
    precondition(a == b, "splitting the input changed the requests")
  case (.failed(let a), .failed(let b)):
    precondition(a == b, "splitting the input changed the error")
  default:
    preconditionFailure("splitting the input changed success into failure or back: \(whole) vs \(split)")
  }
  return 0
}

runLibFuzzer { data, size in fuzz(data ?? UnsafePointer(bitPattern: 1)!, size) }
