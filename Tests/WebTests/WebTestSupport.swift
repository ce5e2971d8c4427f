import ByteBuffers
import EventLoop
import EventLoopTestKit
import Testing
import Web

#if canImport(Glibc)
  import Glibc
#endif

/// Sends raw bytes on a new connection, half-closes if asked, and collects everything until the server closes.
func rawExchange(
  _ loop: Loop, _ address: SocketAddress, _ text: String, halfClose: Bool = false,
  _ completion: @escaping (String) -> Void
) {
  ByteStream.connect(loop: loop, to: address) { result in
    guard case .success(let stream) = result else {
      Issue.record("connect failed: \(result)")
      completion("")
      return
    }
    var received: [UInt8] = []
    stream.onRead = { received.append(contentsOf: $0) }
    stream.onEnd = { [unowned stream] in
      stream.close()
      completion(String(decoding: received, as: UTF8.self))
    }
    stream.onError = { [unowned stream] _ in
      stream.close()
      completion(String(decoding: received, as: UTF8.self))
    }
    stream.startReading()
    stream.write(ByteBuffer(string: text))
    if halfClose { stream.shutdownWrite() }
  }
}

/// The status codes of every response in a raw byte stream, in order.
func statusCodes(_ raw: String) -> [Int] {
  var codes: [Int] = []
  var rest = raw[...]
  while let found = rest.firstRange(of: "HTTP/1.1 ") {
    if let code = Int(rest[found.upperBound...].prefix(3)) { codes.append(code) }
    rest = rest[found.upperBound...]
  }
  return codes
}

/// A server with a few routes used across tests, on a loop of its own.
final class TestServer {
  let loop: Loop
  let server: HTTPServer
  let router = HTTPRouter()
  var address: SocketAddress!

  init(
    loop: Loop, configuration: HTTPServerConfiguration = HTTPServerConfiguration(),
    listen: SocketAddress? = nil, tls: TLSServerContext? = nil
  )
    throws
  {
    self.loop = loop
    server = HTTPServer(loop: loop, configuration: configuration, router: router)
    router.add(.GET, "/hello") { _, responder in responder.respond(.text(.ok, "hello")) }
    router.add(.POST, "/echo") { request, responder in
      responder.respond(
        HTTPResponse(status: .ok, headers: ["X-Length": "\(request.body.readableBytes)"], body: request.body))
    }
    router.add(.GET, "/delay/*") { request, responder in
      // /delay/N answers after N ms: later requests may finish first.
      let ms = UInt64(request.path.split(separator: "/").last.flatMap { Int($0) } ?? 0)
      let timer = LoopTimer(loop: loop)
      timer.start(after: ms) {
        timer.close()
        responder.respond(.text(.ok, "delay \(ms)"))
      }
    }
    router.add(.GET, "/stream") { _, responder in
      responder.startStreaming(HTTPResponseHead(status: .ok, headers: ["Content-Type": "text/plain"]))
      for i in 0..<5 { responder.writeChunk(ByteBuffer(string: "part\(i);")) }
      responder.finish()
    }
    router.add(.GET, "/forgotten") { _, _ in }
    address = try server.listen(on: listen ?? .inet(host: "127.0.0.1", port: 0), tls: tls)
  }
}

/// Runs `program` with `arguments` on `loop` and hands its output and status to `check` once it exits.
func runProgram(
  _ loop: Loop, _ program: String, _ arguments: [String], environment: [String]? = nil,
  _ check: @escaping (ProcessRun) -> Void
) throws {
  _ = try ProcessRun(loop: loop, program, arguments, environment: environment, completion: check)
}

/// The path of a file beside this source file's directory (`Tests/WebTests/<name>`).
func testResource(_ name: String, file: String = #filePath) -> String {
  let dir = file.split(separator: "/", omittingEmptySubsequences: false).dropLast().joined(separator: "/")
  return dir + "/" + name
}
