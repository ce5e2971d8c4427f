#pragma once
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
