/* tls.c: the TLS contexts keyed by the pod key (see tls.h). */
#include "podfs/tls.h"
#include "podfs/tls_bio.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/kdf.h>
#include <openssl/pem.h>
#include <openssl/x509v3.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* TLS_AES_128_GCM_SHA256 (RFC 8446 B.4): the PSK's suite, so its hash
 * (SHA-256) is the PSK's. */
static const unsigned char psk_suite[2] = { 0x13, 0x01 };

/* The only suites offered or accepted; with the SHA-256 PSK the first is
 * the one a handshake ends with. This CPU family has AES-NI. */
#define SUITES "TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384"

struct psk {
	uint8_t b[PFS_TLS_PSK_LEN];
};

static int ctx_index = -1;
static CRYPTO_ONCE index_once = CRYPTO_ONCE_STATIC_INIT;

static void psk_free_cb(void *parent, void *ptr, CRYPTO_EX_DATA *ad, int idx, long argl,
			void *argp)
{
	struct psk *p = ptr;

	if (p) {
		OPENSSL_cleanse(p, sizeof(*p));
		free(p);
	}
}

static void make_index(void)
{
	ctx_index = SSL_CTX_get_ex_new_index(0, NULL, NULL, NULL, psk_free_cb);
}

int pfs_tls_psk(const uint8_t key[PFS_KEY_LEN], uint8_t psk[PFS_TLS_PSK_LEN])
{
	static const char salt[] = "podfs tls";
	static const char info[] = "podfs/1 tls13 external psk";
	EVP_KDF *kdf = EVP_KDF_fetch(NULL, "HKDF", NULL);
	EVP_KDF_CTX *kctx = kdf ? EVP_KDF_CTX_new(kdf) : NULL;
	OSSL_PARAM params[] = {
		OSSL_PARAM_construct_utf8_string(OSSL_KDF_PARAM_DIGEST, (char *)"SHA256", 0),
		OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_KEY, (void *)key, PFS_KEY_LEN),
		OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_SALT, (void *)salt,
						  sizeof(salt) - 1),
		OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_INFO, (void *)info,
						  sizeof(info) - 1),
		OSSL_PARAM_construct_end(),
	};
	int ok = kctx && EVP_KDF_derive(kctx, psk, PFS_TLS_PSK_LEN, params) == 1;

	EVP_KDF_CTX_free(kctx);
	EVP_KDF_free(kdf);
	return ok ? 0 : -EIO;
}

/* A session that carries the PSK of ssl's context. */
static SSL_SESSION *psk_session(SSL *ssl)
{
	const struct psk *p = SSL_CTX_get_ex_data(SSL_get_SSL_CTX(ssl), ctx_index);
	const SSL_CIPHER *cipher = SSL_CIPHER_find(ssl, psk_suite);
	SSL_SESSION *s;

	if (!p || !cipher || !(s = SSL_SESSION_new()))
		return NULL;
	if (!SSL_SESSION_set1_master_key(s, p->b, sizeof(p->b)) ||
	    !SSL_SESSION_set_cipher(s, cipher) ||
	    !SSL_SESSION_set_protocol_version(s, TLS1_3_VERSION)) {
		SSL_SESSION_free(s);
		return NULL;
	}
	return s;
}

/* Client: offers the PSK (again after a HelloRetryRequest, when md is
 * the hash of the suite chosen). */
static int use_session_cb(SSL *ssl, const EVP_MD *md, const unsigned char **id, size_t *idlen,
			  SSL_SESSION **sess)
{
	SSL_SESSION *s = psk_session(ssl);

	*sess = NULL;
	*id = NULL;
	*idlen = 0;
	if (!s)
		return 0;
	if (md && SSL_CIPHER_get_handshake_digest(SSL_SESSION_get0_cipher(s)) != md) {
		SSL_SESSION_free(s); /* a suite of another hash: this PSK does not fit */
		return 1;
	}
	*sess = s;
	*id = (const unsigned char *)PFS_TLS_PSK_IDENTITY;
	*idlen = sizeof(PFS_TLS_PSK_IDENTITY) - 1;
	return 1;
}

/* Server: the PSK of the one identity; any other finds none (and the
 * handshake fails, as there is no certificate to fall back to). */
