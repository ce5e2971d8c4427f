import JSONWebToken
import Web

#if canImport(Glibc)
  import Glibc
#endif

/// `jwt-bench DIR`: DIR holds what `mint.py` wrote (hs256.secret, jwks.json, and a token per algorithm). For each
/// algorithm it times the broker's two paths: uncached (split, decode, verify the signature, check the claims:
/// what `Authenticator` does for a token it has not seen) and cached (SHA-256 of the token and a cache lookup:
/// a device that reconnects). One thread, as on the broker's loop.
func readFile(_ path: String) -> [UInt8] {
  guard let file = fopen(path, "rb") else { fatalError("cannot read \(path)") }
  defer { fclose(file) }
  var bytes: [UInt8] = []
  var chunk = [UInt8](repeating: 0, count: 65536)
  while true {
    let count = fread(&chunk, 1, chunk.count, file)
    bytes.append(contentsOf: chunk[0..<count])
    if count < chunk.count { break }
  }
  while bytes.last == UInt8(ascii: "\n") { bytes.removeLast() }
  return bytes
}

func seconds() -> Double {
  var spec = timespec()
  clock_gettime(CLOCK_MONOTONIC, &spec)
  return Double(spec.tv_sec) + Double(spec.tv_nsec) / 1e9
}

/// Calls per second of `body`, over about half a second after a warm-up.
func rate(_ body: () -> Bool) -> Double {
  for _ in 0..<100 { precondition(body(), "a verification failed") }
  var count = 0
  let start = seconds()
  var elapsed = 0.0
  while elapsed < 0.5 {
    for _ in 0..<100 { precondition(body(), "a verification failed") }
    count += 100
    elapsed = seconds() - start
  }
  return Double(count) / elapsed
}

let directory = CommandLine.arguments.count > 1 ? CommandLine.arguments[1] : "."
let now: Int64 = Int64(time(nil))
let hsKey = try JWTKey(secret: readFile(directory + "/hs256.secret"))
let jwks = try JWKSet.keys(from: readFile(directory + "/jwks.json"))
let cases: [(String, JWTVerifier, [UInt8])] = [
  (
    "HS256", JWTVerifier(policy: JWTPolicy(algorithms: [.hs256]), keys: [hsKey]),
    readFile(directory + "/hs256.jwt")
  ),
  (
    "ES256", JWTVerifier(policy: JWTPolicy(algorithms: [.es256]), keys: jwks),
    readFile(directory + "/es256.jwt")
  ),
  (
    "RS256", JWTVerifier(policy: JWTPolicy(algorithms: [.rs256]), keys: jwks),
    readFile(directory + "/rs256.jwt")
  ),
  (
    "EdDSA", JWTVerifier(policy: JWTPolicy(algorithms: [.edDSA]), keys: jwks),
    readFile(directory + "/eddsa.jwt")
  ),
]
print("| algorithm | uncached (verifications/s) | µs each | cached (lookups/s) | µs each |")
print("|---|---|---|---|---|")
for (name, verifier, token) in cases {
  let uncached = rate {
    guard let parts = JWTParts(token), case .success = verifier.verify(parts, now: now) else { return false }
    return true
  }
  var cache = JWTCache<Int>(capacity: 100_000)
  // A full cache, as on a busy broker: the lookups hash into a large table.
  for index in 0..<99_999 {
    cache.insert(index, for: Crypto.sha256(Array("filler \(index)".utf8)), expiresAt: now + 3600, now: now)
  }
  cache.insert(1, for: Crypto.sha256(token), expiresAt: now + 3600, now: now)
  let cached = rate { cache.value(for: Crypto.sha256(token), now: now) != nil }
  func figure(_ value: Double) -> String { String(Int(value.rounded())) }
  func micros(_ value: Double) -> String { String(Double(Int(1e7 / value)) / 10) }
  print("| \(name) | \(figure(uncached)) | \(micros(uncached)) | \(figure(cached)) | \(micros(cached)) |")
}
