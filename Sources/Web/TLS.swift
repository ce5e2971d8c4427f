import ByteBuffers
import CSSL
import EventLoop

#if canImport(Glibc)
  import Glibc
#endif

/// Why a TLS context could not be made: a certificate, key or CA file that cannot be read or does not fit.
public struct TLSError: Error, Equatable, Sendable, CustomStringConvertible {
  public var message: String
  public init(_ message: String) { self.message = message }
  public var description: String { message }
}

/// OpenSSL's error queue (this thread's) as one line of reasons, emptied.
func drainOpenSSLErrors() -> String {
  var reasons: [String] = []
  while true {
    let code = ERR_get_error()
    if code == 0 { break }
    let reason =
      if let text = ERR_reason_error_string(code) { String(cString: text) } else { "error \(code)" }
    if !reasons.contains(reason) { reasons.append(reason) }
  }
  return reasons.isEmpty ? "unknown TLS error" : reasons.joined(separator: ": ")
}

/// Fails unless `path` can be opened for reading, with the system's reason (OpenSSL's own is "system lib").
func checkReadable(_ path: String, _ what: String) throws(TLSError) {
  let fd = open(path, O_RDONLY)
  guard fd >= 0 else { throw TLSError("cannot read \(what) \(path): \(String(cString: strerror(errno)))") }
  close(fd)
}

/// A server's TLS settings over libssl: its certificate chain and key (PEM), TLS 1.2 and newer only, ALPN
/// `http/1.1`, session tickets (stateless resumption, so that a reconnect storm does not pay a full handshake
/// per client), renegotiation off, and OpenSSL's buffers of an idle connection released.
///
/// A context is immutable once made: a new certificate is a new context (`HTTPServer.tls`), which new
/// connections use while open ones keep theirs. `reusingTicketKeysOf` carries the ticket keys over, so that
/// sessions from before a reload still resume.
///
/// Threading: an `SSL_CTX` may be shared between threads once set up.
public final class TLSServerContext: @unchecked Sendable {
  let context: OpaquePointer
  public let certificateFile: String
  public let keyFile: String

  public init(
    certificateFile: String, keyFile: String, reusingTicketKeysOf previous: TLSServerContext? = nil
  ) throws(TLSError) {
    ERR_clear_error()
    guard let context = SSL_CTX_new(TLS_server_method()) else {
      throw TLSError("cannot create a TLS context: \(drainOpenSSLErrors())")
    }
    self.context = context
    self.certificateFile = certificateFile
    self.keyFile = keyFile
    Self.configure(context)
    try checkReadable(certificateFile, "the certificate chain")
    try checkReadable(keyFile, "the private key")
    guard SSL_CTX_use_certificate_chain_file(context, certificateFile) == 1 else {
      throw TLSError("cannot read the certificate chain \(certificateFile): \(drainOpenSSLErrors())")
    }
    guard SSL_CTX_use_PrivateKey_file(context, keyFile, SSL_FILETYPE_PEM) == 1 else {
      let reason = drainOpenSSLErrors()
      if reason.contains("key values mismatch") {
        throw TLSError("the private key \(keyFile) does not match the certificate \(certificateFile)")
      }
      throw TLSError("cannot read the private key \(keyFile): \(reason)")
    }
    guard SSL_CTX_check_private_key(context) == 1 else {
      throw TLSError(
        "the private key \(keyFile) does not match the certificate \(certificateFile): \(drainOpenSSLErrors())"
      )
    }
    if let previous { _ = pagesync_ctx_copy_ticket_keys(previous.context, context) }
    ERR_clear_error()
  }

  /// A context with an ephemeral key and a self-signed certificate for `commonName`, made in memory (for tests
  /// and fuzzing: no key on disk). `certificatePEM` is what a client must trust.
  public init(ephemeralFor commonName: String) throws(TLSError) {
    ERR_clear_error()
    guard let context = SSL_CTX_new(TLS_server_method()) else {
      throw TLSError("cannot create a TLS context: \(drainOpenSSLErrors())")
    }
    self.context = context
    certificateFile = "(ephemeral)"
    keyFile = "(ephemeral)"
    Self.configure(context)
    var pem = [CChar](repeating: 0, count: 4096)
    guard pagesync_ctx_use_ephemeral_certificate(context, commonName, &pem, pem.count) == 1 else {
      throw TLSError("cannot make an ephemeral certificate: \(drainOpenSSLErrors())")
    }
    certificatePEM = String(cString: pem)
  }