static int find_session_cb(SSL *ssl, const unsigned char *id, size_t idlen, SSL_SESSION **sess)
{
	*sess = NULL;
	if (idlen != sizeof(PFS_TLS_PSK_IDENTITY) - 1 ||
	    memcmp(id, PFS_TLS_PSK_IDENTITY, idlen) != 0)
		return 1;
	*sess = psk_session(ssl);
	return *sess ? 1 : 0;
}

/* Client: any certificate fails verification (there is no trust store):
 * a server must use the PSK. */
static int no_cert_cb(int ok, X509_STORE_CTX *x)
{
	return 0;
}

/* A context of TLS 1.3 only, our suites, no tickets and no session
 * cache, or NULL with a reason in err[errlen]. */
static SSL_CTX *ctx_base(bool server, char *err, size_t errlen)
{
	SSL_CTX *ctx;

	CRYPTO_THREAD_run_once(&index_once, make_index);
	if (ctx_index < 0) {
		snprintf(err, errlen, "cannot set up TLS: no ex_data index");
		return NULL;
	}
	ctx = SSL_CTX_new(server ? TLS_server_method() : TLS_client_method());
	if (!ctx) {
		snprintf(err, errlen, "cannot set up TLS: out of memory");
		return NULL;
	}
	if (!SSL_CTX_set_min_proto_version(ctx, TLS1_3_VERSION) ||
	    !SSL_CTX_set_max_proto_version(ctx, TLS1_3_VERSION) ||
	    !SSL_CTX_set_ciphersuites(ctx, SUITES) || !SSL_CTX_set_num_tickets(ctx, 0)) {
		pfs_tls_reason(err, errlen, "cannot set up TLS");
		SSL_CTX_free(ctx);
		return NULL;
	}
	/* No tickets, no resumption: nothing of a connection outlives it.
	 * psk_dhe_ke only (OpenSSL's default without SSL_OP_ALLOW_NO_DHE_KEX):
	 * an X25519 exchange per connection, for forward secrecy. */
	SSL_CTX_set_options(ctx, SSL_OP_NO_TICKET);
	SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
	return ctx;
}

SSL_CTX *pfs_tls_ctx_new(bool server, const uint8_t key[PFS_KEY_LEN], char *err, size_t errlen)
{
	SSL_CTX *ctx = ctx_base(server, err, errlen);
	struct psk *p;

	if (!ctx)
		return NULL;
	p = calloc(1, sizeof(*p));
	if (!p) {
		SSL_CTX_free(ctx);
		snprintf(err, errlen, "cannot set up TLS: out of memory");
		return NULL;
	}
	if (pfs_tls_psk(key, p->b) < 0 || !SSL_CTX_set_ex_data(ctx, ctx_index, p)) {
		OPENSSL_cleanse(p, sizeof(*p));
		free(p);
		SSL_CTX_free(ctx);
		snprintf(err, errlen, "cannot set up TLS: cannot derive the PSK");
		return NULL;
	}
	if (server) {
		SSL_CTX_set_psk_find_session_callback(ctx, find_session_cb);
	} else {
		SSL_CTX_set_psk_use_session_callback(ctx, use_session_cb);
		SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, no_cert_cb);
	}
	return ctx;
}

void pfs_tls_ctx_free(SSL_CTX *ctx)
{
	SSL_CTX_free(ctx); /* psk_free_cb wipes the PSK */
}

/* --- certificates --- */

/* An encrypted key would make OpenSSL ask for a passphrase on a
 * terminal: there is none to give. */
static int no_passphrase_cb(char *buf, int size, int rwflag, void *u)
{
	return -1;
}

/* Opens path for reading as a regular file; with secret, also one that
 * group and others cannot access. Returns the stream, or NULL with a
 * reason (what names the file's role) in err[errlen] and *rc set. */
