#if canImport(Glibc)
  import Glibc
#endif

/// A certificate authority made at test time with the `openssl` command (no private key is committed), and
/// server certificates it signs: for TLS tests against real peers (curl `--cacert`, `openssl s_client`,
/// Python's `ssl`). Everything lives in a temporary directory that `remove` deletes.
public struct TestCertificates: Sendable {
  public let directory: String
  /// The CA's certificate (PEM): what a client trusts.
  public var caFile: String { directory + "/ca.pem" }

  /// Makes a directory and a CA (P-256, valid two days) in it.
  public init(label: String = "tls") throws {
    var template = Array("/tmp/pagesync-\(label)-XXXXXX".utf8CString)
    guard let made = mkdtemp(&template) else {
      throw CommandFailed(command: ["mkdtemp"], status: nil, errorOutput: "errno \(errno)")
    }
    directory = String(cString: made)
    try Self.openssl([
      "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout",
      directory + "/ca.key", "-out", directory + "/ca.pem", "-days", "2", "-subj", "/CN=pagesync test CA",
    ])
  }

  /// A server key and certificate signed by the CA for `names` (`DNS:localhost`, `IP:127.0.0.1`, ...), written
  /// as `<name>.pem` (the certificate, then the CA's: a chain) and `<name>.key`. Returns (certificate, key).
  @discardableResult
  public func issue(_ name: String, names: [String] = ["DNS:localhost", "IP:127.0.0.1"], days: Int = 2) throws
    -> (certificate: String, key: String)
  {
    let base = directory + "/" + name
    try Self.openssl([
      "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", base + ".key",
      "-out",
      base + ".csr", "-subj", "/CN=\(name)",
    ])
    try write(base + ".ext", "subjectAltName=\(names.joined(separator: ","))\n")
    try Self.openssl([
      "x509", "-req", "-in", base + ".csr", "-CA", caFile, "-CAkey", directory + "/ca.key", "-CAcreateserial",
      "-out", base + ".leaf", "-days", "\(days)", "-extfile", base + ".ext",
    ])
    let leaf = try read(base + ".leaf")
    let ca = try read(caFile)
    try write(base + ".pem", leaf + ca)
    return (base + ".pem", base + ".key")
  }

  /// Writes `text` to `path` (owner-only).
  public func write(_ path: String, _ text: String) throws {
    let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
    guard fd >= 0 else {
      throw CommandFailed(command: ["open", path], status: nil, errorOutput: "errno \(errno)")
    }
    defer { close(fd) }
    let bytes = Array(text.utf8)
    var offset = 0
    while offset < bytes.count {
      let n = bytes[offset...].withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
      guard n > 0 else {
        throw CommandFailed(command: ["write", path], status: nil, errorOutput: "errno \(errno)")
      }
      offset += n
    }
  }

  func read(_ path: String) throws -> String {
    let run = try runToCompletion("cat", [path])
    guard run.status == 0 else {
      throw CommandFailed(command: ["cat", path], status: run.status, errorOutput: run.errorOutput)
    }
    return run.output
  }

  public func remove() { _ = try? runToCompletion("rm", ["-rf", directory]) }

  static func openssl(_ arguments: [String]) throws {
    let run = try runToCompletion("openssl", arguments)
    guard run.status == 0 else {
      throw CommandFailed(command: ["openssl"] + arguments, status: run.status, errorOutput: run.errorOutput)
    }
  }
}