  /// The certificate's PEM, for a context made `ephemeralFor`; empty otherwise.
  public private(set) var certificatePEM = ""

  /// What every server context has: TLS 1.2+, idle buffers released, no renegotiation, ALPN, a session context.
  private static func configure(_ context: OpaquePointer) {
    pagesync_ctx_set_min_tls12(context)
    _ = pagesync_ctx_set_mode(context, Int(SSL_MODE_RELEASE_BUFFERS))
    pagesync_ctx_set_options(context, 1)
    pagesync_ctx_select_http11(context)
    let sessionContext: [UInt8] = Array("pagesync".utf8)
    _ = SSL_CTX_set_session_id_context(context, sessionContext, UInt32(sessionContext.count))
  }

  deinit { SSL_CTX_free(context) }

  /// A new server-side session for one accepted connection.
  public func makeSession() -> TLSSession { TLSSession(context: context, owner: self, client: nil) }
}

/// A client's TLS settings over libssl: TLS 1.2 and newer, the peer's chain verified against the system's trust
/// store (or `caFile` alone, for a private CA) and its name against the host connected to (a DNS name, or an IP
/// address in the certificate's IP entries), SNI, ALPN `http/1.1`. There is no way to turn verification off.
///
/// Threading: an `SSL_CTX` may be shared between threads once set up.
///
/// Resumption: the context keeps the newest resumable session of each host it connected to (one `SSL_SESSION`
/// each, under a lock) and offers it on the next connection there, so a daemon that reconnects resumes instead
/// of paying a full handshake.
public final class TLSClientContext: @unchecked Sendable {
  let context: OpaquePointer
  public let caFile: String?
  private let lock = Lock()
  /// The newest resumable session by host (retained `SSL_SESSION`s).
  private var sessions: [String: OpaquePointer] = [:]
  private var tally = TLSHandshakeTally()

  public init(caFile: String? = nil) throws(TLSError) {
    ERR_clear_error()
    guard let context = SSL_CTX_new(TLS_client_method()) else {
      throw TLSError("cannot create a TLS context: \(drainOpenSSLErrors())")
    }
    self.context = context
    self.caFile = caFile
    pagesync_ctx_set_min_tls12(context)
    _ = pagesync_ctx_set_mode(context, Int(SSL_MODE_RELEASE_BUFFERS))
    pagesync_ctx_set_options(context, 0)
    SSL_CTX_set_verify(context, SSL_VERIFY_PEER, nil)
    pagesync_ctx_collect_sessions(context)
    if let caFile {
      try checkReadable(caFile, "the CA certificates")
      guard SSL_CTX_load_verify_locations(context, caFile, nil) == 1 else {
        throw TLSError("cannot read the CA certificates \(caFile): \(drainOpenSSLErrors())")
      }
    } else {
      guard SSL_CTX_set_default_verify_paths(context) == 1 else {
        throw TLSError("cannot load the system's trusted certificates: \(drainOpenSSLErrors())")
      }
    }
    ERR_clear_error()
  }

  deinit {
    for session in sessions.values { SSL_SESSION_free(session) }
    SSL_CTX_free(context)
  }

  /// A new client-side session that verifies the server as `host` (a DNS name or an IP address literal),
  /// offering the last session of that host for resumption. `maximumVersion12`: offer TLS 1.2 at most (for tests
  /// of a server's TLS 1.2).
  public func makeSession(host: String, maximumVersion12: Bool = false) -> TLSSession {
    let session = TLSSession(context: context, owner: self, client: host)
    if maximumVersion12 { session.limitToTLS12() }
    lock.withLock {
      if let saved = sessions[host] { session.offer(saved) }
    }
    return session
  }

  /// Handshakes completed by this context's sessions so far, and how many of them resumed an earlier session
  /// (the load harness reports whether a reconnect storm paid full handshakes).
  public var handshakes: TLSHandshakeTally { lock.withLock { tally } }

  func countHandshake(resumed: Bool) {
    lock.withLock {
      tally.completed += 1
      if resumed { tally.resumed += 1 }
    }
  }

  /// Keeps `session` (retained by the caller, handed over) as the one to offer `host` next time.
  func keep(_ session: OpaquePointer, for host: String) {
    let replaced = lock.withLock { sessions.updateValue(session, forKey: host) }
    if let replaced { SSL_SESSION_free(replaced) }
  }
}

/// Handshakes a client context completed: all, and those that resumed a session (no certificate sent or
/// verified, no signature).
public struct TLSHandshakeTally: Sendable, Equatable {
  public var completed: Int
  public var resumed: Int
  public init(completed: Int = 0, resumed: Int = 0) {
    self.completed = completed
    self.resumed = resumed
  }
}