static FILE *open_pem(const char *what, const char *path, bool secret, int *rc, char *err,
		      size_t errlen)
{
	struct stat st;
	FILE *f;
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);

	if (fd < 0) {
		*rc = -errno;
		snprintf(err, errlen, "cannot open %s %s: %s", what, path, strerror(errno));
		return NULL;
	}
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		*rc = -EINVAL;
		snprintf(err, errlen, "%s %s is not a regular file", what, path);
		close(fd);
		return NULL;
	}
	if (secret && (st.st_mode & 077)) {
		*rc = -EPERM;
		snprintf(err, errlen, "%s %s is accessible by group or others (chmod 600 it)", what,
			 path);
		close(fd);
		return NULL;
	}
	if (!(f = fdopen(fd, "r"))) {
		*rc = -errno;
		snprintf(err, errlen, "cannot read %s %s: %s", what, path, strerror(errno));
		close(fd);
	}
	return f;
}

/* The reason of the thread's last OpenSSL error after "prefix: ". */
static void reason_after(char *err, size_t errlen, const char *prefix)
{
	char why[160];

	pfs_tls_reason(why, sizeof(why), "no PEM data");
	snprintf(err, errlen, "%s: %s", prefix, why);
}

int pfs_tls_ctx_use_cert(SSL_CTX *ctx, const char *cert_file, const char *key_file,
			 char *info, size_t infolen, char *err, size_t errlen)
{
	char prefix[PATH_MAX + 64], subject[256], until[64] = "?";
	const ASN1_TIME *na;
	EVP_PKEY *pkey;
	X509 *x;
	FILE *f;
	struct tm tm;
	int rc = 0;

	if (!key_file)
		key_file = cert_file;
	if (infolen)
		info[0] = 0;
	/* The chain: the server's certificate, then its issuers. */
	if (!(f = open_pem("certificate file", cert_file, false, &rc, err, errlen)))
		return rc;
	fclose(f);
	ERR_clear_error();
	if (SSL_CTX_use_certificate_chain_file(ctx, cert_file) != 1) {
		snprintf(prefix, sizeof(prefix), "no certificate in %s", cert_file);
		reason_after(err, errlen, prefix);
		return -EINVAL;
	}
	if (!(f = open_pem("TLS key file", key_file, true, &rc, err, errlen)))
		return rc;
	ERR_clear_error();
	pkey = PEM_read_PrivateKey(f, NULL, no_passphrase_cb, NULL);
	fclose(f);
	if (!pkey) {
		snprintf(prefix, sizeof(prefix),
			 "no private key in %s (one protected by a passphrase is not supported)",
			 key_file);
		reason_after(err, errlen, prefix);
		return -EINVAL;
	}
	rc = SSL_CTX_use_PrivateKey(ctx, pkey) == 1 && SSL_CTX_check_private_key(ctx) == 1;
	EVP_PKEY_free(pkey);
	if (!rc) {
		ERR_clear_error();
		snprintf(err, errlen, "the private key in %s is not the certificate's in %s",
			 key_file, cert_file);
		return -EINVAL;
	}
	x = SSL_CTX_get0_certificate(ctx);
	na = x ? X509_get0_notAfter(x) : NULL;
	if (!x || !X509_NAME_oneline(X509_get_subject_name(x), subject, sizeof(subject)))
		snprintf(subject, sizeof(subject), "?");
	if (na && ASN1_TIME_to_tm(na, &tm) == 1)
		strftime(until, sizeof(until), "%Y-%m-%d %H:%M:%S UTC", &tm);
	/* Clients would refuse it: loaded all the same (the PSK's clients
	 * do not mind), but said. */
	bool now_valid = x && X509_cmp_current_time(X509_get0_notBefore(x)) < 0 && na &&
			 X509_cmp_current_time(na) > 0;
	snprintf(info, infolen, "certificate %s (%s), valid until %s%s", cert_file, subject, until,
		 now_valid ? "" : "; NOT VALID NOW: clients that verify it will refuse it");
	return now_valid ? 0 : 1;
}

SSL_CTX *pfs_tls_ctx_new_ca(const char *ca_file, char *err, size_t errlen)
{
	char prefix[PATH_MAX + 64];
	SSL_CTX *ctx;
	FILE *f;
	int rc;

	if (!(f = open_pem("CA file", ca_file, false, &rc, err, errlen)))
		return NULL;
	fclose(f);
	if (!(ctx = ctx_base(false, err, errlen)))
		return NULL;
	ERR_clear_error();
	if (SSL_CTX_load_verify_file(ctx, ca_file) != 1) {
		snprintf(prefix, sizeof(prefix), "no CA certificate in %s", ca_file);
		reason_after(err, errlen, prefix);
		SSL_CTX_free(ctx);
		return NULL;
	}
	/* No PSK offered: the server must show a certificate, which must
	 * verify (OpenSSL's own checks, with the name of
	 * pfs_tls_expect_name). */
	SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
	return ctx;
}

