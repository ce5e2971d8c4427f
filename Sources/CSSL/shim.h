#pragma once
#include <openssl/ssl.h>
#include <openssl/err.h>
#include <openssl/x509v3.h>

// OpenSSL spells these as macros over SSL_ctrl / SSL_CTX_ctrl / BIO_ctrl, which Swift does not import; and the
// ALPN selection callback is a C function with no Swift context to reach.

static inline int pagesync_ctx_set_min_tls12(SSL_CTX *ctx) {
  return SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
}

static inline long pagesync_ctx_set_mode(SSL_CTX *ctx, long mode) { return SSL_CTX_set_mode(ctx, mode); }

/// No renegotiation (a client could make the server pay for handshakes without reconnecting), no compression
/// (CRIME); a server prefers its own order of ciphers.
static inline void pagesync_ctx_set_options(SSL_CTX *ctx, int server) {
  uint64_t options = SSL_OP_NO_RENEGOTIATION | SSL_OP_NO_COMPRESSION;
  if (server) options |= SSL_OP_CIPHER_SERVER_PREFERENCE;
  SSL_CTX_set_options(ctx, options);
}

static inline int pagesync_set_host_name(SSL *ssl, const char *name) {
  return (int)SSL_set_tlsext_host_name(ssl, name);
}

/// The ticket keys (name, HMAC and AES keys, 80 bytes) of a server context, copied to a new one so that a
/// reload of the certificate does not cost every client its resumption.
static inline int pagesync_ctx_copy_ticket_keys(SSL_CTX *from, SSL_CTX *to) {
  unsigned char keys[80];
  if (SSL_CTX_get_tlsext_ticket_keys(from, keys, sizeof keys) != 1) return 0;
  int ok = (int)SSL_CTX_set_tlsext_ticket_keys(to, keys, sizeof keys);
  OPENSSL_cleanse(keys, sizeof keys);
  return ok;
}

static const unsigned char pagesync_alpn_http11[] = {8, 'h', 't', 't', 'p', '/', '1', '.', '1'};

/// Server side: picks http/1.1 when the client offers it; a client that offers ALPN without it gets the
/// no_application_protocol alert (RFC 7301), one that offers none goes on without.
static inline int pagesync_alpn_select(SSL *ssl, const unsigned char **out, unsigned char *outlen,
                                       const unsigned char *in, unsigned int inlen, void *arg) {
  (void)ssl;
  (void)arg;
  unsigned char *selected = NULL;
  if (SSL_select_next_proto(&selected, outlen, pagesync_alpn_http11, sizeof pagesync_alpn_http11, in, inlen) !=
      OPENSSL_NPN_NEGOTIATED)
    return SSL_TLSEXT_ERR_ALERT_FATAL;
  *out = selected;
  return SSL_TLSEXT_ERR_OK;
}

static inline void pagesync_ctx_select_http11(SSL_CTX *ctx) {
  SSL_CTX_set_alpn_select_cb(ctx, pagesync_alpn_select, NULL);
}

static inline int pagesync_offer_http11(SSL *ssl) {
  return SSL_set_alpn_protos(ssl, pagesync_alpn_http11, sizeof pagesync_alpn_http11);
}

/// An ephemeral P-256 key and a self-signed certificate for `common_name`, valid for a day, installed in `ctx`;
/// the certificate's PEM is written to `pem` (at most `capacity` bytes, NUL-terminated). For tests and fuzzing:
/// no key file on disk. Returns 1 on success.
static inline int pagesync_ctx_use_ephemeral_certificate(SSL_CTX *ctx, const char *common_name, char *pem,
                                                         size_t capacity) {
  int ok = 0;
  EVP_PKEY *key = EVP_EC_gen("P-256");
  X509 *cert = X509_new();
  BIO *out = BIO_new(BIO_s_mem());
  if (!key || !cert || !out) goto done;
  X509_set_version(cert, 2);
  ASN1_INTEGER_set(X509_get_serialNumber(cert), 1);
  X509_gmtime_adj(X509_getm_notBefore(cert), -60);
  X509_gmtime_adj(X509_getm_notAfter(cert), 86400);
  X509_set_pubkey(cert, key);
  X509_NAME *name = X509_get_subject_name(cert);
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, (const unsigned char *)common_name, -1, -1, 0);
  X509_set_issuer_name(cert, name);
  if (!X509_sign(cert, key, EVP_sha256())) goto done;
  if (SSL_CTX_use_certificate(ctx, cert) != 1 || SSL_CTX_use_PrivateKey(ctx, key) != 1) goto done;
  if (PEM_write_bio_X509(out, cert) != 1) goto done;
  int length = BIO_read(out, pem, (int)capacity - 1);
  if (length <= 0) goto done;
  pem[length] = 0;
  ok = 1;
done:
  BIO_free(out);
  X509_free(cert);
  EVP_PKEY_free(key);
  return ok;
}

static inline int pagesync_set_max_tls12(SSL *ssl) { return (int)SSL_set_max_proto_version(ssl, TLS1_2_VERSION); }

/// Client side: each session OpenSSL makes that can be resumed (TLS 1.3: one per ticket the server sends, after
/// the handshake) is parked in its SSL's app data, for the caller to take with pagesync_take_new_session.
static inline int pagesync_park_new_session(SSL *ssl, SSL_SESSION *session) {
  SSL_SESSION *old = (SSL_SESSION *)SSL_get_app_data(ssl);
  if (old) SSL_SESSION_free(old);
  SSL_set_app_data(ssl, session);
  return 1;
}

static inline void pagesync_ctx_collect_sessions(SSL_CTX *ctx) {
  SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_CLIENT | SSL_SESS_CACHE_NO_INTERNAL_STORE);
  SSL_CTX_sess_set_new_cb(ctx, pagesync_park_new_session);
}

/// The newest session parked for `ssl` (owned by the caller), or NULL.
static inline SSL_SESSION *pagesync_take_new_session(SSL *ssl) {
  SSL_SESSION *session = (SSL_SESSION *)SSL_get_app_data(ssl);
  SSL_set_app_data(ssl, NULL);
  return session;
}

