import ByteBuffers
import EventLoop
import EventLoopTestKit
import Testing
import Web

/// TLS in one loop: our server and our client over loopback, a test CA made by the `openssl` command.
@Suite struct TLSTests {
  /// One GET over `tls`, against a TLS server with `certificate`; the response or the client's error, and how many
  /// requests reached the server's handler.
  private func get(
    serverPair: (certificate: String, key: String), client: TLSClientContext, host: String = "127.0.0.1",
    body: Int = 0
  ) throws -> (result: Result<HTTPResponse, HTTPClientError>?, served: Int) {
    let loop = try Loop()
    let test = try TestServer(
      loop: loop, tls: TLSServerContext(certificateFile: serverPair.certificate, keyFile: serverPair.key))
    var served = 0
    test.router.add(.GET, "/big") { _, responder in
      served += 1
      responder.respond(.text(.ok, String(repeating: "b", count: body)))
    }
    var result: Result<HTTPResponse, HTTPClientError>?
    var configuration = HTTPClientConfiguration()
    configuration.tls = client
    guard case .inet(_, let port) = test.address! else { throw TLSError("no port") }
    HTTPClientConnection.connect(loop: loop, to: .inet(host: host, port: port), configuration: configuration)
    {
      connected in
      switch connected {
      case .failure(let error):
        result = .failure(error)
        test.server.close()
      case .success(let connection):
        connection.send(.GET, "/big") { answer in
          result = answer
          connection.close()
          test.server.close()
        }
      }
    }
    try loop.runUntilDone()
    try loop.close()
    return (result, served)
  }

  @Test func aRequestAndALargeAnswerGoThroughTLS() throws {
    let ca = try TestCertificates()
    defer { ca.remove() }
    let pair = try ca.issue("server")
    let outcome = try get(serverPair: pair, client: TLSClientContext(caFile: ca.caFile), body: 1_000_000)
    guard case .success(let response)? = outcome.result else {
      Issue.record("expected an answer, got \(String(describing: outcome.result))")
      return
    }
    #expect(response.head.status == .ok)
    #expect(response.body.readableBytes == 1_000_000)
    #expect(outcome.served == 1)
  }

  @Test func aCertificateForAnotherHostIsRefusedBeforeAnyRequestGoesOut() throws {
    let ca = try TestCertificates()
    defer { ca.remove() }
    let pair = try ca.issue("other", names: ["DNS:other.example"])
    let outcome = try get(serverPair: pair, client: TLSClientContext(caFile: ca.caFile))
    guard case .failure(let error)? = outcome.result else {
      Issue.record("expected a refusal, got \(String(describing: outcome.result))")
      return
    }
    #expect("\(error)".contains("certificate verify failed: IP address mismatch"), "\(error)")
    #expect(outcome.served == 0)
  }

  @Test func aHostNameIsCheckedAgainstTheCertificatesNames() throws {
    let ca = try TestCertificates()
    defer { ca.remove() }
    // The certificate names 127.0.0.1 only; "localhost" resolves to it, but the name does not match.
    let pair = try ca.issue("server", names: ["IP:127.0.0.1"])
    let outcome = try get(serverPair: pair, client: TLSClientContext(caFile: ca.caFile), host: "localhost")
    guard case .failure(let error)? = outcome.result else {
      Issue.record("expected a refusal, got \(String(describing: outcome.result))")
      return
    }
    #expect("\(error)".contains("hostname mismatch"), "\(error)")
    #expect(outcome.served == 0)
  }

