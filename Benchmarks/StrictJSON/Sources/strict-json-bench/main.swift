import FoundationEssentials
import StrictJSON
import SyncModel
import SyncProtocol

#if canImport(Glibc)
  import Glibc
#endif

// strict-json-bench MESSAGE DECODER COUNT
//
// Builds one body (MESSAGE: `catchup`, COUNT pages with UUID-shaped ids; `subscribe`, COUNT ids; `batch`, COUNT
// mutations as pagesync-load's W1 sends them), then decodes it once with DECODER (`foundation`: JSONDecoder, as
// the broker did; `strict`: the strict reader; `none`: only the setup) and prints the time it took. Under
// callgrind, `none` is the baseline to subtract: the ids are deterministic, and SWIFT_DETERMINISTIC_HASHING=1
// makes runs repeat exactly.

let arguments = CommandLine.arguments
guard arguments.count == 4, let count = Int(arguments[3]),
  ["catchup", "subscribe", "batch"].contains(arguments[1]),
  ["foundation", "strict", "none"].contains(arguments[2])
else {
  print("usage: strict-json-bench catchup|subscribe|batch foundation|strict|none COUNT")
  exit(64)
}
let (message, decoder) = (arguments[1], arguments[2])

/// A UUID-shaped id, the same for the same index.
func id(_ index: Int) -> EntityID {
  let hex = String(UInt64(index) &* 0x9E37_79B9_7F4A_7C15, radix: 16)
  let padded = String(repeating: "0", count: 16 - hex.count) + hex
  let tail = String(index % 10_000 + 10_000)
  return try! EntityID(
    validating:
      "\(padded.prefix(8))-\(padded.dropFirst(8).prefix(4))-4\(padded.suffix(3))-8a5b-3c2d1e0f\(tail)")
}

let body: [UInt8]
switch message {
case "catchup":
  let pages = Dictionary(uniqueKeysWithValues: (0..<count).map { (id($0), UInt64($0) * 7) })
  body = Array(
    try JSONEncoder().encode(
      BrokerProtocol.CatchUpRequest(epoch: "4259ddef1173f7d80357e156a0377014", pages: pages)))
case "subscribe":
  body = Array(
    try JSONEncoder().encode(
      BrokerProtocol.ClientMessage(op: "subscribe", pages: (0..<count).map { id($0).rawValue })))
default:
  let mutations = (0..<count).map {
    Mutation(
      id: UInt64($0 + 1), page: try! EntityID(validating: "load-w1-3f2a9c1d-\($0 % 100)"),
      time: HLCTimestamp(millis: 1_732_244_000_123, counter: UInt32($0)), action: .setTitle("w\($0)"))
  }
  body = Array(
    try JSONEncoder().encode(
      MutationBatch(client: try! EntityID(validating: "w1-writer-0"), workspace: id(0), mutations: mutations))
  )
}

let started = ContinuousClock.now
var decoded = 0
switch (message, decoder) {
case ("catchup", "foundation"):
  decoded = try JSONDecoder().decode(BrokerProtocol.CatchUpRequest.self, from: Data(body)).pages.count
case ("catchup", "strict"):
  decoded = try JSONReader.decode(BrokerProtocol.CatchUpRequest.self, from: body).pages.count
case ("subscribe", "foundation"):
  decoded = try JSONDecoder().decode(BrokerProtocol.ClientMessage.self, from: Data(body)).pages?.count ?? 0
case ("subscribe", "strict"):
  // As the broker reads a text frame: from a String.
  let text = String(decoding: body, as: UTF8.self)
  decoded = try JSONReader.decode(BrokerProtocol.ClientMessage.self, from: text).pages?.count ?? 0
case ("batch", "foundation"):
  decoded = try JSONDecoder().decode(MutationBatch.self, from: Data(body)).mutations.count
case ("batch", "strict"):
  decoded = try JSONReader.decode(MutationBatch.self, from: body).mutations.count
default:
  break
}
print(
  "\(message) \(decoder): \(decoded) of \(count) in \(body.count) bytes, \(ContinuousClock.now - started)")
