import FuzzSupport
import JSONWebToken

/// The broker's JWT reader on any bytes: as a token under policies of every algorithm (an HS256 secret, and the
/// JWK Set below), and as a JWK Set. Any outcome but a trap is fine, with two properties: base64url has one
/// spelling per byte string (what decodes re-encodes to the same text), and the JWK Set (public keys of
/// throwaway key pairs whose private halves were never kept; Fuzz/Corpus/FuzzJWT has tokens they signed) loads.
let secret = Array("fuzz-secret-fuzz-secret-fuzz-secret!".utf8)
let jwks = Array(
  #"""
  {"keys":[
  {"kty":"EC","kid":"e1","crv":"P-256","x":"RMI0DAAkeLKVaI0JUa7EO_q7HE-_wZE76VYoFG03Cmw","y":"qlZGYCby95EYwzdg0vtEs8ef4KGLWxd2pDY7JGjNnuU"},
  {"kty":"OKP","kid":"o1","crv":"Ed25519","x":"5wGDez6G2mO-twTp8j9FFP7L-oaVx_JohTpFtcpZLPU"}
  ]}
  """#.utf8)
let verifiers: [JWTVerifier] = {
  var hs = JWTPolicy(algorithms: [.hs256])
  hs.issuer = "fuzz"
  hs.audience = "pagesync"
  hs.leewaySeconds = 5
  var asymmetric = JWTPolicy(algorithms: [.es256, .edDSA])
  asymmetric.userClaim = "uid"
  var made = [JWTVerifier(policy: hs, keys: [try! JWTKey(secret: secret)])]
  made.append(JWTVerifier(policy: asymmetric, keys: try! JWKSet.keys(from: jwks)))
  return made
}()

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> Int32 {
  let bytes = Array(UnsafeBufferPointer(start: data, count: size))
  if let decoded = Base64URL.decode(bytes) {
    precondition(Array(Base64URL.encode(decoded).utf8) == bytes, "base64url accepted a second spelling")
  }
  for verifier in verifiers {
    for now: Int64 in [0, 1_700_000_000, Int64.max / 2] {
      _ = verifier.verify(bytes, now: now)
    }
  }
  _ = try? JWKSet.keys(from: bytes)
  return 0
}

runLibFuzzer { data, size in fuzz(data ?? UnsafePointer(bitPattern: 1)!, size) }
