"""The broker's [[auth.jwt]] held to PyJWT, an implementation nobody here wrote.

Usage:
  jwt_interop.py keys DIR        makes the keys (HS256 secret, RSA PEM, a JWK Set of RSA, EC P-256 and Ed25519
                                 keys made with `cryptography`) in DIR and prints the [[auth.jwt]] entries
  jwt_interop.py badkeys BIN DIR writes key files the broker must refuse (RSA of 1024 bits, P-384, a private key,
                                 a point off the curve, a JWK whose alg is not its key's) and checks that
                                 `BIN/pagesync-broker --check-config` exits 64 naming the file and the problem
  jwt_interop.py BASE DIR        mints a token for every case with PyJWT, asks PyJWT's verdict, sends each to the
                                 broker at BASE, and checks the status, the 401's reason, /metrics, and that a
                                 device stream is closed with 4401 "token expired" when its token expires

Private keys stay in DIR (a scratch directory the test removes); nothing is committed. Prints "OK ..." per check
and "ALL OK" at the end; on the first mismatch "FAIL ..." and exit 1.
"""
import asyncio
import base64
import hashlib
import hmac
import json
import os
import sys
import time
import urllib.error
import urllib.request

import jwt
import websockets
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa

from checks import check, fail

ISS, JWKS_ISS, AUD = "https://id.test", "https://jwks.test", "pagesync"


def b64(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def pem_private(key):
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())


def pem_public(key):
    return key.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)


def make_keys(directory):
    secret = os.urandom(32).hex().encode()
    with open(os.path.join(directory, "hs256.secret"), "wb") as file:
        file.write(secret + b"\n")  # the broker drops one final newline
    keys = {
        "rsa_pem": rsa.generate_private_key(public_exponent=65537, key_size=2048),
        "rsa_jwk": rsa.generate_private_key(public_exponent=65537, key_size=2048),
        "ec": ec.generate_private_key(ec.SECP256R1()),
        "ed": ed25519.Ed25519PrivateKey.generate(),
        "ec_other": ec.generate_private_key(ec.SECP256R1()),
    }
    for name, key in keys.items():
        with open(os.path.join(directory, name + ".key"), "wb") as file:
            file.write(pem_private(key))
    with open(os.path.join(directory, "rsa.pem"), "wb") as file:
        file.write(pem_public(keys["rsa_pem"]))
    # The JWK Set, written from the keys' numbers with `cryptography` (not by PyJWT, which reads it back).
    rsa_numbers = keys["rsa_jwk"].public_key().public_numbers()
    ec_numbers = keys["ec"].public_key().public_numbers()
    ed_raw = keys["ed"].public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)

    def integer(value, length=None):
        length = length or (value.bit_length() + 7) // 8
        return b64(value.to_bytes(length, "big"))

    jwks = {
        "keys": [
            {"kty": "RSA", "kid": "r1", "use": "sig", "alg": "RS256", "n": integer(rsa_numbers.n),
             "e": integer(rsa_numbers.e)},
            {"kty": "EC", "kid": "e1", "crv": "P-256", "x": integer(ec_numbers.x, 32), "y": integer(ec_numbers.y, 32)},
            {"kty": "OKP", "kid": "o1", "crv": "Ed25519", "x": b64(ed_raw)},
            # An encryption key, which the broker skips.
            {"kty": "RSA", "kid": "enc1", "use": "enc", "n": integer(rsa_numbers.n), "e": integer(rsa_numbers.e)},
        ]
    }
    with open(os.path.join(directory, "jwks.json"), "w") as file:
        json.dump(jwks, file)
    print(
        f'[[auth.jwt]]\nalgorithms = ["HS256"]\nsecret_file = "{directory}/hs256.secret"\n'
        f'issuer = "{ISS}"\naudience = "{AUD}"\n'
        f'[[auth.jwt]]\nalgorithms = ["RS256"]\npublic_key = "{directory}/rsa.pem"\n'
        f'issuer = "{ISS}"\naudience = "{AUD}"\n'
        f'[[auth.jwt]]\nalgorithms = ["RS256", "ES256", "EdDSA"]\njwks_file = "{directory}/jwks.json"\n'
        f'issuer = "{JWKS_ISS}"\naudience = "{AUD}"\nuser_claim = "uid"\nworkspaces_claim = "teams"\n'
    )


def load(directory):
    def private(name):
        with open(os.path.join(directory, name + ".key"), "rb") as file:
            return serialization.load_pem_private_key(file.read(), password=None)

    with open(os.path.join(directory, "hs256.secret"), "rb") as file:
        secret = file.read()[:-1]
    with open(os.path.join(directory, "rsa.pem"), "rb") as file:
        rsa_public_pem = file.read()
    with open(os.path.join(directory, "jwks.json")) as file:
        jwks = jwt.PyJWKSet.from_dict(json.load(file))
    keys = {name: private(name) for name in ("rsa_pem", "rsa_jwk", "ec", "ed", "ec_other")}
    return secret, rsa_public_pem, jwks, keys


