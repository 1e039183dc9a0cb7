/* dispatch.c: the opcode table and the worker side of a request: the
 * request decoded, the handles it names resolved as root, the thread
 * switched to the caller's credentials, the handler of its opcode run
 * (dispatch_*.c), root again, and the reply framed (see dispatch_i.h).
 * FORGET, which runs on the loop, is here too. */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "podfs/bigbuf.h"
#include "podfs/codec.h"
#include "podfs/frame.h"
#include "podfs/log.h"
#include "dispatch_i.h"
#include "handles_i.h"
#include "op_i.h"
#include "pfsd_i.h"
#include "req_i.h"
#include "session_i.h"

/* --- the table --- */

/* The request message of each opcode is the one its row in wire.h
 * PFS_OPS names: req_LOOKUP is struct pfs_lookup_req. The table below
 * takes its decoder and the places of its credentials and handles from
 * that type, so a row cannot disagree with wire.h. */
#define REQ_TYPE(n, v, req, ...) typedef struct pfs_##req req_##n;
PFS_OPS(REQ_TYPE)
#undef REQ_TYPE

typedef int (*decode_fn)(const void *buf, size_t len, union op_msg *m);

/* A decoder into o->m for every message of codec.h, chosen by type (an
 * opcode without a message has none: its row would not compile). */
#define DECODER_FN(name)                                                                \
	__attribute__((unused)) static int dec_##name(const void *buf, size_t len,        \
						      union op_msg *m)                    \
	{                                                                               \
		return pfs_dec_##name(buf, len, &m->name);                              \
	}
PFS_MESSAGES(DECODER_FN)
#undef DECODER_FN
#define DECODER_CASE(name) , struct pfs_##name * : dec_##name
#define DECODER(OP) _Generic((req_##OP *)0 PFS_MESSAGES(DECODER_CASE))

/* What the ladder does before a handler runs. */
enum how {
	H_PLAIN,  /* decode only: the handler resolves what it needs itself */
	H_ROOT,   /* resolve fh as root; no credential switch */
	H_CALLER, /* resolve fh (and fh2) as root, then become the caller (cr) */
};

struct handler {
	handler_fn run;
	decode_fn dec;
	enum how how;
	bool note;      /* register the session's interest in fh before run */
	size_t cr;      /* offsets in the message: its credentials, */
	size_t fh;      /* the handle it names first, */
	size_t fh2;     /* and the second one (0: none) */
};

#define CR_AT(OP) _Generic(((req_##OP *)0)->cr, struct pfs_creds: offsetof(req_##OP, cr))
#define FH_AT(OP, f) _Generic(((req_##OP *)0)->f, struct pfs_fh: offsetof(req_##OP, f))
#define PLAIN(OP) .dec = DECODER(OP), .how = H_PLAIN
#define AS_ROOT(OP, fh_) .dec = DECODER(OP), .how = H_ROOT, .fh = FH_AT(OP, fh_)
#define AS_CALLER(OP, fh_) .dec = DECODER(OP), .how = H_CALLER, .cr = CR_AT(OP), .fh = FH_AT(OP, fh_)
#define AS_CALLER2(OP, fh_, fh2_) AS_CALLER(OP, fh_), .fh2 = FH_AT(OP, fh2_)

/* Handlers by opcode; what else is known of an opcode is its row in
 * wire.h PFS_OPS. AUTH is answered apart (its request was checked on the
 * loop), HELLO, GOODBYE, FORGET and PUSH_ACK never reach a worker. */