  @Test func aCAThatIsNotTrustedIsRefused() throws {
    let ca = try TestCertificates()
    defer { ca.remove() }
    let pair = try ca.issue("server")
    // The system's trust store does not hold the test CA.
    let outcome = try get(serverPair: pair, client: TLSClientContext())
    guard case .failure(let error)? = outcome.result else {
      Issue.record("expected a refusal, got \(String(describing: outcome.result))")
      return
    }
    #expect(
      "\(error)".contains("certificate verify failed: self-signed certificate in certificate chain"),
      "\(error)")
    #expect(outcome.served == 0)
  }

  @Test func aWebSocketRunsOverTLS() throws {
    let ca = try TestCertificates()
    defer { ca.remove() }
    let pair = try ca.issue("server")
    let loop = try Loop()
    let test = try TestServer(
      loop: loop, tls: TLSServerContext(certificateFile: pair.certificate, keyFile: pair.key))
    test.router.webSocket(
      "/ws",
      WebSocketRoute { socket in
        socket.onText = { [unowned socket] text in socket.send(text: "echo " + text) }
      })
    var texts: [String] = []
    WebSocketClient.connect(
      loop: loop, to: test.address, target: "/ws", tls: try TLSClientContext(caFile: ca.caFile)
    ) { result in
      guard case .success(let socket) = result else {
        Issue.record("connect failed: \(result)")
        test.server.close()
        return
      }
      socket.onText = { [unowned socket] text in
        texts.append(text)
        if texts.count == 2 { socket.close() }
      }
      socket.onClose = { _ in test.server.close() }
      socket.send(text: "one")
      socket.send(text: String(repeating: "x", count: 70_000))
    }
    try loop.runUntilDone()
    try loop.close()
    #expect(texts == ["echo one", "echo " + String(repeating: "x", count: 70_000)])
  }

  /// Runs `client` and `server` against each other in memory until neither has more to say; returns whether
  /// both are established.
  private func converse(_ client: TLSSession, _ server: TLSSession) throws -> Bool {
    var toServer = try client.start()
    for _ in 0..<10 {
      let toClient = try toServer.flatMap { bytes in
        try bytes.withUnsafeReadableBytes { try server.open($0) { _ in true } }
      }
      toServer = try toClient.flatMap { bytes in
        try bytes.withUnsafeReadableBytes { try client.open($0) { _ in true } }
      }
      if toServer == nil && toClient == nil { break }
    }
    return client.isEstablished && server.isEstablished
  }

  @Test(arguments: [false, true]) func aReconnectResumesItsSession(tls12: Bool) throws {
    let ca = try TestCertificates()
    defer { ca.remove() }
    let pair = try ca.issue("server")
    let server = try TLSServerContext(certificateFile: pair.certificate, keyFile: pair.key)
    let client = try TLSClientContext(caFile: ca.caFile)
    let first = client.makeSession(host: "localhost", maximumVersion12: tls12)
    #expect(try converse(first, server.makeSession()))
    #expect(!first.isResumed)
    #expect(first.protocolVersion == (tls12 ? "TLSv1.2" : "TLSv1.3"))
    #expect(first.applicationProtocol == "http/1.1")
    let second = client.makeSession(host: "localhost", maximumVersion12: tls12)
    #expect(try converse(second, server.makeSession()))
    #expect(second.isResumed)
    // Another host name has no session to offer.
    let other = client.makeSession(host: "127.0.0.1", maximumVersion12: tls12)
    #expect(try converse(other, server.makeSession()))
    #expect(!other.isResumed)
    // The context's tally (what pagesync-load reports): three handshakes, the second one resumed.
    #expect(client.handshakes == TLSHandshakeTally(completed: 3, resumed: 1))
  }

  /// Opens `wire` in `session` in pieces of `piece` bytes (records split anywhere); the plaintext handed on.
  private func openInPieces(_ session: TLSSession, _ wire: ByteBuffer, piece: Int) throws -> [UInt8] {
    var plain: [UInt8] = []
    try wire.withUnsafeReadableBytes { bytes in
      var offset = 0
      while offset < bytes.count {
        let end = min(bytes.count, offset + piece)
        _ = try session.open(UnsafeRawBufferPointer(rebasing: bytes[offset..<end])) { part in
          plain.append(contentsOf: part)
          return true
        }
        offset = end
      }
    }
    return plain
  }

  /// B6: an idle TLS connection keeps no buffer of the session's own, however much it carried: what OpenSSL reads
  /// is read where the socket read landed, what it writes is handed over at once (memory BIOs kept theirs).
  @Test(arguments: [false, true]) func anIdleSessionKeepsNoBufferOfItsOwn(tls12: Bool) throws {
    let ca = try TestCertificates()
    defer { ca.remove() }
    let pair = try ca.issue("server")
    let serverContext = try TLSServerContext(certificateFile: pair.certificate, keyFile: pair.key)
    let client = try TLSClientContext(caFile: ca.caFile).makeSession(
      host: "localhost", maximumVersion12: tls12)
    let server = serverContext.makeSession()
    #expect(try converse(client, server))
    #expect(client.bufferedBytes == 0 && server.bufferedBytes == 0)
    let upload = (0..<200_000).map { UInt8(truncatingIfNeeded: $0 &* 7) }
    let sealed = try client.seal(ByteBuffer(bytes: upload))
    #expect(client.bufferedBytes == 0)
    // Pieces of 7,001 bytes to the server and 1,000 to the client: records end anywhere in a socket read.
    #expect(try openInPieces(server, sealed, piece: 7_001) == upload)
    #expect(server.bufferedBytes == 0)
    let answer = [UInt8](repeating: 0x61, count: 300_000)
    let sealedAnswer = try server.seal(ByteBuffer(bytes: answer))
    #expect(server.bufferedBytes == 0)
    #expect(try openInPieces(client, sealedAnswer, piece: 1_000) == answer)
    #expect(client.bufferedBytes == 0 && server.bufferedBytes == 0)
  }

  /// An owner that stops reading in the middle of a socket read: the session keeps the rest of that read (it was
  /// only lent), hands it on when asked again with no new byte, and then keeps nothing.
  @Test func whatAStoppedOwnerHasNotReadIsKeptThenHandedOn() throws {
    let ca = try TestCertificates()
    defer { ca.remove() }
    let pair = try ca.issue("server")
    let serverContext = try TLSServerContext(certificateFile: pair.certificate, keyFile: pair.key)
    let client = try TLSClientContext(caFile: ca.caFile).makeSession(host: "localhost")
    let server = serverContext.makeSession()
    #expect(try converse(client, server))
    let parts = (0..<3).map { [UInt8](repeating: UInt8(65 + $0), count: 5000) }
    var wire = ByteBuffer(capacity: 16_000)
    for part in parts { wire.append(try client.seal(ByteBuffer(bytes: part))) }
    var received: [UInt8] = []
    _ = try wire.withUnsafeReadableBytes { bytes in
      try server.open(bytes) { piece in
        received.append(contentsOf: piece)
        return false
      }
    }
    #expect(received == parts[0])
    #expect(server.bufferedBytes >= 2 * 5000)
    _ = try server.open(UnsafeRawBufferPointer(start: nil, count: 0)) { piece in
      received.append(contentsOf: piece)
      return true
    }
    #expect(received == parts.flatMap { $0 })
    #expect(server.bufferedBytes == 0)
  }

  @Test func sessionsResumeAcrossAReloadOfThePair() throws {
    let ca = try TestCertificates()
    defer { ca.remove() }
    let pair = try ca.issue("server")
    let renewed = try ca.issue("renewed")
    let before = try TLSServerContext(certificateFile: pair.certificate, keyFile: pair.key)
    let client = try TLSClientContext(caFile: ca.caFile)
    #expect(try converse(client.makeSession(host: "localhost"), before.makeSession()))
    let control = client.makeSession(host: "localhost")
    #expect(try converse(control, before.makeSession()))
    #expect(control.isResumed)
    // A reload that keeps the ticket keys: the ticket from before is taken.
    let reloaded = try TLSServerContext(
      certificateFile: renewed.certificate, keyFile: renewed.key, reusingTicketKeysOf: before)
    let resumed = client.makeSession(host: "localhost")
    #expect(try converse(resumed, reloaded.makeSession()))
    #expect(resumed.isResumed)
    // Without them it is not (what the copy is for).
    let fresh = try TLSServerContext(certificateFile: renewed.certificate, keyFile: renewed.key)
    let full = client.makeSession(host: "localhost")
    #expect(try converse(full, fresh.makeSession()))
    #expect(!full.isResumed)
  }

  /// An owner that stops reading gets nothing more until it starts again, as over TCP, though the socket read
  /// that brought the first record brought the others too (they wait, opened or not, in the TLS session); and
  /// when it starts again they come without a new byte from the socket.
  @Test func stoppingReadingHoldsTheRecordsAlreadyReadUntilReadingStartsAgain() throws {
    let ca = try TestCertificates()
    defer { ca.remove() }
    let pair = try ca.issue("server")
    let server = try TLSServerContext(certificateFile: pair.certificate, keyFile: pair.key)
    let client = try TLSClientContext(caFile: ca.caFile)
    let loop = try Loop()
    let listener = try Listener(loop: loop, address: .inet(host: "127.0.0.1", port: 0))
    var received: [UInt8] = []
    var deliveredWhileStopped = 0
    var stopped = false
    let expected = (0..<3).flatMap { [UInt8](repeating: UInt8(65 + $0), count: 5000) }
    var accepted: ByteStream?
    listener.onConnection = { stream in
      accepted = stream
      stream.install(server.makeSession())
      stream.onRead = { bytes in
        if stopped { deliveredWhileStopped += 1 }
        received.append(contentsOf: bytes)
        if received.count == expected.count {
          stream.close()
          listener.close()
        } else if received.count == 5000 {
          // The first record: stop, and start again a little later.
          stopped = true
          stream.stopReading()
          let timer = LoopTimer(loop: loop)
          timer.start(after: 50) {
            timer.close()
            stopped = false
            stream.startReading()
          }
        }
      }
      stream.startReading()
    }
    var sender: ByteStream?
    ByteStream.connect(loop: loop, to: listener.address) { result in
      guard case .success(let stream) = result else {
        Issue.record("connect failed: \(result)")
        listener.close()
        return
      }
      sender = stream
      stream.install(client.makeSession(host: "127.0.0.1"))
      stream.onRead = { _ in }
      stream.onEnd = { stream.close() }
      stream.startReading()
      // Three buffers over the merge limit: three records, written together.
      for part in 0..<3 { stream.write(ByteBuffer(bytes: expected[(part * 5000)..<(part * 5000 + 5000)])) }
    }
    try loop.runUntilDone(timeout: 10_000)
    accepted?.close()
    sender?.close()
    try loop.close()
    #expect(received == expected)
    #expect(deliveredWhileStopped == 0)
  }

  @Test func aBadPairIsAnErrorNamingTheFile() throws {
    let ca = try TestCertificates()
    defer { ca.remove() }
    let first = try ca.issue("first")
    let second = try ca.issue("second")
    #expect(
      throws: TLSError(
        "cannot read the certificate chain \(ca.directory)/missing.pem: No such file or directory")
    ) {
      try TLSServerContext(certificateFile: ca.directory + "/missing.pem", keyFile: first.key)
    }
    do {
      _ = try TLSServerContext(certificateFile: first.certificate, keyFile: second.key)
      Issue.record("a key of another certificate was taken")
    } catch {
      #expect(
        error.message.hasPrefix("the private key \(second.key) does not match the certificate"), "\(error)")
    }
    do {
      _ = try TLSServerContext(certificateFile: first.key, keyFile: first.key)
      Issue.record("a key was taken for a certificate")
    } catch {
      #expect(error.message.hasPrefix("cannot read the certificate chain \(first.key)"), "\(error)")
    }
  }
}