REASONS = {
    jwt.ExpiredSignatureError: "expired",
    jwt.ImmatureSignatureError: "not yet valid",
    jwt.InvalidIssuerError: "wrong issuer",
    jwt.InvalidAudienceError: "wrong audience",
    jwt.InvalidSignatureError: "bad signature",
    jwt.InvalidAlgorithmError: "algorithm not allowed",
    jwt.MissingRequiredClaimError: "malformed",
    jwt.DecodeError: "malformed",
}


def pyjwt_verdict(token, key, algorithms, issuer, jwks=None):
    """None if PyJWT accepts the token as the broker's entry would be configured, else the reason in the broker's
    words."""
    try:
        if jwks is not None:
            header = jwt.get_unverified_header(token)
            if header.get("alg") not in algorithms:
                return "algorithm not allowed"
            kid = header.get("kid")
            matches = [k for k in jwks.keys if k.key_id == kid]
            if not matches:
                return "unknown key id"
            key = matches[0]
        jwt.decode(token, key, algorithms=algorithms, issuer=issuer, audience=AUD, options={"require": ["exp"]})
        return None
    except tuple(REASONS) as error:
        for kind, reason in REASONS.items():
            if isinstance(error, kind):
                return reason
    except jwt.InvalidTokenError as error:
        return "malformed: " + type(error).__name__


def cases(directory):
    secret, rsa_public_pem, jwks, keys = load(directory)
    now = int(time.time())
    claims = {"sub": "alice", "workspaces": ["w1"], "iss": ISS, "aud": AUD, "exp": now + 600}
    jwks_claims = {"uid": "carol", "teams": ["w3"], "iss": JWKS_ISS, "aud": [AUD, "other"], "exp": now + 600}
    hs = dict(key=secret, algorithms=["HS256"], issuer=ISS)
    rs = dict(key=keys["rsa_pem"].public_key(), algorithms=["RS256"], issuer=ISS)
    js = dict(key=None, algorithms=["RS256", "ES256", "EdDSA"], issuer=JWKS_ISS, jwks=jwks)

    def with_claims(**changes):
        return {**claims, **changes}

    hs_none_header = b64(json.dumps({"alg": "none", "typ": "JWT"}).encode())
    body = b64(json.dumps(claims).encode())
    # HS256 "signed" with the RSA public key's PEM as the secret: PyJWT refuses to mint it, so it is made here.
    confused_input = b64(json.dumps({"alg": "HS256", "typ": "JWT"}).encode()) + "." + body
    confused = confused_input + "." + b64(hmac.new(rsa_public_pem, confused_input.encode(), hashlib.sha256).digest())
    good_hs = jwt.encode(claims, secret, algorithm="HS256")
    # "alg" twice: Python's json (so PyJWT) takes the last, HS256; the broker refuses duplicate names (RFC 7515
    # section 5.2 allows either), so the token's meaning cannot depend on the parser.
    twice_input = b64(b'{"alg":"none","alg":"HS256"}') + "." + body
    twice = twice_input + "." + b64(hmac.new(secret, twice_input.encode(), hashlib.sha256).digest())
    tampered = good_hs[:-4] + ("AAAA" if not good_hs.endswith("AAAA") else "BBBB")
    padded_header, padded_rest = good_hs.split(".", 1)
    return [
        # (name, token, PyJWT's verification settings, the broker's expected reason or None, the user)
        ("HS256", good_hs, hs, None, "alice"),
        ("RS256 (PEM)", jwt.encode(claims, keys["rsa_pem"], algorithm="RS256"), rs, None, "alice"),
        ("RS256 (JWKS)", jwt.encode(jwks_claims, keys["rsa_jwk"], algorithm="RS256", headers={"kid": "r1"}), js,
         None, "carol"),
        ("ES256 (JWKS)", jwt.encode(jwks_claims, keys["ec"], algorithm="ES256", headers={"kid": "e1"}), js, None,
         "carol"),
        ("EdDSA (JWKS)", jwt.encode(jwks_claims, keys["ed"], algorithm="EdDSA", headers={"kid": "o1"}), js, None,
         "carol"),
        ("expired", jwt.encode(with_claims(exp=now - 60), secret, algorithm="HS256"), hs, "expired", None),
        ("nbf in the future", jwt.encode(with_claims(nbf=now + 300), secret, algorithm="HS256"), hs,
         "not yet valid", None),
        ("wrong iss", jwt.encode(with_claims(iss="https://evil.test"), secret, algorithm="HS256"), hs,
         "wrong issuer", None),
        ("wrong aud", jwt.encode(with_claims(aud="someone-else"), secret, algorithm="HS256"), hs,
         "wrong audience", None),
        ("bad signature (HS256, tampered)", tampered, hs, "bad signature", None),
        ("bad signature (ES256, another key)",
         jwt.encode(jwks_claims, keys["ec_other"], algorithm="ES256", headers={"kid": "e1"}), js, "bad signature",
         None),
        ("alg none", hs_none_header + "." + body + ".", hs, "algorithm not allowed", None),
        # The broker's HS256 entry checks it with its secret (bad signature); no RSA key is ever used as a secret.
        ("HS256 with the RSA public key as secret", confused, hs, "bad signature", None),
        ("unknown kid", jwt.encode(jwks_claims, keys["ec"], algorithm="ES256", headers={"kid": "nope"}), js,
         "unknown key id", None),
        ("malformed (not JSON)", "abc.def.ghi", hs, "malformed", None),
        ("alg twice (none, then HS256)", twice, hs, "malformed", None),
        ("malformed (padded base64url)", padded_header + "==." + padded_rest, hs, "malformed", None),
        ("no exp", jwt.encode({k: v for k, v in claims.items() if k != "exp"}, secret, algorithm="HS256"), hs,
         "malformed", None),
    ]