static const struct handler handlers[PFS_OP_MAX] = {
	[PFS_OP_PING]         = { op_ping, PLAIN(PING) },
	[PFS_OP_LOOKUP]       = { op_lookup, AS_CALLER(LOOKUP, parent), .note = true },
	[PFS_OP_GETATTR]      = { op_getattr, AS_ROOT(GETATTR, fh), .note = true },
	[PFS_OP_SETATTR]      = { op_setattr, AS_CALLER(SETATTR, fh), .note = true },
	[PFS_OP_READLINK]     = { op_readlink, AS_ROOT(READLINK, fh), .note = true },
	[PFS_OP_MKNOD]        = { op_mknod, AS_CALLER(MKNOD, parent) },
	[PFS_OP_MKDIR]        = { op_mkdir, AS_CALLER(MKDIR, parent) },
	[PFS_OP_SYMLINK]      = { op_symlink, AS_CALLER(SYMLINK, parent) },
	[PFS_OP_UNLINK]       = { op_unlink, AS_CALLER(UNLINK, parent) },
	[PFS_OP_RMDIR]        = { op_rmdir, AS_CALLER(RMDIR, parent) },
	[PFS_OP_RENAME]       = { op_rename, AS_CALLER2(RENAME, parent, newparent) },
	[PFS_OP_LINK]         = { op_link, AS_CALLER2(LINK, fh, newparent) },
	[PFS_OP_OPEN]         = { op_open, AS_CALLER(OPEN, fh), .note = true },
	[PFS_OP_CREATE]       = { op_create, AS_CALLER(CREATE, parent) },
	[PFS_OP_READ]         = { op_read, AS_CALLER(READ, fh), .note = true },
	[PFS_OP_WRITE]        = { op_write, AS_CALLER(WRITE, fh), .note = true },
	[PFS_OP_RELEASE]      = { op_release, PLAIN(RELEASE) },
	[PFS_OP_FSYNC]        = { op_fsync, AS_CALLER(FSYNC, fh) },
	[PFS_OP_OPENDIR]      = { op_open, AS_CALLER(OPENDIR, fh), .note = true },
	[PFS_OP_READDIR]      = { op_readdir, AS_CALLER(READDIR, fh), .note = true },
	[PFS_OP_RELEASEDIR]   = { op_release, PLAIN(RELEASEDIR) },
	[PFS_OP_STATFS]       = { op_statfs, PLAIN(STATFS) },
	[PFS_OP_SETXATTR]     = { op_setxattr, AS_CALLER(SETXATTR, fh) },
	[PFS_OP_GETXATTR]     = { op_getxattr, AS_CALLER(GETXATTR, fh), .note = true },
	[PFS_OP_LISTXATTR]    = { op_listxattr, AS_CALLER(LISTXATTR, fh), .note = true },
	[PFS_OP_REMOVEXATTR]  = { op_removexattr, AS_CALLER(REMOVEXATTR, fh) },
	[PFS_OP_FALLOCATE]    = { op_fallocate, AS_CALLER(FALLOCATE, fh) },
	/* dst first: o->obj, and the interest registered; src is o->obj2. */
	[PFS_OP_COPY_RANGE]   = { op_copy_range, AS_CALLER2(COPY_RANGE, dst, src), .note = true },
	[PFS_OP_GETLK]        = { op_getlk, PLAIN(GETLK) },
	[PFS_OP_SETLK]        = { op_setlk, PLAIN(SETLK) },
	[PFS_OP_UNLOCK_OWNER] = { op_unlock_owner, AS_ROOT(UNLOCK_OWNER, fh) },
	[PFS_OP_LSEEK]        = { op_lseek, AS_CALLER(LSEEK, fh) },
	[PFS_OP_REVALIDATE]   = { op_revalidate, PLAIN(REVALIDATE) },
	[PFS_OP_REVALIDATED]  = { op_revalidated, PLAIN(REVALIDATED) },
	[PFS_OP_LOOKUP_DATA]  = { op_lookup_data, AS_CALLER(LOOKUP_DATA, parent), .note = true },
	[PFS_OP_DELEG_DIR]    = { op_deleg_dir, AS_CALLER(DELEG_DIR, fh) },
	[PFS_OP_DELEG_RETURN] = { op_deleg_return, PLAIN(DELEG_RETURN) },
	[PFS_OP_RECLAIM]      = { op_reclaim, PLAIN(RECLAIM) },
	[PFS_OP_RECLAIM_DONE] = { op_reclaim_done, PLAIN(RECLAIM_DONE) },
	[PFS_OP_LISTDIR]      = { op_listdir, AS_CALLER(LISTDIR, fh), .note = true },
	[PFS_OP_CHUNK]        = { op_chunk, AS_CALLER(CHUNK, fh), .note = true },
	[PFS_OP_CHUNK_REPORT] = { op_chunk_report, AS_ROOT(CHUNK_REPORT, fh) },
	[PFS_OP_LISTDIR_PAGE] = { op_listdir_page, AS_CALLER(LISTDIR_PAGE, fh), .note = true },
	[PFS_OP_LISTDIRS]     = { op_listdirs, PLAIN(LISTDIRS) },
	[PFS_OP_UNLINKS]      = { op_unlinks, AS_CALLER(UNLINKS, parent) },
	[PFS_OP_SLOTS]        = { op_slots, AS_CALLER(SLOTS, dir) },
	[PFS_OP_CREATES]      = { op_creates, AS_CALLER(CREATES, parent) },
};

