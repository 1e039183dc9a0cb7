/* tls_bio.c: a memory-BIO-like byte queue whose bulk paths skip copies
 * (see tls_bio.h). */
#include "podfs/tls_bio.h"

#include <errno.h>
#include <limits.h>
#include <openssl/crypto.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include "podfs/bigbuf.h"

/* What a read from the socket may take beyond what was asked, into the
 * queue: the records that follow (their headers and bodies are then
 * copied out of it, 16 KiB at most at a time). A recvmsg(2) per record
 * (about 65,000 per GiB) cost more than the copies: on a 2-vCPU VM a
 * receive of 16 KiB took about 9 us of CPU, and the client of a cold TLS
 * read spent 0.6 CPU-s per GiB beyond the plaintext path's, where AES-GCM
 * accounts for 0.2. */
#define PFS_TLS_BIO_AHEAD (256 * 1024)

struct tbio {
	uint8_t *p;           /* queued bytes p[off, len), capacity cap */
	size_t off, len, cap;
	const uint8_t *src;   /* a loan (pfs_tls_bio_lend): src[0, srclen) */
	size_t srclen;
	int fd;               /* -1, or the socket read once empty */
	_Atomic uint64_t *count;
	int status;           /* pfs_tls_bio_status */
};

static BIO_METHOD *method;
static CRYPTO_ONCE method_once = CRYPTO_ONCE_STATIC_INIT;

/* Room for n more bytes at the end of the queue. */
static int room(struct tbio *t, size_t n)
{
	if (t->off == t->len)
		t->off = t->len = 0;
	if (t->cap - t->len >= n)
		return 0;
	if (t->off && t->cap - (t->len - t->off) >= n) {
		memmove(t->p, t->p + t->off, t->len - t->off);
		t->len -= t->off;
		t->off = 0;
		return 0;
	}
	/* A fresh buffer gets what is asked (a reservation is exact); a
	 * growing one doubles, so that appends stay linear. */
	size_t need = t->len + n, cap = t->cap ? t->cap : 4096;
	if (t->cap && cap < need)
		cap = cap > SIZE_MAX / 2 ? need : cap * 2;
	if (cap < need)
		cap = need;
	uint8_t *q = t->p ? realloc(t->p, cap) : pfs_big_alloc(cap);
	if (!q)
		return -ENOMEM;
	t->p = q;
	t->cap = cap;
	return 0;
}

static int write_ex_cb(BIO *b, const char *in, size_t n, size_t *written)
{
	struct tbio *t = BIO_get_data(b);

	BIO_clear_retry_flags(b);
	if (room(t, n) < 0)
		return 0;
	memcpy(t->p + t->len, in, n);
	t->len += n;
	*written = n;
	return 1;
}

/* Once nothing is queued: one recvmsg(2) of at most n bytes straight
 * into out, and of what follows them in the stream, up to
 * PFS_TLS_BIO_AHEAD, into the queue. OpenSSL reads a record as its 5-byte
 * header, then its body; so the body it asked for comes with no copy, and
 * the records after it without a call of their own. Returns the bytes
 * put at out (> 0), 0 if none came (t->status says why if it was not
 * "would block"). */
static size_t from_socket(struct tbio *t, char *out, size_t n)
{
	struct iovec iov[2] = { { out, n }, { NULL, 0 } };
	struct msghdr mh = { .msg_iov = iov, .msg_iovlen = 1 };
	ssize_t r;

	if (room(t, PFS_TLS_BIO_AHEAD) == 0) {
		iov[1].iov_base = t->p + t->len;
		iov[1].iov_len = PFS_TLS_BIO_AHEAD;
		mh.msg_iovlen = 2;
	}
	if (iov[0].iov_len > INT_MAX)
		iov[0].iov_len = INT_MAX;
	r = recvmsg(t->fd, &mh, MSG_DONTWAIT);
	if (r > 0) {
		if (t->count)
			atomic_fetch_add(t->count, (uint64_t)r);
		if ((size_t)r > iov[0].iov_len) {
			t->len += (size_t)r - iov[0].iov_len;
			r = (ssize_t)iov[0].iov_len;
		}
		return (size_t)r;
	}
	if (r == 0)
		t->status = 1;
	else if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
		t->status = -errno;
	return 0;
}

