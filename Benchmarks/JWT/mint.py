"""Writes what jwt-bench reads into DIR: an HS256 secret and token, an ES256 key pair's public half as a JWK Set
and a token it signed (PyJWT + cryptography; the private key is not kept). Usage: mint.py DIR"""
import base64, json, os, sys, time

import jwt
from cryptography.hazmat.primitives.asymmetric import ec

directory = sys.argv[1]
b64 = lambda data: base64.urlsafe_b64encode(data).rstrip(b"=").decode()
claims = {"sub": "alice", "workspaces": ["team-a", "team-b"], "iss": "https://id.example", "aud": "pagesync",
          "exp": int(time.time()) + 3600}
secret = os.urandom(32).hex().encode()
key = ec.generate_private_key(ec.SECP256R1())
numbers = key.public_key().public_numbers()
files = {
    "hs256.secret": secret.decode(),
    "hs256.jwt": jwt.encode(claims, secret, algorithm="HS256"),
    "es256.jwt": jwt.encode(claims, key, algorithm="ES256", headers={"kid": "e1"}),
    "jwks.json": json.dumps({"keys": [{"kty": "EC", "kid": "e1", "crv": "P-256",
                                       "x": b64(numbers.x.to_bytes(32, "big")), "y": b64(numbers.y.to_bytes(32, "big"))}]}),
}
for name, text in files.items():
    with open(os.path.join(directory, name), "w") as file:
        file.write(text + "\n")
