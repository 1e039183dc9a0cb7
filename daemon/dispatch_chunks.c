/* dispatch_chunks.c: the handlers of peer-assisted reads (CHUNK,
 * CHUNK_REPORT; wire_peer.h): a chunk's digest, taken
 * through the caller's open file, and where the client should get the
 * chunk (chunks_i.h). Worker threads (see op_i.h). */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <string.h>
#include <sys/stat.h>

#include "chunks_i.h"
#include "handles_i.h"
#include "op_i.h"
#include "pfsd_i.h"
#include "podfs/clock.h"
#include "session_i.h"

static struct chunk_ver ver_of(const struct pfs_attr *a)
{
	return (struct chunk_ver){
		.ino = a->ino,
		.size = a->size,
		.mtime_s = a->mtime_s,
		.ctime_s = a->ctime_s,
		.mtime_ns = a->mtime_ns,
		.ctime_ns = a->ctime_ns,
	};
}

/* The address of sa as 4 (IPv4, also IPv4-mapped IPv6) or 16 bytes in
 * out; 0 if it is neither. */
static size_t addr_bytes(const struct sockaddr_storage *sa, uint8_t out[16])
{
	if (sa->ss_family == AF_INET) {
		memcpy(out, &((const struct sockaddr_in *)sa)->sin_addr, 4);
		return 4;
	}
	if (sa->ss_family == AF_INET6) {
		const struct in6_addr *a = &((const struct sockaddr_in6 *)sa)->sin6_addr;
		if (IN6_IS_ADDR_V4MAPPED(a)) {
			memcpy(out, a->s6_addr + 12, 4);
			return 4;
		}
		memcpy(out, a->s6_addr, 16);
		return 16;
	}
	return 0;
}

static bool is_loopback(const uint8_t *a, size_t len)
{
	static const uint8_t lo6[16] = { [15] = 1 };
	return len == 4 ? a[0] == 127 : memcmp(a, lo6, 16) == 0;
}

/* Whether a client may be offered at a (len bytes): a unicast address
 * others can reach, loopback only for a client that itself connects over
 * loopback (a host would send other hosts to themselves). */
static bool addr_ok(const uint8_t *a, size_t len, const uint8_t *conn, size_t clen)
{
	static const uint8_t zero[16];

	if (len == 4 && (a[0] == 0 || a[0] >= 224))
		return false; /* unspecified, multicast, reserved, broadcast */
	if (len == 16 && (memcmp(a, zero, 16) == 0 || a[0] == 0xff ||
			  (a[0] == 0xfe && (a[1] & 0xc0) == 0x80)))
		return false; /* unspecified, multicast, link-local (needs a scope) */
	return !is_loopback(a, len) || (clen && is_loopback(conn, clen));
}

/* The peer number of the requester (chunks_peer_set with the address it
 * gave, or the one its connection comes from), or -1 if it serves
 * nobody. */
static int requester(struct op *o, const struct pfs_chunk_req *m)
{
	uint8_t conn[16], addr[16];
	size_t clen = addr_bytes(&o->r->c->addr, conn), alen = m->addr.len;

	if (m->port == 0)
		return -1;
	if (alen) {
		memcpy(addr, m->addr.p, alen);
	} else {
		memcpy(addr, conn, clen);
		alen = clen;
	}
	if (!alen || !addr_ok(addr, alen, conn, clen))
		return -1;
	int peer = -1;
	pthread_mutex_lock(&o->x.s->mu);
	if (!o->x.s->peer_dead)
		peer = chunks_peer_set(o->d->chunks, o->x.s->client_id, addr, alen,
				       (uint16_t)m->port);
	pthread_mutex_unlock(&o->x.s->mu);
	return peer;
}

int op_chunk(struct op *o)
{
	const struct pfs_chunk_req *m = &o->m.chunk_req;
	struct chunks *t = o->d->chunks;
	struct pfs_chunk_rep rep;
	struct chunk_source src;
	struct chunk_ticket tk;
	struct pfs_attr after;
	int ret;

	if (!t || !(o->x.s->caps & PFS_CAP_PEER))
		return -ENOSYS;
	if ((m->want & ~(uint32_t)PFS_CK_LOST) || m->port > 65535 ||
	    (m->addr.len != 0 && m->addr.len != 4 && m->addr.len != 16))
		return -EINVAL;
	memset(&rep, 0, sizeof(rep));
	ret = export_chunk(&o->x, o->obj, m->fid, m->flags, &rep.attr, 0, 0, NULL, NULL);
	if (ret < 0)
		return ret;
	if (!S_ISREG(rep.attr.mode))
		return -EOPNOTSUPP;
	struct chunk_ver v = ver_of(&rep.attr);
	uint64_t key = handles_key(o->d->hs, &m->fh);
	ret = chunks_digest(t, key, &v, m->index, rep.hash.b, &tk);
	if (ret == 1) {
		/* Read the chunk as the caller, through its open file. */
		struct pfs_attr before;
		ret = export_chunk(&o->x, o->obj, m->fid, m->flags, &before, tk.off, tk.len,
				   rep.hash.b, &after);
		struct chunk_ver va = ret == 0 ? ver_of(&after) : v;
		if (chunks_digest_done(t, &tk, ret == 0 ? rep.hash.b : NULL, &va) < 0)
			return ret < 0 && ret != -EIO ? ret : -EAGAIN;
	} else if (ret < 0) {
		return ret;
	}
	ret = chunks_choose(t, key, &v, m->index, rep.hash.b, requester(o, m),
			    (m->want & PFS_CK_LOST) != 0, (uint64_t)pfs_mono_ms(), &src);
	if (ret < 0)
		return ret;
	const struct chunks_conf *cf = chunks_conf(t);
	uint64_t off = m->index << cf->shift;
	rep.shift = cf->shift;
	rep.len = (uint32_t)(v.size - off < (1ull << cf->shift) ? v.size - off : 1ull << cf->shift);
	rep.source = src.kind;
	rep.peer = src.peer;
	rep.peer_gen = src.gen;
	rep.addr.p = src.addr;
	rep.addr.len = src.kind == PFS_CK_PEER ? src.alen : 0;
	rep.port = src.kind == PFS_CK_PEER ? src.port : 0;
	return OP_ENCODE(o, chunk_rep, &rep);
}

int op_chunk_report(struct op *o)
{
	const struct pfs_chunk_report_req *m = &o->m.chunk_report_req;
	struct chunks *t = o->d->chunks;

	if (!t || !(o->x.s->caps & PFS_CAP_PEER))
		return -ENOSYS;
	if (m->status & ~(uint32_t)PFS_CKR_KNOWN)
		return -EINVAL;
	chunks_report(t, handles_key(o->d->hs, &m->fh), m->index, m->hash.b,
		      chunks_peer_find(t, o->x.s->client_id), m->status, m->peer, m->peer_gen,
		      (uint64_t)pfs_mono_ms());
	return 0;
}