/// One connection's TLS, a `ByteStreamFilter` over one BIO of our own (`TLSTransport`): `SSL_do_handshake`,
/// `SSL_read` and `SSL_write` run on the loop thread and never block; OpenSSL reads the bytes of the socket read
/// being opened where the loop read them, and what it writes for the peer goes straight into the buffer handed
/// back to the stream. HTTP and WebSocket code above sees only plaintext.
///
/// Memory: between calls the session keeps no buffer of its own unless an owner stopped reading in the middle of
/// a socket read (`held`: the rest of that read, at most one socket read's worth, given back when it reads
/// again); what OpenSSL wrote is handed over at the end of each call; and OpenSSL frees its own record buffers
/// while the connection is idle (`SSL_MODE_RELEASE_BUFFERS`). An idle connection holds the `SSL` and one small
/// BIO, nothing of a record's size. (Two memory BIOs, as before, kept their `BUF_MEM`s and up to 1 KiB each.)
///
/// Threading: loop thread only.
public final class TLSSession: ByteStreamFilter {
  private let ssl: OpaquePointer
  /// Keeps the context (and its `SSL_CTX`) alive as long as the session.
  private let owner: AnyObject
  private let isClient: Bool
  /// The server's name as the client checks it; nil on the server side.
  private let peerName: String?
  private var failed = false
  public private(set) var isEstablished = false
  /// The socket read `open` is working on, lent for that call only; `inputOffset` is how much OpenSSL took.
  private var input = UnsafeRawBufferPointer(start: nil, count: 0)
  private var inputOffset = 0
  /// What OpenSSL has not taken of an earlier socket read (the owner stopped reading): read before `input`.
  private var held: ByteBuffer?
  /// What OpenSSL wrote for the peer during the current call.
  private var output: ByteBuffer?

  /// Largest plaintext piece handed to `deliver` at once (one TLS record's worth).
  static let readChunk = 16 * 1024

  /// Bytes the session itself keeps between calls (held input, unsent output): zero for an idle connection.
  public var bufferedBytes: Int { (held?.capacity ?? 0) + (output?.capacity ?? 0) }

  init(context: OpaquePointer, owner: AnyObject, client host: String?) {
    ssl = SSL_new(context)!
    let transport = BIO_new(TLSTransport.shared.method)!
    self.owner = owner
    isClient = host != nil
    peerName = host
    BIO_set_data(transport, Unmanaged.passUnretained(self).toOpaque())
    BIO_set_init(transport, 1)
    // One BIO for both directions: SSL_set_bio takes the one reference for both.
    SSL_set_bio(ssl, transport, transport)
    if let host {
      SSL_set_connect_state(ssl)
      _ = pagesync_offer_http11(ssl)
      let param = SSL_get0_param(ssl)
      if Self.isIPAddress(host) {
        // No SNI for an address (RFC 6066 3); the certificate must name it in an IP entry.
        _ = X509_VERIFY_PARAM_set1_ip_asc(param, host)
      } else {
        X509_VERIFY_PARAM_set_hostflags(param, UInt32(X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS))
        _ = SSL_set1_host(ssl, host)
        _ = pagesync_set_host_name(ssl, host)
      }
    } else {
      SSL_set_accept_state(ssl)
    }
  }

  /// OpenSSL reads from the transport: first what was held back, then the socket read being opened. Nothing left
  /// is "retry", so that OpenSSL waits for more bytes.
  fileprivate func transportRead(_ destination: UnsafeMutableRawPointer, _ capacity: Int) -> Int {
    var copied = 0
    if var kept = held {
      let count = min(capacity, kept.readableBytes)
      kept.withUnsafeReadableBytes { destination.copyMemory(from: $0.baseAddress!, byteCount: count) }
      kept.moveReaderIndex(forwardBy: count)
      held = kept.isEmpty ? nil : kept
      copied = count
    }
    let available = input.count - inputOffset
    if copied < capacity, available > 0 {
      let count = min(capacity - copied, available)
      (destination + copied).copyMemory(from: input.baseAddress! + inputOffset, byteCount: count)
      inputOffset += count
      copied += count
    }
    return copied
  }

  /// OpenSSL writes to the transport: appended to what this call hands back to the stream.
  fileprivate func transportWrite(_ bytes: UnsafeRawBufferPointer) {
    if output == nil { output = ByteBuffer(capacity: max(bytes.count, 512)) }
    output!.append(contentsOf: bytes)
  }

