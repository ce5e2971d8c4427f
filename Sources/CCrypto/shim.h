#pragma once
// SHA1_Init and friends are deprecated in OpenSSL 3 in favour of EVP, and kept for what EVP costs: the first EVP
// digest (or RAND_bytes) sets up OpenSSL 3's providers, which makes about 2 MiB more of libcrypto resident in a
// process that wants SHA-1 only for a WebSocket handshake (the device daemon: docs/benchmarks.md, issue #22).
#define OPENSSL_SUPPRESS_DEPRECATED
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/crypto.h>
#include <openssl/rand.h>
// JSON Web Token signatures (Sources/JSONWebToken): public keys from PEM and from JWK parameters, ECDSA
// signatures re-encoded from JOSE's r||s to DER.
#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/ecdsa.h>
#include <openssl/err.h>
#include <openssl/param_build.h>
#include <openssl/pem.h>
#include <openssl/sha.h>

/// SHA-1 of `count` bytes at `data` into `out` (20 bytes), without the EVP layer (see the top of this file).
static inline void pagesync_sha1(const void *data, size_t count, unsigned char *out) {
  SHA_CTX context;
  SHA1_Init(&context);
  SHA1_Update(&context, data, count);
  SHA1_Final(out, &context);
}

#include <sys/random.h>

/// `getrandom(2)` (glibc declares it in <sys/random.h>, which Swift's Glibc module leaves out).
static inline long pagesync_getrandom(void *buffer, size_t count) { return (long)getrandom(buffer, count, 0); }