def request(base, token):
    """(status, body, WWW-Authenticate) of an authenticated POST /v1/catchup."""
    req = urllib.request.Request(base + "/v1/catchup", data=b'{"pages": {}}', method="POST")
    req.add_header("Authorization", "Bearer " + token)
    req.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(req, timeout=20) as response:
            return response.status, json.loads(response.read()), None
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read() or b"null"), error.headers.get("WWW-Authenticate")


def refusals(base):
    with urllib.request.urlopen(base + "/metrics", timeout=20) as response:
        counts = {}
        for line in response.read().decode().splitlines():
            if line.startswith("pagesync_broker_auth_refusals_total{"):
                reason = line.split('reason="', 1)[1].split('"', 1)[0]
                counts[reason] = float(line.rsplit(" ", 1)[1])
        return counts


async def stream_expires(base, directory):
    secret = load(directory)[0]
    # Four seconds (three to four: exp is whole seconds), so that a machine busy with sanitizers still opens the
    # stream well before the token expires.
    lifetime = 4
    token = jwt.encode(
        {"sub": "alice", "workspaces": ["w1"], "iss": ISS, "aud": AUD, "exp": int(time.time()) + lifetime},
        secret, algorithm="HS256")
    ws = base.replace("http://", "ws://") + "/v1/stream"
    started = time.monotonic()
    async with websockets.connect(ws, additional_headers={"Authorization": "Bearer " + token}) as socket:
        check(True, f"a device stream opens with a JWT that expires in {lifetime} s")
        try:
            await asyncio.wait_for(socket.recv(), timeout=lifetime + 10)
            fail("the stream sent a frame instead of closing")
        except websockets.ConnectionClosed as closed:
            elapsed = time.monotonic() - started
            check(closed.rcvd is not None and closed.rcvd.code == 4401, f"closed with 4401 ({closed.rcvd})")
            check(closed.rcvd.reason == "token expired", "reason 'token expired'")
            check(lifetime - 1.5 <= elapsed <= lifetime + 6,
                  f"closed when the token expired ({elapsed:.1f} s after opening)")
    try:
        async with websockets.connect(ws, additional_headers={"Authorization": "Bearer " + token}):
            fail("the expired token opened a stream again")
    except websockets.InvalidStatus as error:
        check(error.response.status_code == 401, "the expired token's upgrade is refused with 401")
        check(b"expired" in error.response.body, "and the body says expired")