/* The ladder every request climbs: decode, resolve and switch as its row
 * says, run its handler, back to root. Returns the handler's result, or
 * -EINVAL for a payload that does not decode. */
static int run(struct op *o, const struct handler *h)
{
	const char *m = (const char *)&o->m;
	const struct pfs_fh *fh = (const void *)(m + h->fh);
	int ret;

	if (h->dec(o->in, o->inlen, &o->m) < 0)
		return -EINVAL;
	if (h->how == H_PLAIN)
		return h->run(o);
	ret = op_begin(o, h->how == H_CALLER ? (const void *)(m + h->cr) : NULL, fh,
		       h->fh2 ? (const void *)(m + h->fh2) : NULL);
	if (ret < 0)
		return ret;
	if (h->note)
		export_note(&o->x, fh);
	/* Another session's delegation on what it names is recalled first
	 * (server.c runs it again after). */
	if (o->d->deleg && (op_recall_check(o, fh) || (h->fh2 && op_recall_check(o, (const void *)(m + h->fh2))))) {
		op_end(o);
		return -OP_RECALL;
	}
	ret = h->run(o);
	op_end(o);
	return ret;
}

/* Errors that point at the server rather than at the request. */
static bool unexpected(int err)
{
	return err == EIO || err == ENOMEM || err == EBADF || err == EFAULT || err == EMFILE ||
	       err == ENFILE || err == EUCLEAN;
}

/* The workers' warnings about them share one bucket (ratelimit_i.h): a
 * client can make EBADF on purpose (a WRITE through a fid it opened
 * read-only), and a failing disk makes an EIO per request; either must
 * not fill the log. Any worker thread. */