  /// Keeps what OpenSSL did not take of `input` (it is only lent): the owner stopped reading, or the session
  /// failed (then dropped).
  private func endInput() {
    let rest = input.count - inputOffset
    if rest > 0, !failed {
      if held == nil { held = ByteBuffer(capacity: rest) }
      held!.append(contentsOf: UnsafeRawBufferPointer(rebasing: input[inputOffset...]))
    }
    if failed { held = nil }
    input = UnsafeRawBufferPointer(start: nil, count: 0)
    inputOffset = 0
  }

  deinit {
    if let parked = pagesync_take_new_session(ssl) { SSL_SESSION_free(parked) }
    // Freed without a close_notify, OpenSSL would mark the session not resumable (`ssl_clear_bad_session`): a
    // connection that ended well (the peer closed, a keep-alive let go) keeps its session for the next one. One
    // that failed does not.
    if !failed { SSL_set_shutdown(ssl, SSL_SENT_SHUTDOWN | SSL_RECEIVED_SHUTDOWN) }
    SSL_free(ssl)
  }

  func limitToTLS12() { _ = pagesync_set_max_tls12(ssl) }

  /// Offers `session` for resumption (before the handshake starts).
  func offer(_ session: OpaquePointer) { _ = SSL_set_session(ssl, session) }

  /// A client hands each new resumable session (TLS 1.3: one per ticket, after the handshake; TLS 1.2: with the
  /// handshake) to its context, for the next connection to the same host.
  private func keepNewSession() {
    guard isClient, let session = pagesync_take_new_session(ssl) else { return }
    if let peerName, let owner = owner as? TLSClientContext {
      owner.keep(session, for: peerName)
    } else {
      SSL_SESSION_free(session)
    }
  }

  static func isIPAddress(_ host: String) -> Bool {
    var storage = in6_addr()
    return inet_pton(AF_INET, host, &storage) == 1 || inet_pton(AF_INET6, host, &storage) == 1
  }

  /// The protocol negotiated, e.g. `TLSv1.3`, once established.
  public var protocolVersion: String { String(cString: SSL_get_version(ssl)) }
  /// The application protocol agreed by ALPN, if any.
  public var applicationProtocol: String? {
    var data: UnsafePointer<UInt8>?
    var length: UInt32 = 0
    SSL_get0_alpn_selected(ssl, &data, &length)
    guard let data, length > 0 else { return nil }
    return String(decoding: UnsafeBufferPointer(start: data, count: Int(length)), as: UTF8.self)
  }
  /// Whether this session was resumed from an earlier one (no full handshake).
  public var isResumed: Bool { SSL_session_reused(ssl) == 1 }

  public func start() throws(ByteStreamFilterError) -> ByteBuffer? {
    guard isClient else { return nil }
    try handshake()
    return takeOutput()
  }

  public func open(_ wire: UnsafeRawBufferPointer, deliver: (UnsafeRawBufferPointer) -> Bool)
    throws(ByteStreamFilterError) -> ByteBuffer?
  {
    guard !failed else { return nil }
    input = wire
    inputOffset = 0
    defer { endInput() }
    if !isEstablished {
      try handshake()
      guard isEstablished else { return takeOutput() }
    }
    try withUnsafeTemporaryAllocation(byteCount: Self.readChunk, alignment: 1) {
      (chunk) throws(ByteStreamFilterError) in
      while true {
        ERR_clear_error()
        let read = SSL_read(ssl, chunk.baseAddress, Int32(chunk.count))
        if read > 0 {
          guard deliver(UnsafeRawBufferPointer(rebasing: chunk[..<Int(read)])) else { return }
          continue
        }
        switch SSL_get_error(ssl, read) {
        case SSL_ERROR_WANT_READ, SSL_ERROR_WANT_WRITE, SSL_ERROR_ZERO_RETURN:
          keepNewSession()
          return
        default: throw failure("bad record")
        }
      }
    }
    return takeOutput()
  }

  public func seal(_ bytes: ByteBuffer) throws(ByteStreamFilterError) -> ByteBuffer {
    guard !failed else { return ByteBuffer(capacity: 0) }
    // Room for the records at once: each adds at most a header, a content type, padding none, a tag (TLS 1.3:
    // 22 bytes; TLS 1.2 with AES-GCM: 29); 64 a record is a margin.
    // (An owner that writes and flushes from `onRead` seals in the middle of `open`: what that call wrote so far
    // goes first.)
    if output == nil {
      output = ByteBuffer(capacity: bytes.readableBytes + (bytes.readableBytes / (16 * 1024) + 1) * 64)
    }
    let complete = bytes.withUnsafeReadableBytes { plain in
      var offset = 0
      while offset < plain.count {
        ERR_clear_error()
        let written = SSL_write(ssl, plain.baseAddress! + offset, Int32(clamping: plain.count - offset))
        guard written > 0 else { return false }
        offset += Int(written)
      }
      return true
    }
    guard complete else { throw failure("cannot write") }
    return takeOutput() ?? ByteBuffer(capacity: 0)
  }

