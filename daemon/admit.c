/* admit.c: connections before they authenticate: whether an export
 * rule admits their address, and the quota of pending handshakes per
 * source (see admit_i.h; figures and table in limits.c). Loop thread
 * only. */
#include "podfs/log.h"
#include "admit_i.h"
#include "conn_i.h"
#include "pfsd_i.h"
#include "session_i.h"

/* c authenticated or closed: it no longer counts as pending. */
void admit_done(struct conn *c)
{
	c->d->npreauth--;
	if (c->in_srcq)
		srcq_del(&c->d->srcq, &c->src);
	c->in_srcq = false;
}

/* Closes the oldest pending handshake from k (any source: NULL), other
 * than keep. */
void admit_evict(struct pfsd *d, const struct pfs_srckey *k, struct conn *keep)
{
	struct conn *o, *old = NULL;

	LIST_FOREACH(o, &d->conns, link)
		if (o->st != CS_READY && !o->closing && o != keep && o->in_srcq &&
		    (!k || pfs_srckey_eq(&o->src, k)))
			old = o;
	if (old) {
		pfs_debug("conn %llu: %s evicted to admit a new connection",
			  (unsigned long long)old->id, old->peer);
		conn_close(old, "evicted (too many unauthenticated connections)");
	}
}

/* Makes room for the new connection c among the pending handshakes:
 * unauthenticated connections cost an attacker nothing, so each source
 * address (IPv6: /64) has a quota, and when all of them together fill
 * the daemon's share, the oldest of the source with the most makes
 * room. A flood from one address only hurts that address. */
void admit_pending(struct pfsd *d, struct conn *c)
{
	struct pfs_srckey busiest;

	pfs_srckey_of(&c->addr, &c->src);
	if (srcq_count(&d->srcq, &c->src) >= d->lim.preauth_per_source)
		admit_evict(d, &c->src, c);
	else if (d->npreauth > d->lim.preauth && srcq_busiest(&d->srcq, &busiest))
		admit_evict(d, &busiest, c);
	srcq_add(&d->srcq, &c->src);
	c->in_srcq = true;
}

/* The new connection c is one more than PFSD_MAX_CONNS: the host with the
 * most connections closes its oldest, if it has more than c's host would
 * with c, so that one key holder's sessions by the thousand cannot keep
 * every other host from connecting; else c is closed. */
bool admit_room(struct conn *c)
{
	struct pfsd *d = c->d;
	struct hostacct *mine = host_find(d, &c->addr);
	struct hostacct *most = host_most(d, offsetof(struct hostacct, conns));
	unsigned have = mine ? mine->conns : 0;
	struct conn *o, *old = NULL;
	if (most && most->conns > have + 1)
		LIST_FOREACH(o, &d->conns, link)
			if (o->sess && o->sess->ha == most && !o->closing)
				old = o; /* the list is newest first */
	if (!old) {
		pfsd_warn_rl(d, "conn %llu: refused %s: all %u connections in use, and its host "
			     "has %u of them", (unsigned long long)c->id, c->peer, PFSD_MAX_CONNS, have);
		conn_close(c, "too many connections");
		return false;
	}
	pfsd_warn_rl(d, "conn %llu: %s (%s) closed to admit %s: all %u connections in use, and "
		     "its host has the most (%u)", (unsigned long long)old->id, old->peer, old->host,
		     c->peer, PFSD_MAX_CONNS, most->conns);
	conn_close(old, "closed to admit another host (all connections in use)");
	return true;
}

/* Whether an export rule admits the peer of the new connection c: if
 * so, c keeps the rule's options; if not, c is closed before reading a
 * byte, with one (rate-limited) line naming the peer. */
bool admit_rule(struct conn *c)
{
	struct pfsd *d = c->d;
	const struct export_rule *r = NULL;
	int len = sizeof(c->addr);

	if (uv_tcp_getpeername(&c->tcp, (struct sockaddr *)&c->addr, &len) == 0)
		r = exports_match(&d->rules, (const struct sockaddr *)&c->addr);
	if (!r) {
		pfsd_warn_rl(d, "conn %llu: refused %s: no export rule admits its address (rules: %s)",
			     (unsigned long long)c->id, c->peer,
			     d->rules_file ? d->rules_file : "--allow");
		conn_close(c, "no export rule admits its address");
		return false;
	}
	c->rule = r->o;
	return true;
}
