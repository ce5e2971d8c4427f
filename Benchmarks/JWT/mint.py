"""Writes what jwt-bench reads into DIR: an HS256 secret and token, the public halves of an ES256, an RS256 (2048
bits) and an EdDSA key pair as a JWK Set and a token each signed (PyJWT + cryptography; the private keys are not
kept). Usage: mint.py DIR"""
import base64, json, os, sys, time

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa

directory = sys.argv[1]
b64 = lambda data: base64.urlsafe_b64encode(data).rstrip(b"=").decode()
claims = {"sub": "alice", "workspaces": ["team-a", "team-b"], "iss": "https://id.example", "aud": "pagesync",
          "exp": int(time.time()) + 3600}
secret = os.urandom(32).hex().encode()
key = ec.generate_private_key(ec.SECP256R1())
numbers = key.public_key().public_numbers()
rsa_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
rsa_numbers = rsa_key.public_key().public_numbers()
ed_key = ed25519.Ed25519PrivateKey.generate()
ed_x = ed_key.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
integer = lambda value: b64(value.to_bytes((value.bit_length() + 7) // 8, "big"))
files = {
    "hs256.secret": secret.decode(),
    "hs256.jwt": jwt.encode(claims, secret, algorithm="HS256"),
    "es256.jwt": jwt.encode(claims, key, algorithm="ES256", headers={"kid": "e1"}),
    "rs256.jwt": jwt.encode(claims, rsa_key, algorithm="RS256", headers={"kid": "r1"}),
    "eddsa.jwt": jwt.encode(claims, ed_key, algorithm="EdDSA", headers={"kid": "o1"}),
    "jwks.json": json.dumps({"keys": [
        {"kty": "EC", "kid": "e1", "crv": "P-256", "x": b64(numbers.x.to_bytes(32, "big")),
         "y": b64(numbers.y.to_bytes(32, "big"))},
        {"kty": "RSA", "kid": "r1", "n": integer(rsa_numbers.n), "e": integer(rsa_numbers.e)},
        {"kty": "OKP", "kid": "o1", "crv": "Ed25519", "x": b64(ed_x)},
    ]}),
}
for name, text in files.items():
    with open(os.path.join(directory, name), "w") as file:
        file.write(text + "\n")
