import EventLoop
import EventLoopTestKit
import Testing

/// The broker's `[[auth.jwt]]` held to PyJWT (Python/jwt_interop.py): keys made at test time with `cryptography`
/// (an HS256 secret, an RSA PEM, a JWK Set of RSA, EC P-256 and Ed25519 keys), a token minted by PyJWT for every
/// case, PyJWT's verdict on each compared with the broker's 401 reason, the refusals counted in /metrics, and a
/// device stream closed with 4401 "token expired" when its token's `exp` passes.
@Suite(.serialized) struct JWTInteropTests {
  @Test func theBrokerAgreesWithPyJWTOnEveryCase() throws {
    let keys = ScratchDirectory()
    defer { keys.remove() }
    let made = try runToCompletion(
      "python3", [integrationResource("Python/jwt_interop.py"), "keys", keys.path], timeout: 60_000)
    #expect(made.status == 0, "\(made.output)\(made.errorOutput)")
    guard made.status == 0 else { return }
    try expectBrokerScriptPasses(
      "jwt_interop.py", [keys.path], extraConfig: made.output, timeout: 90_000)
  }

  /// Key files the broker must refuse, made with `cryptography` (RSA of 1024 bits, P-384, a private key, a point
  /// off the curve, a JWK whose `alg` is not its key's, a short secret, a missing file): `--check-config` exits
  /// 64 with an error naming the file and the problem.
  @Test func badKeyFilesAreRefusedNamingTheFile() throws {
    let keys = ScratchDirectory()
    defer { keys.remove() }
    let binDirectory = String(builtProgram("").dropLast())
    let run = try runToCompletion(
      "python3", [integrationResource("Python/jwt_interop.py"), "badkeys", binDirectory, keys.path],
      timeout: 60_000)
    #expect(run.status == 0, "\(run.output)\(run.errorOutput)")
    #expect(run.output.hasSuffix("ALL OK\n"), "\(run.output)")
  }
}