int pfs_tls_expect_name(SSL *ssl, const char *name)
{
	unsigned char a[sizeof(struct in6_addr)];

	if (inet_pton(AF_INET, name, a) == 1 || inet_pton(AF_INET6, name, a) == 1)
		return X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), name) == 1 ? 0 : -EINVAL;
	SSL_set_hostflags(ssl, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
	if (SSL_set1_host(ssl, name) != 1 || SSL_set_tlsext_host_name(ssl, name) != 1) {
		ERR_clear_error();
		return -EINVAL;
	}
	return 0;
}

bool pfs_tls_authenticated(SSL *ssl, char *why, size_t whylen)
{
	long v;

	if (SSL_CTX_get_ex_data(SSL_get_SSL_CTX(ssl), ctx_index)) {
		/* A PSK context: the pod key must be what authenticated it. */
		if (SSL_session_reused(ssl))
			return true;
		snprintf(why, whylen, "the handshake did not use the pod key");
		return false;
	}
	if (SSL_session_reused(ssl) || !SSL_get0_peer_certificate(ssl)) {
		snprintf(why, whylen, "the server showed no certificate");
		return false;
	}
	if ((v = SSL_get_verify_result(ssl)) != X509_V_OK) {
		snprintf(why, whylen, "its certificate did not verify: %s",
			 X509_verify_cert_error_string(v));
		return false;
	}
	return true;
}

SSL *pfs_tls_new(SSL_CTX *ctx, BIO **rbio, BIO **wbio)
{
	SSL *ssl = SSL_new(ctx);
	BIO *r = pfs_tls_bio_new(), *w = pfs_tls_bio_new();

	if (!ssl || !r || !w) {
		SSL_free(ssl);
		BIO_free(r);
		BIO_free(w);
		return NULL;
	}
	/* (An empty one means "more to come": SSL_ERROR_WANT_READ.) */
	SSL_set_bio(ssl, r, w);
	*rbio = r;
	*wbio = w;
	return ssl;
}

static _Atomic uint64_t rekey_bytes = PFS_TLS_REKEY_BYTES;

void pfs_tls_set_rekey_bytes(uint64_t n)
{
	atomic_store(&rekey_bytes, n ? n : PFS_TLS_REKEY_BYTES);
}

int pfs_tls_write(SSL *ssl, const void *p, int n)
{
	BIO *w = SSL_get_wbio(ssl);
	uint64_t every = atomic_load(&rekey_bytes), before = w ? BIO_number_written(w) : 0;
	int r = SSL_write(ssl, p, n);

	/* The BIO counts every byte written into it (records, alerts):
	 * crossing a multiple of every schedules the update, which OpenSSL
	 * sends ahead of the next record. It cannot fail here but with a
	 * write pending on a socket BIO (fs/peernet.c): then the next
	 * crossing does it. */
	if (r > 0 && w && BIO_number_written(w) / every != before / every) {
		ERR_set_mark();
		if (SSL_key_update(ssl, SSL_KEY_UPDATE_NOT_REQUESTED) == 1)
			ERR_clear_last_mark();
		else
			ERR_pop_to_mark(); /* (its error is not the caller's) */
	}
	return r;
}

void pfs_tls_thread_end(void)
{
	OPENSSL_thread_stop();
}

void pfs_tls_reason(char *buf, size_t len, const char *dflt)
{
	unsigned long e = ERR_get_error(), last = e;

	/* The first error is the root cause; drain the rest. */
	while (last && ERR_peek_error())
		ERR_get_error();
	if (!e) {
		snprintf(buf, len, "%s", dflt);
		return;
	}
	const char *r = ERR_reason_error_string(e);
	if (r)
		snprintf(buf, len, "%s", r);
	else
		snprintf(buf, len, "%s (error %lx)", dflt, e);
}
