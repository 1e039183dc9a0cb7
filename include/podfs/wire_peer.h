/* wire_peer.h: the part of the wire protocol (wire.h) that serves
 * peer-assisted reads: how a large file's chunks are named, hashed and
 * fetched from other clients. Included by wire.h; the opcodes are rows of
 * its PFS_OPS, their messages in codec.h. */
#ifndef PODFS_WIRE_PEER_H
#define PODFS_WIRE_PEER_H

/* Peer-assisted reads (opcodes 64-65 with the server, 70-79 between
 * clients; only in a session that negotiated PFS_CAP_PEER).
 *
 * The server cuts a large regular file into chunks of 1 << shift bytes
 * (the last one shorter) and gives out each chunk's SHA-256 (`digest`
 * fields: PFS_DIGEST_LEN raw bytes) for the file's content at the time
 * of the request. It remembers which clients hold (or are fetching)
 * which chunk, and sends a client that asks to another that holds it, so
 * that the same chunk leaves the server about once however many clients
 * read it. Clients fetch chunks from each other by digest: a client can
 * only ask for a chunk whose digest the server gave it, after the
 * server's own permission checks (the digest is the capability), and it
 * checks every chunk against the digest before it uses it, so a peer can
 * neither forge nor change data. The server stays the source of truth:
 * a chunk that a peer does not deliver intact and in time is read from
 * the server with READ.
 *
 * CHUNK: chunk_req names the chunk (fh, opened as fid with flags, as for
 *   READ, and index: its offset is index << shift) and how the asking
 *   client serves others: addr (4 bytes IPv4 or 16 bytes IPv6, network
 *   order; empty: the address the server sees the connection come from)
 *   and port (0: it serves nobody). want: PFS_CK_LOST if the client
 *   holds no copy although the server listed it as a holder (it dropped
 *   the chunk). Reply chunk_rep: the file's attributes when the digest
 *   was taken (attr.size: where its last chunk ends), shift
 *   (PFS_CHUNK_SHIFT_MIN..MAX, the same for the whole file), len (the
 *   chunk's bytes), the digest, and where to get the data: source
 *   PFS_CK_SERVER (READ it; the client is now listed as fetching it),
 *   PFS_CK_PEER (from the client at addr:port, peer and peer_gen naming
 *   it in reports; it holds the chunk or is fetching it right now, so
 *   its answer may take a while; the asking client is listed as
 *   fetching), PFS_CK_HELD (the client is listed as holding or fetching
 *   it already). addr and port are empty and 0 unless PFS_CK_PEER. Only
 *   files of at least the server's threshold are served in chunks
 *   (EOPNOTSUPP otherwise, also for anything but a regular file).
 * CHUNK_REPORT: what became of a chunk (fh, index, digest: the one
 *   CHUNK gave) that CHUNK named: status PFS_CKR_HAVE (the client holds
 *   it now, checked, and serves it), else it holds none; with
 *   PFS_CKR_PEER_BAD, the peer that CHUNK named (peer, peer_gen) did not
 *   deliver it intact and in time (a strike against it: several make the
 *   server offer it to nobody for a while; one chunk counts once however
 *   many clients report it); with PFS_CKR_PEER_MISSING instead, that peer
 *   answered that it does not hold the chunk (it dropped it, or had not
 *   begun to fetch it yet): the server forgets it for that chunk, without
 *   a strike. A report about another digest than the server's current one
 *   for that chunk is ignored.
 *
 * Between clients, on a connection of their own (TLS with the pod key's
 * PSK as with the server, unless the mount says tls=off): the connecting
 * client sends PEER_HELLO (magic PFS_PEER_MAGIC, a random id of its own
 * in client_id, never its session's client id, which AUTH would accept
 * from whoever presents it; nonce Nc), the serving one answers with its nonce Ns and
 * HMAC(K, "podfs peer server" | Nc | Ns | client_id); the connecting one
 * checks it and sends PEER_AUTH with HMAC(K, "podfs peer client" | Nc |
 * Ns | client_id) (auth.h), which the serving one checks (EACCES and
 * close if wrong). Then any number of PEER_GET: size (<= PFS_MAX_IO)
 * bytes at offset of the chunk whose digest is hash; peer_get_rep has
 * them (short only at the chunk's end). A serving client that is still
 * fetching the chunk answers when it has it, or ENOENT. Replies come in
 * the order of the requests; frames are never coded. */
#define PFS_DIGEST_LEN 32 /* SHA-256 */
#define PFS_CHUNK_SHIFT_MIN 20 /* 1 MiB */
#define PFS_CHUNK_SHIFT_MAX 26 /* 64 MiB */
#define PFS_PEER_MAGIC 0x50454550u /* "PEEP" */
enum {
	PFS_CK_LOST = 1u << 0, /* chunk_req.want */
};
enum {
	PFS_CK_SERVER = 0, /* chunk_rep.source */
	PFS_CK_PEER = 1,
	PFS_CK_HELD = 2,
};
enum {
	PFS_CKR_HAVE = 1u << 0,     /* chunk_report_req.status */
	PFS_CKR_PEER_BAD = 1u << 1,
	PFS_CKR_PEER_MISSING = 1u << 2,
	PFS_CKR_KNOWN = PFS_CKR_HAVE | PFS_CKR_PEER_BAD | PFS_CKR_PEER_MISSING,
};

#endif /* PODFS_WIRE_PEER_H */