def run_checks(base, directory):
    before = refusals(base)
    check(all(value == 0 for value in before.values()) and "expired" in before, "every reason's counter starts at 0")
    expected_counts = {}
    for name, token, settings, reason, user in cases(directory):
        settings = dict(settings)
        verdict = pyjwt_verdict(token, settings.pop("key"), **settings)
        if name == "HS256 with the RSA public key as secret":
            # PyJWT with the HS256 secret says bad signature too; PyJWT given the PEM as an HMAC key refuses it.
            try:
                jwt.decode(token, load(directory)[1], algorithms=["HS256"])
                fail("PyJWT accepted an asymmetric key's PEM as an HMAC secret")
            except jwt.InvalidKeyError:
                check(True, "PyJWT refuses the RSA public key's PEM as an HMAC secret")
        if name.startswith("alg twice"):
            # The one deliberate disagreement: PyJWT reads the last "alg" and accepts.
            check(verdict is None, f"{name}: PyJWT accepts it (its JSON parser keeps the last duplicate)")
        else:
            check(verdict == reason, f"{name}: PyJWT's verdict is {verdict or 'accepted'}")
        status, body, challenge = request(base, token)
        if reason is None:
            check(status == 200, f"{name}: the broker accepts it ({status} {body})")
        else:
            check(status == 401 and body["message"] == "token refused: " + reason,
                  f"{name}: the broker refuses it: {status} {body}")
            check(challenge is not None and 'error="invalid_token"' in challenge, f"{name}: WWW-Authenticate {challenge}")
            label = reason.replace(" ", "_")
            expected_counts[label] = expected_counts.get(label, 0) + 1
    # A token longer than [limits] token_bytes (8192 by default) is refused before any parsing.
    long_token = jwt.encode({"sub": "a", "workspaces": ["w1"], "pad": "x" * 9000, "exp": int(time.time()) + 60},
                            load(directory)[0], algorithm="HS256")
    status, body, _ = request(base, long_token)
    check(status == 401 and "token_bytes" in body["message"], f"a token over [limits] token_bytes: {status} {body}")
    expected_counts["malformed"] = expected_counts.get("malformed", 0) + 1
    after = refusals(base)
    for label, count in expected_counts.items():
        check(after.get(label, 0) - before.get(label, 0) == count, f"auth_refusals_total{{reason={label}}} +{count}")
    asyncio.run(stream_expires(base, directory))
    print("ALL OK")


def bad_keys(bin_dir, directory):
    import subprocess

    def pem(key):
        return pem_public(key).decode()

    ec_numbers = ec.generate_private_key(ec.SECP256R1()).public_key().public_numbers()
    off_curve = {"kty": "EC", "crv": "P-256", "x": b64(ec_numbers.x.to_bytes(32, "big")),
                 "y": b64(((ec_numbers.y + 1) % (2**256)).to_bytes(32, "big"))}
    rsa_numbers = rsa.generate_private_key(public_exponent=65537, key_size=2048).public_key().public_numbers()
    rsa_jwk = {"kty": "RSA", "kid": "r", "alg": "ES256", "n": b64(rsa_numbers.n.to_bytes(256, "big")), "e": "AQAB"}
    cases = [
        ("RS256", "public_key", "rsa1024.pem", pem(rsa.generate_private_key(public_exponent=65537, key_size=1024)),
         "an RSA key must have at least 2048 bits (it has 1024)"),
        ("ES256", "public_key", "p384.pem", pem(ec.generate_private_key(ec.SECP384R1())),
         "an EC key must be on P-256 (ES256)"),
        ("ES256", "public_key", "private.pem", pem_private(ec.generate_private_key(ec.SECP256R1())).decode(),
         "not a PEM public key"),
        ("ES256", "jwks_file", "off-curve.json", json.dumps({"keys": [off_curve]}), "key 0: "),
        ("RS256", "jwks_file", "alg-mismatch.json", json.dumps({"keys": [rsa_jwk]}),
         'key 0 (kid "r"): "alg": "ES256" is not what its key verifies (RS256)'),
        ("HS256", "secret_file", "short.secret", "too short\n", "an HS256 secret must be at least 32 bytes"),
        ("ES256", "jwks_file", "missing.json", None, "cannot read the file: No such file or directory"),
    ]
    for algorithm, source, name, text, message in cases:
        path = os.path.join(directory, name)
        if text is not None:
            with open(path, "w") as file:
                file.write(text)
        config = os.path.join(directory, name + ".toml")
        with open(config, "w") as file:
            file.write(f'[[auth.jwt]]\nalgorithms = ["{algorithm}"]\n{source} = "{path}"\n')
        run = subprocess.run([os.path.join(bin_dir, "pagesync-broker"), "--config", config, "--check-config"],
                             capture_output=True, text=True, timeout=30)
        expected = f"Error: {path}: auth.jwt[0].{source}: "
        check(run.returncode == 64 and expected in run.stderr and message in run.stderr,
              f"{name}: exit 64 naming the file: {run.stderr.splitlines()[0] if run.stderr else run.returncode}")
    print("ALL OK")


if __name__ == "__main__":
    if sys.argv[1] == "keys":
        make_keys(sys.argv[2])
    elif sys.argv[1] == "badkeys":
        bad_keys(sys.argv[2], sys.argv[3])
    elif sys.argv[1].startswith("http://"):
        run_checks(sys.argv[1], sys.argv[2])
    else:
        fail("usage: jwt_interop.py keys DIR | jwt_interop.py BASE DIR")