static bool warn_allowed(void)
{
	static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
	static struct ratelimit rl;
	struct timespec ts;
	bool ok;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	pthread_mutex_lock(&mu);
	ok = ratelimit_allow(&rl, (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000);
	pthread_mutex_unlock(&mu);
	return ok;
}

/* READ replies this big are encrypted by their worker (seal_reply). */
#define SEAL_MIN (64u * 1024)

/* A large READ reply on a TLS connection is encrypted here, where the
 * workers share the CPUs, rather than on the loop thread, which would
 * otherwise encrypt every byte the daemon sends: its records wait in the
 * connection's stream for the loop to take them (conn_reply). Only READ:
 * its reply is never held back nor kept for a resend, so the loop sends
 * it as soon as it hears of it, and pushes ordered behind it come after
 * its records (push.c); a push made before it may come after it too, as
 * when the loop sends it. */
static void seal_reply(struct req *r)
{
	if (r->h.op != PFS_OP_READ || r->status != 0 || r->drc || r->c->mode != CM_TLS ||
	    r->reply.len < SEAL_MIN)
		return;
	if (tls_stream_seal(&r->c->tls, r->reply.hdr, PFS_FRAME_HDR_SIZE, r->reply.wire,
			    r->reply.len) != 0)
		return; /* the loop sends it (or fails as the stream did) */
	pfs_big_free(r->reply.own[0]);
	pfs_big_free(r->reply.own[1]);
	r->reply.own[0] = r->reply.own[1] = NULL;
	r->reply.wire = NULL;
	r->reply.sealed = true;
}

/* r is answered with the reply the instance before gave it (server.c,
 * duplicate): nothing runs again. */
static void replay(struct req *r)
{
	struct replylog_rec *p = r->replay;

	memcpy(r->reply.hdr, p->hdr, PFS_FRAME_HDR_SIZE);
	r->reply.own[0] = xmalloc(p->len ? p->len : 1);
	memcpy(r->reply.own[0], p->wire, p->len);
	r->reply.wire = r->reply.own[0];
	r->reply.len = p->len;
	r->reply.raw = p->raw;
	r->status = p->status;
	r->replayed = true;
	r->replay = NULL;
	free(p);
	payload_free(r->in);
	r->in = NULL;
}

void dispatch_work_cb(uv_work_t *w)
{
	struct req *r = w->data;
	struct op o;
	uint8_t *dec = NULL;
	void *scratch = NULL;
	size_t cap = 0;
	unsigned opc = r->h.op;
	int ret;

	/* libuv's pool threads have no name of their own: this one shows
	 * in top -H, ps -L, perf and gdb as podfsd's worker (not the main
	 * thread, which names the process: the fuzzer runs requests there). */
	static __thread bool named;
	if (!named) {
		if (gettid() != getpid())
			(void)pthread_setname_np(pthread_self(), "pfsd:worker");
		named = true;
	}

	if (r->replay) {
		replay(r);
		return;
	}
	memset(&o, 0, sizeof(o));
	o.r = r;
	o.d = r->d;
	o.x.hs = r->d->hs;
	o.x.s = r->s;
	o.x.ro = r->d->o.ro || r->rule.ro;
	o.x.nowait = r->nowait;
	o.x.atime = r->d->atime_mode;
	o.x.direct = r->d->o.buffered ? NULL : &r->d->direct;
	if (r->s) {
		o.x.it = r->d->it;
		o.x.slot = r->s->islot;
		o.x.kv = &r->keys;
	}
	o.x.watch = r->d->watch;
	/* Listings are kept only while every change to the export is pushed
	 * (lscache_i.h): not without fanotify, nor for a request that
	 * registers no interest. */
	o.x.lc = o.x.it && watch_whole(r->d->watch) ? r->d->lc : NULL;
	o.in = r->in;
	o.inlen = r->h.wire_len;
	/* The reply's codings, now that it is about to be made (link.h). */
	r->codecs = pfs_link_codecs(r->codecs, r->d->o.lz4,
				    atomic_load_explicit(&r->c->backlog, memory_order_relaxed));
	if (r->h.flags & PFS_FF_CODED) {
		/* Ends aligned as a received payload does (framer_i.h). */
		dec = payload_alloc(r->h.raw_len ? r->h.raw_len : 1);
		if (pfs_payload_decode(r->h.flags, r->in, r->h.wire_len, dec, r->h.raw_len) < 0) {
			payload_free(dec);
			r->violation = true;
			return;
		}
		o.in = dec;
		o.inlen = r->h.raw_len;
	}

	if (opc == PFS_OP_AUTH)
		ret = op_auth(&o);
	else if (opc >= PFS_OP_MAX || !handlers[opc].run)
		ret = -ENOSYS;
	else if (o.x.ro && (pfs_op_flags(opc) & PFS_OPF_MODIFY))
		ret = -EROFS;
	else {
		/* A change whose second run would fail where the first made
		 * it: its record goes first, for the next instance
		 * (replylog_i.h, REPLYLOG_BEGUN); a rename's from op_rename,
		 * which looks at the old name first. */
		if (opc != PFS_OP_RENAME && replylog_begins(opc))
			op_note_begun(&o, NULL);
		ret = run(&o, &handlers[opc]);
	}
	op_reply_settle(&o, ret >= 0);

	/* Held back for a recall (server.c), or tried on the loop thread
	 * where it would have waited (workers_try_on_loop): it runs again
	 * from its bytes. */
	if (ret == -OP_RECALL || ret == -OP_WOULD_BLOCK) {
		r->blocked = ret == -OP_WOULD_BLOCK;
		payload_free(dec);
		pfs_big_free(o.w.buf);
		return;
	}
	/* The request's bytes are no longer needed (decoded views die here). */
	payload_free(dec);
	payload_free(r->in);
	r->in = NULL;

	if (ret < 0) {
		if (unexpected(-ret) && warn_allowed())
			pfs_warn("conn %llu req %llu %s: %s", (unsigned long long)r->c->id,
				 (unsigned long long)r->h.id, pfs_op_name(opc), strerror(-ret));
		else
			pfs_debug("conn %llu req %llu %s: %s", (unsigned long long)r->c->id,
				  (unsigned long long)r->h.id, pfs_op_name(opc), strerror(-ret));
		pfs_big_free(o.w.buf);
		o.w.buf = NULL;
		o.w.len = 0;
		r->status = -ret;
		if (r->splice_len) {
			pipes_put(&r->d->pipes, r->pipe, false);
			r->splice_len = 0;
		}
	} else {
		pfs_debug("conn %llu req %llu %s: ok, %zu bytes", (unsigned long long)r->c->id,
			  (unsigned long long)r->h.id, pfs_op_name(opc), o.w.len);
		r->status = 0;
	}
	if (r->splice_len) {
		/* Header for the whole payload; its tail is in the pipe. */
		pfs_frame_prepare(r->reply.hdr, r->h.id, (uint16_t)opc, PFS_FF_REPLY, 0, o.w.buf,
				  o.w.len + r->splice_len, 0, NULL, 0, &r->reply.wire);
		r->reply.len = o.w.len;
		r->reply.raw = o.w.len + r->splice_len;
		r->reply.own[0] = o.w.buf;
		return;
	}
	if (r->codecs && o.w.len >= PFS_LZ4_MIN) {
		cap = pfs_lz4_bound(o.w.len);
		scratch = pfs_big_xalloc(cap);
	}
	r->reply.len = pfs_frame_prepare(r->reply.hdr, r->h.id, (uint16_t)opc, PFS_FF_REPLY,
					 r->status, o.w.buf, o.w.len, r->codecs, scratch, cap,
					 &r->reply.wire);
	r->reply.raw = o.w.len;
	if (scratch && r->reply.wire == scratch) {
		pfs_big_free(o.w.buf); /* only the compressed bytes go out */
		o.w.buf = NULL;
	} else {
		pfs_big_free(scratch);
		scratch = NULL;
	}
	r->reply.own[0] = o.w.buf;
	r->reply.own[1] = scratch;
	/* A reply the reply cache keeps (server.c, drc_settle) is also
	 * written for the next instance, before it goes out (replylog_i.h). */
	if (r->drc && ((pfs_op_flags(opc) & PFS_OPF_DRC) || r->keep_reply))
		replylog_put(&r->d->replies, &r->s->ha->rl, r->s->client_id, r->h.id, (uint16_t)opc,
			     r->reply.hdr, r->reply.wire, r->reply.len, r->reply.raw);
	seal_reply(r);
}

/* --- FORGET (loop thread) --- */

int dispatch_forget(struct pfsd *d, struct session *s, const struct pfs_frame_hdr *h,
		    const uint8_t *wire)
{
	struct pfs_forget_req m;
	struct pfs_fh fh;
	struct pfs_rd rd;
	uint8_t *dec = NULL;
	const uint8_t *in = wire;
	unsigned count = 0;
	int ret;

	if (h->flags & PFS_FF_CODED) {
		dec = xmalloc(h->raw_len ? h->raw_len : 1);
		if (pfs_payload_decode(h->flags, wire, h->wire_len, dec, h->raw_len) < 0) {
			free(dec);
			return -EBADMSG;
		}
		in = dec;
	}
	ret = -EINVAL;
	if (pfs_dec_forget_req(in, h->raw_len, &m) < 0)
		goto out_free;
	pfs_rd_init(&rd, m.fhs.p, m.fhs.len);
	while ((ret = pfs_dec_fh_item(&rd, &fh)) == 1) {
		if (++count > PFS_BATCH_MAX) {
			ret = -E2BIG;
			goto out_free;
		}
	}
	if (ret < 0) {
		ret = -EINVAL;
		goto out_free;
	}
	bool gone = false;
	pfs_rd_init(&rd, m.fhs.p, m.fhs.len);
	while (pfs_dec_fh_item(&rd, &fh) == 1)
		gone |= interest_del(d->it, handles_key(d->hs, &fh), s->islot);
	/* An object nobody caches any more: as when a session ends
	 * (session.c), kept listings go. */
	if (gone && d->lc)
		lscache_bump(d->lc);
	s->forget_epoch++;
	pfs_debug("session %016llx: forgot %u objects", (unsigned long long)s->client_id, count);
	ret = 0;
out_free:
	free(dec);
	return ret;
}