  public func finish() -> ByteBuffer? {
    guard isEstablished, !failed else { return nil }
    ERR_clear_error()
    _ = SSL_shutdown(ssl)
    ERR_clear_error()
    return takeOutput()
  }

  private func handshake() throws(ByteStreamFilterError) {
    ERR_clear_error()
    let result = SSL_do_handshake(ssl)
    if result == 1 {
      isEstablished = true
      if isClient, let owner = owner as? TLSClientContext { owner.countHandshake(resumed: isResumed) }
      return
    }
    switch SSL_get_error(ssl, result) {
    case SSL_ERROR_WANT_READ, SSL_ERROR_WANT_WRITE: return
    default: throw failure(peerName.map { "handshake with \($0) failed" } ?? "handshake failed")
    }
  }

  /// The error of a failed call, with the alert OpenSSL wrote for the peer; the session is done.
  private func failure(_ what: String) -> ByteStreamFilterError {
    failed = true
    var reason = drainOpenSSLErrors()
    let verify = SSL_get_verify_result(ssl)
    if isClient && verify != X509_V_OK {
      reason = "certificate verify failed: \(String(cString: X509_verify_cert_error_string(verify)))"
    }
    return ByteStreamFilterError(reason: "\(what): \(reason)", alert: takeOutput())
  }

  /// What OpenSSL wrote for the peer since the last call, if anything; the session keeps none of it.
  private func takeOutput() -> ByteBuffer? {
    defer { output = nil }
    guard let output, output.readableBytes > 0 else { return nil }
    return output
  }
}

/// The BIO method of `TLSSession`: OpenSSL's transport for one connection, over the session's own buffers
/// instead of memory BIOs (whose `BUF_MEM`s an idle connection would keep). Read and write call back into the
/// session found in the BIO's data (unretained: the session owns the `SSL`, which owns the BIO, and OpenSSL
/// only reads or writes during the session's own calls).
///
/// Threading: made once, then shared (a `BIO_METHOD` is read-only once set up).
struct TLSTransport: @unchecked Sendable {
  let method: OpaquePointer

  static let shared = TLSTransport()

  private init() {
    let method = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK, "pagesync transport")!
    _ = BIO_meth_set_read_ex(method) { bio, destination, capacity, readBytes in
      BIO_clear_flags(bio, BIO_FLAGS_READ | BIO_FLAGS_WRITE | BIO_FLAGS_IO_SPECIAL | BIO_FLAGS_SHOULD_RETRY)
      guard let bio, let destination, let data = BIO_get_data(bio) else { return 0 }
      let session = Unmanaged<TLSSession>.fromOpaque(data).takeUnretainedValue()
      let count = session.transportRead(UnsafeMutableRawPointer(destination), capacity)
      readBytes?.pointee = count
      if count == 0 {
        // Nothing to read yet: retry later (not end of file).
        BIO_set_flags(bio, BIO_FLAGS_READ | BIO_FLAGS_SHOULD_RETRY)
        return 0
      }
      return 1
    }
    _ = BIO_meth_set_write_ex(method) { bio, source, count, written in
      BIO_clear_flags(bio, BIO_FLAGS_READ | BIO_FLAGS_WRITE | BIO_FLAGS_IO_SPECIAL | BIO_FLAGS_SHOULD_RETRY)
      guard let bio, let data = BIO_get_data(bio) else { return 0 }
      let session = Unmanaged<TLSSession>.fromOpaque(data).takeUnretainedValue()
      if count > 0, let source { session.transportWrite(UnsafeRawBufferPointer(start: source, count: count)) }
      written?.pointee = count
      return 1
    }
    _ = BIO_meth_set_ctrl(method) { _, command, _, _ in
      // Writes are handed over at the end of each call: a flush has nothing to do. Nothing else is supported
      // (OpenSSL asks about kTLS, datagrams and the like, and takes 0 as no). Never touches the session: this
      // also runs while the SSL is freed.
      command == BIO_CTRL_FLUSH ? 1 : 0
    }
    self.method = method
  }
}
