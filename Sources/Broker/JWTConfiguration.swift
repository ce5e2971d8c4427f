import JSONWebToken
import TOMLConfig

#if canImport(Glibc)
  import Glibc
#endif

/// One `[[auth.jwt]]` entry: the policy its tokens are held to and where its keys come from. The keys are read
/// by `BrokerConfiguration.loadJWTKeys()` (at start and on SIGHUP), not by `parse`, which reads text only.
public struct JWTConfiguration: Sendable, Equatable {
  /// Where the keys are read from: exactly one of `secret_file`, `public_key`, `jwks_file`.
  public enum KeySource: Sendable, Equatable {
    /// A file whose bytes, less one final newline, are the HS256 secret.
    case secretFile(String)
    /// A PEM public key file (RSA, EC P-256 or Ed25519).
    case publicKey(String)
    /// A JWK Set file (RFC 7517), its keys selected by `kid`.
    case jwksFile(String)

    var path: String {
      switch self {
      case .secretFile(let path), .publicKey(let path), .jwksFile(let path): path
      }
    }
    var key: String {
      switch self {
      case .secretFile: "secret_file"
      case .publicKey: "public_key"
      case .jwksFile: "jwks_file"
      }
    }
  }

  public var policy: JWTPolicy
  public var keySource: KeySource
  /// The keys as last read (empty until `loadJWTKeys`).
  public var keys: [JWTKey] = []
  /// The bytes they were read from: what tells a reload that a key file changed.
  var keyFileBytes: [UInt8] = []

  public init(policy: JWTPolicy, keySource: KeySource) {
    self.policy = policy
    self.keySource = keySource
  }

  public static func == (a: JWTConfiguration, b: JWTConfiguration) -> Bool {
    a.policy == b.policy && a.keySource == b.keySource && a.keyFileBytes == b.keyFileBytes
  }

  /// Reads the keys from `keySource`. An unreadable or unusable file is an error naming it and why.
  public mutating func loadKeys(index: Int) throws(ConfigError) {
    let path = keySource.path
    let name = "auth.jwt[\(index)].\(keySource.key)"
    func fail(_ message: String) -> ConfigError {
      ConfigError(file: path, line: nil, key: name, message: message)
    }
    let bytes: [UInt8]
    do {
      bytes = try Self.readFile(path)
    } catch {
      throw fail(error.description)
    }
    do {
      switch keySource {
      case .secretFile:
        var secret = bytes
        if secret.last == UInt8(ascii: "\n") { secret.removeLast() }
        keys = [try JWTKey(secret: secret)]
      case .publicKey: keys = [try JWTKey(pem: bytes)]
      case .jwksFile: keys = try JWKSet.keys(from: bytes)
      }
    } catch {
      throw fail(error.description)
    }
    let algorithms = Set(keys.map(\.algorithm))
    for algorithm in policy.algorithms where !algorithms.contains(algorithm) {
      throw fail("no key verifies \(algorithm.rawValue), which `algorithms` lists")
    }
    keyFileBytes = bytes
  }

  /// A key file's bytes; at most 1 MiB (a JWK Set of hundreds of RSA keys is far less).
  static func readFile(_ path: String) throws(JWTKeyError) -> [UInt8] {
    do {
      return try readConfiguredFile(path, limit: 1 << 20)
    } catch {
      throw JWTKeyError(error.message)
    }
  }
}

extension BrokerConfiguration {
  /// Reads every `[[auth.jwt]]` entry's keys (at start and on SIGHUP: a bad file fails the whole reload, and the
  /// running keys stay).
  public mutating func loadJWTKeys() throws(ConfigError) {
    for index in jwt.indices { try jwt[index].loadKeys(index: index) }
  }

  /// Parses the `[[auth.jwt]]` entries of `auth`.
  static func parseJWT(_ auth: ConfigTable) throws(ConfigError) -> [JWTConfiguration] {
    var entries: [JWTConfiguration] = []
    for entry in try auth.tables("jwt") {
      var algorithms: Set<JWTAlgorithm> = []
      let names = try entry.stringArray("algorithms", default: [])
      if names.isEmpty {
        throw entry.error("algorithms", "is required: one or more of HS256, RS256, ES256, EdDSA")
      }
      for name in names {
        guard let algorithm = JWTAlgorithm(rawValue: name) else {
          throw entry.error("algorithms", "\"\(name)\" is not one of HS256, RS256, ES256, EdDSA")
        }
        algorithms.insert(algorithm)
      }
      var sources: [JWTConfiguration.KeySource] = []
      if let path = try entry.optionalString("secret_file") { sources.append(.secretFile(path)) }
      if let path = try entry.optionalString("public_key") { sources.append(.publicKey(path)) }
      if let path = try entry.optionalString("jwks_file") { sources.append(.jwksFile(path)) }
      guard sources.count == 1, let source = sources.first, !source.path.isEmpty else {
        throw entry.error("secret_file", "exactly one of secret_file, public_key, jwks_file is required")
      }
      if case .secretFile = source, algorithms != [.hs256] {
        throw entry.error("algorithms", "a secret_file verifies HS256 only")
      }
      if case .publicKey = source, algorithms.contains(.hs256) {
        throw entry.error("algorithms", "a public key never verifies HS256")
      }
      var policy = JWTPolicy(algorithms: algorithms)
      policy.issuer = try entry.optionalString("issuer")
      policy.audience = try entry.optionalString("audience")
      policy.userClaim = try entry.string("user_claim", default: "sub")
      policy.workspacesClaim = try entry.string("workspaces_claim", default: "workspaces")
      if policy.userClaim.isEmpty { throw entry.error("user_claim", "must not be empty") }
      if policy.workspacesClaim.isEmpty { throw entry.error("workspaces_claim", "must not be empty") }
      policy.leewaySeconds = Int64(try entry.int("leeway_s", default: 0, range: 0...3600))
      try entry.rejectUnknownKeys()
      entries.append(JWTConfiguration(policy: policy, keySource: source))
    }
    return entries
  }
}