static int read_ex_cb(BIO *b, char *out, size_t n, size_t *got)
{
	struct tbio *t = BIO_get_data(b);
	size_t k = 0;

	BIO_clear_retry_flags(b);
	*got = 0;
	if (n == 0)
		return 0;
	if (t->len > t->off) {
		k = t->len - t->off < n ? t->len - t->off : n;
		memcpy(out, t->p + t->off, k);
		t->off += k;
	} else if (t->srclen) {
		k = t->srclen < n ? t->srclen : n;
		memcpy(out, t->src, k);
		t->src += k;
		t->srclen -= k;
	}
	/* The rest of what was asked, from the socket if there is one. */
	if (k < n && t->len == t->off && !t->srclen && t->fd >= 0 && t->status == 0)
		k += from_socket(t, out + k, n - k);
	if (k) {
		*got = k;
		return 1;
	}
	/* Empty means "more to come", as a memory BIO with eof_return -1. */
	if (t->status == 0)
		BIO_set_retry_read(b);
	return 0;
}

static int puts_cb(BIO *b, const char *s)
{
	size_t w;

	return write_ex_cb(b, s, strlen(s), &w) ? (int)w : -1;
}

static long ctrl_cb(BIO *b, int cmd, long num, void *ptr)
{
	struct tbio *t = BIO_get_data(b);

	(void)num;
	(void)ptr;
	switch (cmd) {
	case BIO_CTRL_PENDING: {
		size_t n = t->len - t->off + t->srclen;
		return n > LONG_MAX ? LONG_MAX : (long)n;
	}
	case BIO_CTRL_WPENDING:
		return 0;
	case BIO_CTRL_EOF:
		return t->len == t->off && t->srclen == 0 && t->status != 0;
	case BIO_CTRL_RESET:
		t->off = t->len = 0;
		t->src = NULL;
		t->srclen = 0;
		return 1;
	case BIO_CTRL_FLUSH:
		return 1;
	default:
		return 0;
	}
}

static int create_cb(BIO *b)
{
	struct tbio *t = calloc(1, sizeof(*t));

	if (!t)
		return 0;
	t->fd = -1;
	BIO_set_data(b, t);
	BIO_set_init(b, 1);
	return 1;
}

static int destroy_cb(BIO *b)
{
	struct tbio *t = BIO_get_data(b);

	if (t) {
		pfs_big_free(t->p);
		free(t);
	}
	BIO_set_data(b, NULL);
	return 1;
}

static void make_method(void)
{
	BIO_METHOD *m = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK, "podfs buffer");

	if (m && BIO_meth_set_write_ex(m, write_ex_cb) && BIO_meth_set_read_ex(m, read_ex_cb) &&
	    BIO_meth_set_puts(m, puts_cb) && BIO_meth_set_ctrl(m, ctrl_cb) &&
	    BIO_meth_set_create(m, create_cb) && BIO_meth_set_destroy(m, destroy_cb)) {
		method = m;
		return;
	}
	BIO_meth_free(m);
}

BIO *pfs_tls_bio_new(void)
{
	if (!CRYPTO_THREAD_run_once(&method_once, make_method) || !method)
		return NULL;
	return BIO_new(method);
}

int pfs_tls_bio_reserve(BIO *b, size_t n)
{
	return room(BIO_get_data(b), n);
}

void pfs_tls_bio_take(BIO *b, uint8_t **buf, size_t *len, size_t *cap)
{
	struct tbio *t = BIO_get_data(b);

	*buf = NULL;
	*len = 0;
	if (cap)
		*cap = 0;
	if (t->len == t->off)
		return;
	if (t->off) {
		memmove(t->p, t->p + t->off, t->len - t->off);
		t->len -= t->off;
		t->off = 0;
	}
	*buf = t->p;
	*len = t->len;
	if (cap)
		*cap = t->cap;
	t->p = NULL;
	t->off = t->len = t->cap = 0;
}

void pfs_tls_bio_give(BIO *b, uint8_t *buf, size_t cap)
{
	struct tbio *t = BIO_get_data(b);

	if (t->p || !buf) {
		pfs_big_free(buf);
		return;
	}
	t->p = buf;
	t->cap = cap;
	t->off = t->len = 0;
}

void pfs_tls_bio_lend(BIO *b, const void *p, size_t n)
{
	struct tbio *t = BIO_get_data(b);

	t->src = p;
	t->srclen = n;
}

int pfs_tls_bio_keep(BIO *b)
{
	struct tbio *t = BIO_get_data(b);
	size_t n = t->srclen;
	int ret = 0;

	if (n) {
		ret = room(t, n);
		if (ret == 0) {
			memcpy(t->p + t->len, t->src, n);
			t->len += n;
		}
	}
	t->src = NULL;
	t->srclen = 0;
	return ret;
}

void pfs_tls_bio_set_fd(BIO *b, int fd, _Atomic uint64_t *count)
{
	struct tbio *t = BIO_get_data(b);

	t->fd = fd;
	t->count = count;
	t->status = 0;
}

int pfs_tls_bio_status(BIO *b)
{
	return ((struct tbio *)BIO_get_data(b))->status;
}
