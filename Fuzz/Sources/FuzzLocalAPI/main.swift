import ByteBuffers
import EventLoop
import FuzzSupport
import Logging
import PagesyncClient
import SQLiteStore
import Web

@testable import Daemon

#if canImport(Glibc)
  import Glibc
#endif

// The daemon's local API as `pagesync` and apps reach it: a real `LocalAPI` over its store (a file in a
// temporary directory), served on its Unix socket and driven on the same loop by an HTTP client, with no broker
// (the daemon is never started, so it is offline: edits queue, reads come from the store). Each input is one
// request: a method (first byte), a target (up to the first newline, bytes outside the safe set
// percent-encoded) and a body (the rest). Properties:
// - every request gets an answer with a status, and the connection stays usable;
// - no 5xx but 503 (offline, which is right here): a 500 is a store error on a client's input;
// - an error is `{"error": STATUS, "message": "..."}` with the status and a message; a success is JSON;
// - every 64 inputs: the offline forest's invariants, `offline_page` exactly the pages `offline_action`
//   rows impact, and `PRAGMA integrity_check` ok.
// The store carries over from input to input (edits build on earlier ones), as a daemon's does: a finding's
// message names the request, which is how to replay it.
// `POST /v1/sync` is sent as GET: it waits for a broker (there is none), up to two minutes.

/// One daemon and a keep-alive client connection to its API.
private final class Harness {
  let loop: Loop
  let driver: SyncDriver
  let api: LocalAPI
  let socket: String
  /// A reader of its own on the store file, as `sqlite3` would be.
  let reader: SQLiteConnection
  var connection: HTTPClientConnection?
  var inputs = 0

  init() {
    let directory = temporaryDirectory("localapi")
    var configuration = DaemonConfiguration()
    configuration.storePath = directory + "/pagesyncd.sqlite"
    configuration.socketPath = directory + "/api.sock"
    socket = configuration.socketPath
    var logger = Logger(label: "fuzz.daemon")
    logger.logLevel = .critical
    loop = try! Loop()
    driver = try! SyncDriver(loop: loop, configuration: configuration, logger: logger)
    api = LocalAPI(driver: driver)
    try! api.listen()
    reader = try! SQLiteConnection(path: configuration.storePath, mode: .readOnly)
    atexit { removeDirectory(harnessDirectory) }
    harnessDirectory = directory
  }

  /// `request`'s response, running the loop until it is there.
  func send(_ request: HTTPRequest) -> Result<HTTPResponse, HTTPClientError> {
    if connection?.isOpen != true {
      var configuration = HTTPClientConfiguration()
      configuration.responseTimeout = 10_000
      var connected: Result<HTTPClientConnection, HTTPClientError>?
      HTTPClientConnection.connect(loop: loop, to: .unix(path: socket), configuration: configuration) {
        connected = $0
      }
      while connected == nil { loop.runOnce() }
      connection = try! connected!.get()
    }
    var answer: Result<HTTPResponse, HTTPClientError>?
    connection!.send(request) { answer = $0 }
    while answer == nil { loop.runOnce() }
    return answer!
  }
}

nonisolated(unsafe) private var harnessDirectory = ""
nonisolated(unsafe) private let harness = Harness()

private let methods: [HTTPMethod] = [.GET, .POST, .PUT, .PATCH, .DELETE, .OPTIONS, HTTPMethod("BREW")]

/// The target's bytes with everything outside `A-Z a-z 0-9 - _ . ~ / ? = & %` percent-encoded, as a client
/// sends it.
private func target(_ bytes: ArraySlice<UInt8>) -> String {
  let safe = Set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.~/?=&%".utf8)
  let hex = Array("0123456789ABCDEF".utf8)
  var out: [UInt8] = []
  for byte in bytes {
    if safe.contains(byte) {
      out.append(byte)
    } else {
      out += [UInt8(ascii: "%"), hex[Int(byte >> 4)], hex[Int(byte & 0x0F)]]
    }
  }
  let text = String(decoding: out, as: UTF8.self)
  return text.hasPrefix("/") ? text : "/" + text
}

/// Whether the offline set in the store is what its reasons say, the forest is sound and the file is intact.
private func checkStore() {
  if let violation = harness.driver.offlineSet.forest.invariantViolation() {
    preconditionFailure("property violated: the offline forest: \(violation)")
  }
  let connection = harness.reader
  let orphans = try! connection.query(
    "SELECT page_id FROM offline_page WHERE page_id NOT IN (SELECT impacted_page_id FROM offline_action)")
  require(orphans.isEmpty, "offline pages without a reason: \(orphans)")
  let missing = try! connection.query(
    "SELECT impacted_page_id FROM offline_action WHERE impacted_page_id NOT IN (SELECT page_id FROM offline_page)"
  )
  require(missing.isEmpty, "reasons for pages not offline: \(missing)")
  let report = try! connection.integrityCheck()
  require(report == ["ok"], "integrity_check: \(report)")
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> Int32 {
  let bytes = Array(UnsafeRawBufferPointer(start: data, count: size))
  guard let first = bytes.first else { return 0 }
  var method = methods[Int(first) % methods.count]
  let rest = bytes.dropFirst()
  let newline = rest.firstIndex(of: UInt8(ascii: "\n")) ?? rest.endIndex
  let path = target(rest[..<newline])
  let body = newline < rest.endIndex ? Array(rest[(newline + 1)...]) : []
  if method == .POST && path.hasPrefix("/v1/sync") { method = .GET }
  var headers: HTTPHeaders = [:]
  if !body.isEmpty { headers.add(name: "Content-Type", value: "application/json") }
  let request = HTTPRequest(
    head: HTTPRequestHead(method: method, target: path, headers: headers), body: ByteBuffer(bytes: body))
  let shown = "\(method) \(path) \(String(decoding: body.prefix(200), as: UTF8.self))"

  switch harness.send(request) {
  case .failure(let error):
    preconditionFailure("property violated: no answer to \(shown): \(error)")
  case .success(let response):
    let status = response.head.status.code
    require(
      (200..<500).contains(status) || status == 503, "\(shown) got \(status): \(response.body.readableString)"
    )
    let json: JSONValue
    do throws(JSONValue.ParseError) {
      json = try JSONValue(parsing: response.body.readableBytesArray)
    } catch {
      preconditionFailure("property violated: \(shown) got \(status) with a body that is not JSON: \(error)")
    }
    if status >= 400 {
      let members = json.objectValue ?? [:]
      require(members["error"] == .integer(Int64(status)), "\(shown) got \(status) with \(json.jsonText)")
      guard case .string(let message)? = members["message"], !message.isEmpty else {
        preconditionFailure("property violated: \(shown) got \(status) without a message: \(json.jsonText)")
      }
    }
  }
  harness.inputs += 1
  if harness.inputs % 64 == 0 { checkStore() }
  return 0
}

runLibFuzzer { data, size in fuzz(data ?? UnsafePointer(bitPattern: 1)!, size) }
