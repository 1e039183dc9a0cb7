/* wire.h: the podfs wire protocol, version 1. This header is the spec.
 *
 * Transport: one TCP stream per connection. Everything on it is a frame:
 *
 *   struct pfs_frame_hdr (24 bytes, little-endian) + payload
 *
 * The payload is `wire_len` bytes. If PFS_FF_LZ4 is set it is one LZ4 block
 * (LZ4_compress_default format) that decompresses to exactly `raw_len`
 * bytes. If PFS_FF_ZR is set it is zero-word coded (below) and expands to
 * exactly `raw_len` bytes, with 0 < wire_len <= raw_len. At most one of
 * the two is set; with neither, wire_len == raw_len. raw_len never exceeds
 * PFS_MAX_PAYLOAD and wire_len never exceeds PFS_MAX_WIRE; a peer that
 * breaks either rule, or sends a payload that does not decode to exactly
 * raw_len bytes, has its connection closed.
 *
 * Zero-word coding (PFS_FF_ZR): the raw payload is read as 8-byte words
 * (n = raw_len / 8 of them) followed by a tail of raw_len % 8 bytes. The
 * words go in groups of 64 (the last group holds the n % 64 left over, if
 * any). Each group is coded as a u64 mask, little-endian, whose bit i is
 * set if word i of the group is not all zero bytes, then those words, in
 * order, 8 bytes each; the words whose bit is clear are zero. Mask bits
 * past the last word of the last group must be clear. The tail follows
 * the last group verbatim. The coded groups and tail fill the payload
 * exactly. It exists for checkpoint data that is largely zeros (sparse or
 * pruned weights, padding): coding and decoding cost about one pass over
 * memory without branches per word, where LZ4 costs seconds of CPU per GiB.
 * A sender uses a coding only if the peer announced the matching
 * capability and only where it saves at least 1/8 of the payload.
 *
 * Requests carry a non-zero `id` chosen by the client, unique among that
 * client's outstanding requests; the reply carries the same id and op with
 * PFS_FF_REPLY set. Many requests may be in flight; replies come in any
 * order. The server may push frames at any time (PFS_FF_PUSH, id 0).
 *
 * `status` is 0 on success or a positive Linux errno value in a reply;
 * a reply with status != 0 has an empty payload. Both ends are Linux, so
 * errno values travel as they are.
 *
 * Session: the first request is PFS_OP_HELLO, the second PFS_OP_AUTH
 * (mutual HMAC-SHA256 challenge-response over the pod key, see auth.h).
 * Before AUTH succeeds the server accepts nothing else, and no payload
 * over PFS_MAX_HANDSHAKE bytes.
 *
 * Payload encoding (see codec.h): fields in the listed order, integers
 * little-endian, no padding. Compound field types:
 *   fh     u8 len (1..PFS_FH_MAX) + len bytes, opaque to the client
 *   name   u16 len (1..PFS_NAME_MAX) + bytes; no '/', no NUL, not "." or ".."
 *   path   u16 len (1..PFS_PATH_MAX) + bytes; no NUL (a symlink target)
 *   xname  u16 len (1..PFS_XATTR_NAME_MAX) + bytes; no NUL
 *   bytes  u32 len (0..PFS_MAX_IO) + bytes
 *   creds  u32 uid, u32 gid, u16 ngroups (0..PFS_GROUPS_MAX), u32 groups[]
 *   attr   struct pfs_attr fields in order (PFS_ATTR_WIRE_SIZE bytes)
 *   entry  fh + attr
 *   nonce  PFS_NONCE_LEN raw bytes;  mac  PFS_MAC_LEN raw bytes
 *   digest PFS_DIGEST_LEN raw bytes (a SHA-256)
 */
#ifndef PODFS_WIRE_H
#define PODFS_WIRE_H

#include <stdint.h>

#define PFS_MAGIC 0x31534650u /* "PFS1" in the HELLO request */
/* 2: hello_rep carries write_verf (1: the boot_id was the verifier). */
#define PFS_VERSION 2
#define PFS_DEFAULT_PORT 7049

/* Hard limits. Every length read from the wire is checked against these
 * before anything is allocated. */
#define PFS_MAX_IO (1u << 20)              /* bytes per READ/WRITE */
#define PFS_MAX_COPY (64u << 20)           /* bytes per COPY_RANGE */
#define PFS_MAX_PAYLOAD (PFS_MAX_IO + 4096) /* raw payload of any frame */
#define PFS_MAX_WIRE (PFS_MAX_PAYLOAD + PFS_MAX_PAYLOAD / 255 + 16) /* >= LZ4_COMPRESSBOUND */
#define PFS_MAX_HANDSHAKE 512               /* payload before auth */
#define PFS_FH_MAX 160                      /* opaque handle bytes */
#define PFS_NAME_MAX 255
#define PFS_PATH_MAX 4096
#define PFS_XATTR_NAME_MAX 255
#define PFS_XATTR_SIZE_MAX 65536
#define PFS_GROUPS_MAX 64
#define PFS_HOSTNAME_MAX 64
#define PFS_READDIR_MAX (256u * 1024)       /* bytes of READDIR reply */
#define PFS_NONCE_LEN 32
#define PFS_MAC_LEN 32
#define PFS_KEY_LEN 32

/* Compression: the sender tries LZ4 or zero-word coding only on payloads
 * of at least this many bytes, and keeps the result only if it saves at
 * least 1/8. */
#define PFS_LZ4_MIN 512
#define PFS_ZR_GROUP 64 /* words per zero-word group (bits of its mask) */

struct pfs_frame_hdr {
	uint32_t wire_len; /* payload bytes following on the wire */
	uint32_t raw_len;  /* payload bytes after decompression */
	uint64_t id;       /* request id; 0 for pushes */
	uint16_t op;       /* enum pfs_op */
	uint16_t flags;    /* PFS_FF_* */
	int32_t status;    /* reply: 0 or positive errno; request: 0 */
};
#define PFS_FRAME_HDR_SIZE 24
_Static_assert(sizeof(struct pfs_frame_hdr) == PFS_FRAME_HDR_SIZE, "frame header is 24 bytes");

enum {
	PFS_FF_REPLY = 1u << 0,
	PFS_FF_LZ4 = 1u << 1,
	PFS_FF_PUSH = 1u << 2,
	PFS_FF_ZR = 1u << 3, /* zero-word coded payload (see above) */
	PFS_FF_CODED = PFS_FF_LZ4 | PFS_FF_ZR,
	PFS_FF_KNOWN = PFS_FF_REPLY | PFS_FF_LZ4 | PFS_FF_PUSH | PFS_FF_ZR,
};

/* Capabilities, negotiated in HELLO: the session uses the intersection. */
enum {
	PFS_CAP_LZ4 = 1u << 0,   /* peer accepts PFS_FF_LZ4 payloads */
	PFS_CAP_PUSH = 1u << 1,  /* client applies server pushes */
	PFS_CAP_ZR = 1u << 2,    /* peer accepts PFS_FF_ZR payloads */
	PFS_CAP_PUSH_ACK = 1u << 3, /* client acknowledges pushes (PUSH_ACK) */
	/* The replies to MKNOD MKDIR SYMLINK LINK CREATE add the directory's
	 * attributes after the change (entry_dir_rep instead of entry_rep),
	 * those to UNLINK RMDIR and to a RENAME within one directory carry
	 * them (dir_rep instead of nothing). A retried request may get the
	 * reply cached for its first try, so a client tells the two forms
	 * apart by their length. */
	PFS_CAP_DIR_ATTR = 1u << 5,
	/* With PFS_CAP_DIR_ATTR: the reply to MKDIR is mkdir_rep, whose flag
	 * PFS_MK_EMPTY says the new directory was still empty after the
	 * session's interest in it was registered, so that any entry made in
	 * it since is pushed: the client knows its whole listing (none) and
	 * needs no LISTDIR for it. The daemon read the directory with the
	 * caller's credentials to find it empty (as LISTDIR would have). */
	PFS_CAP_NEW_DIR = 1u << 6,
	/* The reply to FALLOCATE is attr_rep, the file's attributes after
	 * the change (as WRITE's and SETATTR's replies carry them), instead
	 * of nothing: the client then knows its size, times and blocks
	 * without a GETATTR. A client tells the two forms apart by their
	 * length. */
	PFS_CAP_POST_ATTR = 1u << 7,
	/* The items of a LISTDIR reply say which of the extended attributes
	 * a listing's reader asks for at every entry are absent
	 * (PFS_LD_NO_CAPS, PFS_LD_NO_ACL_ACCESS, PFS_LD_NO_ACL_DEFAULT,
	 * PFS_LD_NO_SELINUX), so that the client answers their GETXATTR
	 * with ENODATA itself while the item is coherent (`ls -l` asks for
	 * two or three of them per entry). */
	PFS_CAP_LIST_XATTR = 1u << 8,
	/* Peer-assisted reads (wire_peer.h): the server
	 * answers CHUNK and CHUNK_REPORT. A client asks for it only if it
	 * takes part (podfs -o peers); it sends neither without it. */
	PFS_CAP_PEER = 1u << 9,
	/* Attribute delegations of new files (wire_deleg.h). A
	 * client asks for it only if it answers SETATTR under a delegation
	 * (podfs -o delegate), and only with PFS_CAP_PUSH, PFS_CAP_PUSH_ACK
	 * and PFS_CAP_DIR_ATTR; a server grants one only with all four. */
	PFS_CAP_DELEG = 1u << 10,
	/* Listings carry the directory's own cookies: each item its READDIR
	 * cookie, the header those of "." and ".." (wire_list.h), so that a
	 * client can answer readdir from a listing with cookies READDIR
	 * takes. */
	PFS_CAP_LIST_COOKIES = 1u << 11,
	/* With PFS_CAP_DIR_ATTR: the reply to CREATE is mkdir_rep (its
	 * slots empty), and mkdir_rep's flags PFS_MK_NO_CAPS,
	 * PFS_MK_NO_ACL_ACCESS, PFS_MK_NO_ACL_DEFAULT and PFS_MK_NO_SELINUX
	 * (CREATE and MKDIR) say that the object the call made lacked that
	 * extended attribute (getxattr answered ENODATA) after the
	 * session's interest in it was registered: a change since is
	 * pushed (INVAL_INODE). The kernel asks a new file for its ACL and
	 * capabilities before its first write (a caller that does not own
	 * it: root squashed), and a new directory for its ACLs before the
	 * first create in it; the client answers them itself. */
	PFS_CAP_NEW_XATTRS = 1u << 12,
	/* A RENAME that moved an object (not RENAME_EXCHANGE nor PFS_RN_DELEG:
	 * dir_rep) replies rename_rep: the moved object's handle and
	 * attributes after it (the kernel asks for them after every rename),
	 * within one directory (PFS_RR_DIR) dir_rep's attributes, and what it
	 * replaced: the object's handle (PFS_RR_VICTIM), nothing (PFS_RR_NONE,
	 * victim empty) or neither flag where that is not known. */
	PFS_CAP_RENAME_ATTR = 1u << 13,
	/* UNLINK, RMDIR reply unlink_rep: dir_rep's attributes (PFS_UR_DIR), the removed handle. */
	PFS_CAP_UNLINK_VICTIM = 1u << 14,
	/* A WRITE through an O_APPEND fid replies write_at_rep: write_rep
	 * and the offset where the data landed (the file's end then). A
	 * WRITE with PFS_WR_AT in its flags writes at its offset even
	 * through an O_APPEND fid: a client sends an append again that way,
	 * to where it landed, after the server's machine restarted before
	 * a commit (an append sent again as an append would add its bytes
	 * a second time if they had reached the disk). */
	PFS_CAP_APPEND_AT = 1u << 15,
	PFS_CAPS_ALL = PFS_CAP_LZ4 | PFS_CAP_PUSH | PFS_CAP_ZR | PFS_CAP_PUSH_ACK |
		       PFS_CAP_DIR_ATTR | PFS_CAP_NEW_DIR | PFS_CAP_POST_ATTR |
		       PFS_CAP_LIST_XATTR | PFS_CAP_PEER | PFS_CAP_DELEG | PFS_CAP_LIST_COOKIES |
		       PFS_CAP_NEW_XATTRS | PFS_CAP_RENAME_ATTR | PFS_CAP_UNLINK_VICTIM |
		       PFS_CAP_APPEND_AT,
	PFS_CAPS_CODECS = PFS_CAP_LZ4 | PFS_CAP_ZR, /* the payload codings */
	/* Not negotiated but asked for: a client sets it in HELLO to make the
	 * connection a BULK connection of the session client_id already has
	 * (podfs -o conns=N). The server echoes it in the HELLO reply if it
	 * knows bulk connections; a client whose server does not echo it
	 * must not send AUTH on that connection (an old server would take
	 * it for the session's main connection). At AUTH the server refuses
	 * a bulk connection with ENOTCONN unless the session exists and has
	 * its main connection; the AUTH reply is then the same as for a
	 * resumed session. A bulk connection carries only READ, WRITE and
	 * PING (anything else is a protocol violation: replies that carry
	 * metadata must share the stream of the pushes, see the race
	 * analysis in daemon/push.c), never gets pushes, and does not keep
	 * the session alive: the session's lease runs from the loss of its
	 * main connection, and its bulk connections are closed when it ends. A retried request may come on
	 * any connection of the session (the reply cache is per session).
	 * A session has at most PFS_BULK_MAX of them; the server refuses
	 * more with EMFILE. */
	PFS_CAP_BULK = 1u << 4,
};
#define PFS_BULK_MAX 15

/* Opcodes, one row each: everything podfsd and podfs need to know about an
 * opcode is in its row, and every consumer reads it from here (the enum,
 * the names, the reply cache, the read-only check, the bulk connections
 * and the push ordering).
 *
 *   X(NAME, value, request, reply, drc, once, modify, bulk, meta, ordered)
 *
 * value    the opcode on the wire: part of the protocol, never reused.
 * request  the request payload, a message of codec.h (none: empty; a push
 *          row names its push payload).
 * reply    the successful reply's payload (none: empty; -: no reply;
 *          dirents, listing, listing_page and listings: lists built from
 *          codec.h's primitives, see below). A reply with status != 0 is
 *          always empty.
 * drc      1: not idempotent. The session's duplicate-request cache keeps
 *          the reply (PFSD_DRC_MAX per session), so a retry after a
 *          reconnect gets the first try's reply without running again.
 *          A WRITE through an O_APPEND fid is not idempotent either (the
 *          daemon puts the data where the file ends), nor is an OPEN
 *          with O_TRUNC (run again, it would cut what was written
 *          since): their replies are kept too.
 * once     1: a retry that arrives while the first try still runs is not
 *          run: it gets the first try's reply (every drc opcode; WRITE:
 *          idempotent, but a late copy could overwrite a later write of
 *          the same range; SETLK, UNLOCK_OWNER and RECLAIM: a late copy of
 *          an unlock could drop a lock its owner took after the retry's
 *          reply, one of a lock take again a lock it dropped since;
 *          OPEN: with O_TRUNC, its reply is kept as a drc one's).
 * modify   1: changes the export; answered EROFS by a read-only export.
 * bulk     1: may travel on a bulk connection (PFS_CAP_BULK); podfs spreads
 *          READ and WRITE over all the connections of a mount. Anything
 *          else on a bulk connection is a protocol violation.
 * meta     1: its reply hands out metadata (attributes, names, data
 *          versions) that a later push may make stale.
 * ordered  1: a push made while it runs waits for its reply on the
 *          client's stream (the race analysis in daemon/push.c); 0 for
 *          requests whose replies carry no state a push could contradict,
 *          and for the frames the server handles on its loop.
 *
 * Ranges: 1-9 session, 10-39 and 50-57 POSIX operations, 40-49 caching, 58-59 lock
 * reclaim, 60-69 request economy (64-65: peer-assisted reads, to the
 * server), 70-79 between clients (peer-assisted reads: never sent to the
 * server, which answers ENOSYS), 100 and up pushes (server -> client).
 */
/*       NAME          val  request           reply            drc once mod bulk meta ord */
#define PFS_OPS(X)                                                                          \
	X(HELLO,        1,  hello_req,        hello_rep,        0,  0,   0,  0,   0,   0)   \
	X(AUTH,         2,  auth_req,         auth_rep,         0,  0,   0,  0,   0,   0)   \
	X(GOODBYE,      3,  none,             none,             0,  0,   0,  0,   0,   0)   \
	X(PING,         4,  ping_req,         ping_rep,         0,  0,   0,  1,   0,   0)   \
	X(LOOKUP,       10, lookup_req,       entry_rep,        0,  0,   0,  0,   1,   1)   \
	X(GETATTR,      11, getattr_req,      attr_rep,         0,  0,   0,  0,   1,   1)   \
	X(SETATTR,      12, setattr_req,      attr_rep,         1,  1,   1,  0,   0,   1)   \
	X(READLINK,     13, readlink_req,     readlink_rep,     0,  0,   0,  0,   1,   1)   \
	X(MKNOD,        14, mknod_req,        entry_rep,        1,  1,   1,  0,   0,   1)   \
	X(MKDIR,        15, mkdir_req,        entry_rep,        1,  1,   1,  0,   0,   1)   \
	X(SYMLINK,      16, symlink_req,      entry_rep,        1,  1,   1,  0,   0,   1)   \
	X(UNLINK,       17, unlink_req,       none,             1,  1,   1,  0,   0,   1)   \
	X(RMDIR,        18, unlink_req,       none,             1,  1,   1,  0,   0,   1)   \
	X(RENAME,       19, rename_req,       none,             1,  1,   1,  0,   0,   1)   \
	X(LINK,         20, link_req,         entry_rep,        1,  1,   1,  0,   0,   1)   \
	X(OPEN,         21, open_req,         attr_rep,         0,  1,   0,  0,   1,   1)   \
	X(CREATE,       22, create_req,       entry_rep,        1,  1,   1,  0,   0,   1)   \
	X(READ,         23, read_req,         read_rep,         0,  0,   0,  1,   0,   1)   \
	X(WRITE,        24, write_req,        write_rep,        0,  1,   1,  1,   0,   1)   \
	X(RELEASE,      25, release_req,      none,             0,  0,   0,  0,   0,   0)   \
	X(FSYNC,        26, fsync_req,        none,             0,  0,   0,  0,   0,   0)   \
	X(OPENDIR,      27, open_req,         attr_rep,         0,  0,   0,  0,   1,   1)   \
	X(READDIR,      28, readdir_req,      dirents,          0,  0,   0,  0,   1,   1)   \
	X(RELEASEDIR,   29, release_req,      none,             0,  0,   0,  0,   0,   0)   \
	X(STATFS,       30, statfs_req,       statfs_rep,       0,  0,   0,  0,   0,   0)   \
	X(SETXATTR,     31, setxattr_req,     none,             1,  1,   1,  0,   0,   1)   \
	X(GETXATTR,     32, getxattr_req,     xattr_rep,        0,  0,   0,  0,   1,   1)   \
	X(LISTXATTR,    33, listxattr_req,    xattr_rep,        0,  0,   0,  0,   1,   1)   \
	X(REMOVEXATTR,  34, removexattr_req,  none,             1,  1,   1,  0,   0,   1)   \
	X(FALLOCATE,    35, fallocate_req,    none,             0,  0,   1,  0,   0,   1)   \
	X(GETLK,        36, lock_req,         getlk_rep,        0,  0,   0,  0,   0,   0)   \
	X(SETLK,        37, lock_req,         none,             0,  1,   0,  0,   0,   0)   \
	X(UNLOCK_OWNER, 38, unlock_owner_req, none,             0,  1,   0,  0,   0,   0)   \
	X(LSEEK,        39, lseek_req,        lseek_rep,        0,  0,   0,  0,   0,   1)   \
	X(FORGET,       40, forget_req,       none,             0,  0,   0,  0,   0,   0)   \
	X(REVALIDATE,   41, revalidate_req,   revalidate_rep,   0,  0,   0,  0,   1,   1)   \
	X(LOOKUP_DATA,  42, lookup_data_req,  lookup_data_rep,  0,  0,   0,  0,   1,   1)   \
	X(DELEG_DIR,    43, getattr_req,      none,             0,  0,   0,  0,   0,   0)   \
	X(DELEG_RETURN, 44, getattr_req,      none,             0,  0,   0,  0,   0,   0)   \
	X(SLOTS,        45, slots_req,        slots_rep,        0,  0,   1,  0,   0,   1)   \
	X(REVALIDATED,  46, revalidated_req,  none,             0,  0,   0,  0,   0,   0)   \
	X(COPY_RANGE,   50, copy_range_req,   write_rep,        0,  1,   1,  0,   0,   1)   \
	X(RECLAIM,      58, lock_req,         none,             0,  1,   0,  0,   0,   0)   \
	X(RECLAIM_DONE, 59, reclaim_done_req, none,             0,  0,   0,  0,   0,   0)   \
	X(PUSH_ACK,     60, push_ack,         -,                0,  0,   0,  0,   0,   0)   \
	X(LISTDIR,      61, listdir_req,      listing,          0,  0,   0,  0,   1,   1)   \
	X(LISTDIR_PAGE, 62, listdir_page_req, listing_page,     0,  0,   0,  0,   1,   1)   \
	X(LISTDIRS,     63, listdirs_req,     listings,         0,  0,   0,  0,   1,   1)   \
	X(UNLINKS,      66, unlinks_req,      unlinks_rep,      1,  1,   1,  0,   0,   1)   \
	X(CREATES,      67, creates_req,      creates_rep,      1,  1,   1,  0,   0,   1)   \
	X(CHUNK,        64, chunk_req,        chunk_rep,        0,  0,   0,  0,   0,   1)   \
	X(CHUNK_REPORT, 65, chunk_report_req, none,             0,  0,   0,  0,   0,   0)   \
	X(PEER_HELLO,   70, peer_hello_req,   peer_hello_rep,   0,  0,   0,  0,   0,   0)   \
	X(PEER_AUTH,    71, peer_auth_req,    none,             0,  0,   0,  0,   0,   0)   \
	X(PEER_GET,     72, peer_get_req,     peer_get_rep,     0,  0,   0,  0,   0,   0)   \
	X(INVAL_INODE,  100, inval_inode_push, -,               0,  0,   0,  0,   0,   0)   \
	X(INVAL_ENTRY,  101, inval_entry_push, -,               0,  0,   0,  0,   0,   0)   \
	X(LOCK_WAKE,    102, lock_wake_push,   -,               0,  0,   0,  0,   0,   0)   \
	X(RECALL,       103, recall_push,      -,               0,  0,   0,  0,   0,   0)

enum pfs_op {
#define PFS_X_ENUM(n, v, ...) PFS_OP_##n = v,
	PFS_OPS(PFS_X_ENUM)
#undef PFS_X_ENUM
	PFS_OP_MAX = 128, /* every opcode is < PFS_OP_MAX */
};

/* What each opcode asks for, and its valid replies.
 *
 * A successful reply carries the reply message of the opcode's row; an
 * error reply carries only its status (a positive errno). Beyond the
 * errors listed for each opcode, any request may get: EINVAL (its payload
 * does not decode), ENOSYS (an opcode the server does not handle); one
 * that names an object by handle, ESTALE (the handle is not the server's
 * or its object is gone); one that carries creds, EACCES or EPERM (the
 * server ran it with those credentials, mapped by its export rules, and
 * the kernel refused); one with modify set, EROFS on a read-only export;
 * and any errno the underlying system call returned on the server
 * (ENOSPC, EDQUOT, EIO...), which travels as it is.
 *
 * Session (see also "Session" above and auth.h):
 * HELLO        First frame of a connection: protocol versions, capabilities,
 *              client id (random per client process, never 0, the
 *              same on every reconnect), client nonce, host name (for logs).
 *              Replies: hello_rep (version, capabilities in force, boot_id
 *              of this server instance, server nonce, server MAC, the
 *              largest payload, and the write verifier: it changes when
 *              writes acknowledged before may have been lost, that is
 *              when the server's machine restarted, not when only the
 *              server did, whose acknowledged writes are in the
 *              machine's page cache; see "Durability" in fs/wb_i.h);
 *              EPROTONOSUPPORT (no common version; the server closes).
 * AUTH         Second frame: the client MAC. Replies: auth_rep (the export
 *              root, PFS_AUTH_* flags); EACCES (wrong key; closed);
 *              the root's handle changes only with the server's handle
 *              secret (or its export root): a client that gets another
 *              one at a reconnect holds stale handles and finds its
 *              objects again by name (docs/durability.md);
 *              ENOTCONN (a bulk connection whose session has no main
 *              connection; closed), EMFILE (PFS_BULK_MAX bulk connections
 *              already; closed).
 * GOODBYE      Ends the session now: its open files and locks are
 *              released. Replies: none (empty); the server then closes.
 * PING         Echoes stamp. Replies: ping_rep.
 *
 * Objects and names (fh: a handle from an earlier reply; name: one
 * component in directory parent):
 * LOOKUP       name in parent. Replies: entry_rep; ENOENT, ENOTDIR.
 * GETATTR      Attributes of fh (no permission needed). Replies: attr_rep.
 * SETATTR      Changes the attributes in `valid` (PFS_SET_*) of fh, through
 *              open file fid if not 0 (ftruncate of a file opened for
 *              writing). Replies: attr_rep (after the change).
 * READLINK     Target of symlink fh. Replies: readlink_rep; EINVAL (not a
 *              symlink).
 * MKNOD, MKDIR, SYMLINK, LINK, CREATE
 *              Make name in parent (LINK: a new name for fh; CREATE: a
 *              regular file, also opened as fid with flags; without
 *              O_EXCL an existing regular file is opened). mode is
 *              masked by umask on the server. Replies: entry_rep, or
 *              entry_dir_rep with PFS_CAP_DIR_ATTR, or mkdir_rep (MKDIR
 *              with PFS_CAP_NEW_DIR, CREATE with PFS_CAP_NEW_XATTRS or
 *              PFS_CAP_DELEG); EEXIST, ENOENT, ENOTDIR, EMLINK.
 *              MKDIR's slots, when not 0, asks for the new directory's
 *              delegation and up to that many slots in it (at most
 *              PFS_SLOTS_MAX; wire_deleg.h): mkdir_rep's flag
 *              PFS_MK_DELEG says it was granted, and its slots are
 *              packed ENTRYs as SLOTS answers them (none is an answer).
 *              A refusal is no error: the directory is made either way.
 * UNLINK, RMDIR
 *              Remove name from parent. Replies: none, dir_rep (PFS_CAP_DIR_ATTR)
 *              or unlink_rep (PFS_CAP_UNLINK_VICTIM); ENOENT, EISDIR/ENOTDIR,
 *              ENOTEMPTY, EBUSY.
 * RENAME       name in parent to newname in newparent; flags are
 *              renameat2's (RENAME_NOREPLACE, RENAME_EXCHANGE), and
 *              PFS_RN_DELEG: a rename the client answered under its
 *              delegation of parent (newparent the same), refused (EIO)
 *              if that was revoked meanwhile.
 *              Replies: none, or dir_rep with PFS_CAP_DIR_ATTR when
 *              newparent is parent (its attributes after the change),
 *              or rename_rep with PFS_CAP_RENAME_ATTR; ENOENT, EEXIST,
 *              ENOTEMPTY, EXDEV, EINVAL.
 *
 * Files (fid: an open-file id the client chooses, unique in its session):
 * OPEN         Opens fh as fid with open flags. Replies: attr_rep (the
 *              version the client's close-to-open check uses; nlink 0: the
 *              file has no name left); EISDIR, ETXTBSY, ELOOP (a symlink).
 * READ         size (<= PFS_MAX_IO) bytes at offset of fh through fid; a
 *              fid the server does not know (a file the client opened
 *              without asking) is opened by handle with flags. Replies:
 *              read_rep (short only at the end of the file).
 * WRITE        data at offset of fh through fid (opened as for READ).
 *              Replies: write_rep (bytes written, attributes after), or
 *              write_at_rep through an O_APPEND fid (PFS_CAP_APPEND_AT).
 * RELEASE      Closes fid. Replies: none (also for a fid not known).
 * FSYNC        Makes fh's data (datasync) or data and metadata durable on
 *              the server's disk; the commit of write-behind. Replies: none.
 * FALLOCATE    fallocate(2) mode on fh through fid. Replies: none, or
 *              attr_rep (after the change) with PFS_CAP_POST_ATTR;
 *              EOPNOTSUPP.
 * LSEEK        SEEK_DATA or SEEK_HOLE from offset. Replies: lseek_rep; ENXIO.
 * COPY_RANGE   copy_file_range(2) on the server: up to length bytes of
 *              src at src_off (through src_fid, opened as for READ with
 *              src_flags) to dst at dst_off (through dst_fid, as for
 *              WRITE), at most PFS_MAX_COPY per request. The copied
 *              bytes are on the server's disk before the reply
 *              (fdatasync), so the client keeps nothing to send again
 *              after a restart.
 *              Replies: write_rep (bytes copied, short at src's end,
 *              and dst's attributes after); EBADF (a fid not open for
 *              reading, or for writing), EINVAL (overlapping ranges of
 *              one file), EFBIG, ENOSPC, EISDIR.
 *
 * Directories:
 * OPENDIR      Opens directory fh as fid. Replies: attr_rep; ENOTDIR.
 * READDIR      Entries of fid from cookie offset, at most max_bytes
 *              (<= PFS_READDIR_MAX) of reply; plus asks for each entry's
 *              handle and attributes. Replies: dirents (codec.h READDIR:
 *              u8 eof, then entries).
 * RELEASEDIR   Closes directory fid. Replies: none.
 * LISTDIR      The whole directory at once (wire_list.h).
 *              Replies: listing; ENOTDIR.
 * LISTDIR_PAGE The directory in pages, from a cookie on (wire_list.h).
 *              Replies: listing_page; ENOTDIR.
 * LISTDIRS     Several directories at once, as many LISTDIRs without
 *              contents (wire_list.h). Replies: listings;
 *              E2BIG (more than PFS_LISTDIRS_MAX).
 * STATFS       Of the export's filesystem. Replies: statfs_rep.
 *
 * Extended attributes:
 * SETXATTR     Sets name to value (flags: XATTR_CREATE, XATTR_REPLACE).
 *              Replies: none; EEXIST, ENODATA, ENOTSUP, E2BIG, ENOSPC.
 * GETXATTR, LISTXATTR
 *              The value of name, or the list of names; size 0 asks only
 *              for the length. Replies: xattr_rep (size, and the value if
 *              size was not 0); ENODATA (no such attribute), ERANGE
 *              (larger than size), ENOTSUP.
 * REMOVEXATTR  Removes name. Replies: none; ENODATA.
 *
 * Locks (see "Locks and a coordinator restart" above):
 * GETLK        The first lock that conflicts with lock_req. Replies:
 *              getlk_rep (type PFS_LK_UN: none); PFS_ST_GRACE.
 * SETLK        Takes or releases lock_req (owner: the client's lock owner,
 *              opaque to the server: for a POSIX lock its process, for a
 *              flock its open file, which must not be named by anything
 *              that a later open may reuse while an unlock of the earlier
 *              one is still on its way;
 *              PFS_LKF_FLOCK for flock(2) semantics; PFS_LKF_WAIT: wake me
 *              with LOCK_WAKE). Replies: none; EAGAIN (a conflicting lock
 *              is held), PFS_ST_GRACE (taking a lock during grace),
 *              ENOLCK, EDEADLK.
 * UNLOCK_OWNER Releases every POSIX lock owner holds on fh (close(2) of a
 *              descriptor). Replies: none.
 * RECLAIM      Takes again a lock held before the server restarted.
 *              Replies: none; ENOLCK (no grace period, or the client was
 *              not a holder), EAGAIN (another client reclaimed a
 *              conflicting lock).
 * RECLAIM_DONE The client reclaimed all it holds. Replies: none.
 *
 * Caching (see above): FORGET (replies: none; E2BIG over PFS_BATCH_MAX
 * handles), REVALIDATE (replies: revalidate_rep; E2BIG), REVALIDATED
 * (replies: none), LOOKUP_DATA (replies: lookup_data_rep; as LOOKUP). PUSH_ACK is one-way: no reply.
 * UNLINKS (request economy): the unlinks of names (packed NAME items, at
 * most PFS_UNLINKS_MAX) in parent, one after the other, each as an
 * UNLINK. Replies: unlinks_rep: the directory's attributes after them
 * (if flags has PFS_UL_DIR_ATTR) and, per name in order, a u32 (little
 * endian): 0, or the positive errno of its unlink; EINVAL (a malformed
 * list, or none), E2BIG (too many); EIO (nothing removed) if the
 * session's delegation of parent was revoked. podfs sends it only for
 * unlinks it answered under a directory delegation.
 * DELEG_DIR (replies: none, the directory delegation of fh is granted;
 * EAGAIN: not now; ENOTDIR; see wire_deleg.h), DELEG_RETURN
 * (replies: none; the session no longer holds fh's, if it did; its
 * slots there are dropped).
 * SLOTS: up to count (at most PFS_SLOTS_MAX) new files in directory dir,
 * made now but not named yet, for the caller to name later with CREATES
 * (wire_deleg.h). Replies: slots_rep: packed ENTRYs (handle and
 * attributes of each), possibly fewer than asked (the session's limit,
 * PFS_SLOTS_PER_SESSION, or its open files); EAGAIN (the session does
 * not hold dir's directory delegation, or the directory has a default
 * ACL), EPERM (the caller's ids are squashed).
 * CREATES (request economy): names slots of parent, one after the other.
 * items: packed (FH slot, U64 fid, U32 flags, U32 mode, NAME, U32 how,
 * BYTES data), at most PFS_CREATES_MAX; mode is the permission bits only
 * (umask applied, nothing above 0777). Each writes data at offset 0 of
 * the slot, opens it as fid with open flags flags (as CREATE would have;
 * fid 0: none, and a fid already open stays; none with PFS_CI_CLOSE: the
 * client closed it already), sets its mode and times (now) and links it
 * as name, like a CREATE with O_EXCL. With PFS_CI_ATTRS the item ends
 * with a change of attributes (U32 valid: PFS_SET_MODE, _UID, _GID,
 * _ATIME, _MTIME, _CTIME only; U32 mode, U32 uid, U32 gid, I64 atime_s,
 * U32 atime_ns, I64 mtime_s, U32 mtime_ns), made as a SETATTR would,
 * after the data and before the link (refused: the item's error, nothing
 * named). With PFS_CI_SYNC its data is synced (fdatasync, after the
 * whole list is named) before the reply: a failed sync is that item's
 * error. Replies: creates_rep: the directory's attributes
 * after them (if flags has PFS_UL_DIR_ATTR), per item a u32 status (0 or
 * the positive errno: EEXIST, ESTALE: no such slot, EPERM: the slot was
 * made for another uid) and, for each item made, its ATTR, in order;
 * EINVAL, E2BIG, or EIO (nothing made) as UNLINKS.
 *
 * Peer-assisted reads (see below): CHUNK (replies: chunk_rep;
 * EOPNOTSUPP: the file is not served by chunks, ERANGE: past its end,
 * EAGAIN: it changed while its hash was taken), CHUNK_REPORT (replies:
 * none). Between clients: PEER_HELLO (replies: peer_hello_rep),
 * PEER_AUTH (replies: none; EACCES), PEER_GET (replies: peer_get_rep;
 * ENOENT: not held).
 *
 * Pushes (server -> client, PFS_FF_PUSH, id 0, no reply):
 * INVAL_INODE  fh's attributes (offset -1) or also its data from offset
 *              for length bytes (length 0: to the end) changed.
 * INVAL_ENTRY  name in parent was created, removed or renamed: drop the
 *              cached entry (positive or negative).
 * LOCK_WAKE    A lock on fh was released (see above).
 * RECALL       Return the delegations on fh, or on files made in directory
 *              fh (wire_deleg.h).
 */

/* The row of an opcode as flags, for code that asks about a property:
 * see pfs_op_flags() in codec.h. */
enum {
	PFS_OPF_DRC = 1u << 0,
	PFS_OPF_ONCE = 1u << 1,
	PFS_OPF_MODIFY = 1u << 2,
	PFS_OPF_BULK = 1u << 3,
	PFS_OPF_META = 1u << 4,
	PFS_OPF_ORDERED = 1u << 5,
	PFS_OPF_KNOWN = 1u << 6, /* the opcode is in PFS_OPS */
};

/* File attributes as the server's lstat() saw them. */
struct pfs_attr {
	uint64_t ino;
	uint64_t size;    /* bytes */
	uint64_t blocks;  /* 512-byte units */
	int64_t atime_s;
	int64_t mtime_s;
	int64_t ctime_s;
	uint32_t atime_ns; /* 0..999999999 */
	uint32_t mtime_ns;
	uint32_t ctime_ns;
	uint32_t mode;    /* type and permission bits, as st_mode */
	uint32_t nlink;
	uint32_t uid;
	uint32_t gid;
	uint32_t rdev;    /* Linux encoded dev_t, low 32 bits */
	uint32_t blksize;
};
#define PFS_ATTR_WIRE_SIZE (3 * 8 + 3 * 8 + 9 * 4)

/* SETATTR valid bits. */
enum {
	PFS_SET_MODE = 1u << 0,
	PFS_SET_UID = 1u << 1,
	PFS_SET_GID = 1u << 2,
	PFS_SET_SIZE = 1u << 3,
	PFS_SET_ATIME = 1u << 4,     /* atime_s/atime_ns */
	PFS_SET_MTIME = 1u << 5,     /* mtime_s/mtime_ns */
	PFS_SET_ATIME_NOW = 1u << 6,
	PFS_SET_MTIME_NOW = 1u << 7,
	PFS_SET_CTIME = 1u << 8,     /* only touches ctime (no-op on Linux) */
	/* The change was answered by the client under its delegation of fh
	 * (wire_deleg.h): refused with EIO if the server revoked
	 * that delegation. Ignored in a session without PFS_CAP_DELEG (a
	 * server restarted without delegations applies what is re-sent). */
	PFS_SET_DELEG = 1u << 9,
	PFS_SET_KNOWN = (1u << 10) - 1,
};

/* SETLK lock types (fcntl values) and flags. Ranges are [start, end],
 * end = UINT64_MAX means "to end of file". */
enum {
	PFS_LK_RD = 0, /* F_RDLCK */
	PFS_LK_WR = 1, /* F_WRLCK */
	PFS_LK_UN = 2, /* F_UNLCK */
	PFS_LKF_FLOCK = 1u << 0, /* BSD flock() semantics (whole file) */
	PFS_LKF_WAIT = 1u << 1,  /* SETLK: the caller waits for the lock (F_SETLKW,
				  * blocking flock): on EAGAIN the server sends it a
				  * LOCK_WAKE for this file when a lock on it is
				  * released. Ignored by RECLAIM. */
};

/* Locks and a coordinator restart (as NFSv4 does).
 *
 * The server keeps, in its state directory, the list of client ids that
 * hold locks. A server that starts with a non-empty list is in its grace
 * period (--grace seconds) while it waits for those clients:
 *
 * SETLK (except unlocking) and GETLK answer PFS_ST_GRACE during grace: the
 *   lock table is not complete yet. The client retries (also for a
 *   non-blocking lock: the wait is bounded by the grace period).
 * RECLAIM: lock_req of a lock the client held before the restart. Granted
 *   without waiting. Fails with ENOLCK outside grace or when the client was
 *   not on the list (its locks are lost), and with EAGAIN when it conflicts
 *   with a lock reclaimed by another client.
 * RECLAIM_DONE: the client has reclaimed everything (reclaim_done_req
 *   counts what it sent and what was refused, for the server's log). It
 *   sends it after every reconnect to a restarted server, with or without
 *   locks, before any new lock request. Grace ends early once every listed
 *   client has sent it; a listed client that does not come back within
 *   grace forfeits its locks.
 * A server whose list is empty or missing has no grace period.
 *
 * LOCK_WAKE (push, lock_wake_push): a lock on fh was released (unlock,
 *   close, client gone); sent to the sessions that got EAGAIN on a SETLK
 *   with PFS_LKF_WAIT for fh since the previous LOCK_WAKE for it. The
 *   client retries at once; it also retries slowly without one, since a
 *   push is lost when its connection drops. It does not wait for the
 *   client's replies in flight, but it never overtakes an invalidation
 *   that waits for them: it counts in PUSH_ACK like any push. */
#define PFS_ST_GRACE 85 /* ERESTART: "in grace, retry later" */

/* AUTH reply flags. */
enum {
	PFS_AUTH_RESUMED = 1u << 0,    /* the session (open files) was kept */
	PFS_AUTH_LOCKS_LOST = 1u << 1, /* resumed, but its locks were released
					* after --lock-lease without a connection */
};

/* Opcodes 40-49 belong to caching (interest, revalidation, inline data),
 * 50-59 to the bulk data path (durability, commit, lock reclaim: the lock
 * reclaim takes the top of the range, RECLAIM 58 and RECLAIM_DONE 59, see
 * above); 100 and up are pushes.
 *
 * FORGET: the client no longer caches these objects; the server stops
 *   sending it invalidations for them. Payload: a packed list of fh.
 * REVALIDATE: after a reconnect, the client sends what it has cached as a
 *   packed list of struct pfs_reval_item; the reply lists, as packed
 *   struct pfs_reval_result, only the items that changed or are gone.
 * REVALIDATED: the client's revalidation after a reconnect is over: it has
 *   invalidated in its kernel every item the replies named (or
 *   everything), and its main connection did not drop since the
 *   revalidation began. items, changed: how many it sent and how many
 *   came back, for the server's log. After a restart, the server holds
 *   the reply to a change until every client of the instance before
 *   (other than the change's author) sent it, or for a bounded time
 *   (podfsd --revalidate-wait). A server without it answers ENOSYS.
 * LOOKUP_DATA: LOOKUP whose reply also carries the whole content of a
 *   regular file of at most max_inline bytes (PFS_INLINE_MAX at most) that
 *   the caller may read, so a cold open + read costs no extra round trip.
 *   PFS_LD_READABLE says the server opened the regular file for reading
 *   with the caller's credentials (as mapped by the server), whatever its
 *   size: a client whose attributes of the file are current may answer
 *   that caller's read-only open itself. */
#define PFS_INLINE_MAX (64u * 1024)
#define PFS_BATCH_MAX 4096 /* items in one FORGET or REVALIDATE */

enum {
	PFS_LD_DATA = 1u << 0,     /* lookup_data_rep.data is the whole file */
	PFS_LD_READABLE = 1u << 1, /* the caller may open it for reading */
	/* LISTDIR items only, in a session that negotiated
	 * PFS_CAP_LIST_XATTR: the object had no extended attribute of that
	 * name when the server listed its names, after it registered the
	 * session's interest in it (a change since is pushed as
	 * INVAL_INODE). A clear bit says nothing. */
	PFS_LD_NO_CAPS = 1u << 2,        /* security.capability */
	PFS_LD_NO_ACL_ACCESS = 1u << 3,  /* system.posix_acl_access */
	PFS_LD_NO_ACL_DEFAULT = 1u << 4, /* system.posix_acl_default */
	PFS_LD_NO_SELINUX = 1u << 5,     /* security.selinux */
	PFS_LD_NO_XATTRS = PFS_LD_NO_CAPS | PFS_LD_NO_ACL_ACCESS | PFS_LD_NO_ACL_DEFAULT |
			   PFS_LD_NO_SELINUX,
};

/* Opcodes 60-64 belong to request economy: fewer round trips per operation.
 *
 * PUSH_ACK (client -> server, one-way: flags PFS_FF_PUSH, id 0, no reply,
 *   never coded; only in a session that negotiated PFS_CAP_PUSH_ACK). Payload
 *   push_ack: `count`, the number of pushes received on this connection
 *   (counting from 1 at the connection's first push; the server pushes
 *   nothing before its AUTH reply, and a client drops, uncounted, any
 *   push it reads before that reply; a count that does
 *   not grow is ignored: podfs repeats its last count while it holds a
 *   push back, which tells the server it runs). Received means the
 *   client will not answer from its own caches anything such a push
 *   contradicts; its kernel may drop what it cached a moment later
 *   (acknowledging only once that is done
 *   could deadlock: applying an entry invalidation takes the directory's
 *   lock, which the client's own operation in that directory may hold
 *   while its reply waits for this very acknowledgement).
 *   The server holds the reply to a request that changed an object until
 *   every other client it pushed the change to (that negotiated the
 *   capability) acknowledged that push, each within a deadline of its own
 *   (podfsd: at least --ack-timeout, more for a client that acknowledged
 *   slowly lately, at most 2 s). A client that sent nothing by then is
 *   stalled: the server stops waiting for it until it has acknowledged
 *   every push sent to it by then, and keeps its connection, the pushes
 *   queued in order; a client that sends frames but no acknowledgement
 *   for 2 s has its connection closed, so it revalidates its caches
 *   before trusting them again. Hence once a change's reply (a WRITE, the
 *   commit of a close, a SETATTR...) reached its client, every other
 *   running client knows what the change made stale, and may answer a
 *   later open (close-to-open) from what it caches, without asking the
 *   server, unless such a push came (it then asks). A client must handle
 *   every frame its socket holds before it answers from its caches: a
 *   stalled client's pushes are there when it runs again. */

/* WRITE's flags beside the fid's open flags (which never use the top
 * bit): write at offset, even through an O_APPEND fid (PFS_CAP_APPEND_AT). */
#define PFS_WR_AT 0x80000000u

/* Listings (opcodes 61-63: LISTDIR, LISTDIR_PAGE, LISTDIRS): wire_list.h. */
#include "podfs/wire_list.h"

enum {
	PFS_MK_EMPTY = 1u << 0, /* mkdir_rep: see PFS_CAP_NEW_DIR */
	PFS_CR_DELEG = 1u << 1, /* CREATE's mkdir_rep: see wire_deleg.h */
	PFS_MK_DELEG = 1u << 2, /* MKDIR's mkdir_rep: the new directory's delegation, wire_deleg.h */
	/* mkdir_rep of CREATE and MKDIR: see PFS_CAP_NEW_XATTRS. */
	PFS_MK_NO_CAPS = 1u << 3,        /* security.capability */
	PFS_MK_NO_ACL_ACCESS = 1u << 4,  /* system.posix_acl_access */
	PFS_MK_NO_ACL_DEFAULT = 1u << 5, /* system.posix_acl_default */
	PFS_MK_NO_SELINUX = 1u << 6,     /* security.selinux */
	PFS_RN_DELEG = 1u << 30, /* RENAME's flags: answered under a directory delegation */
	PFS_RR_DIR = 1u << 0,    /* rename_rep: dir is set (see PFS_CAP_RENAME_ATTR) */
	PFS_RR_VICTIM = 1u << 1, /* rename_rep: victim is the replaced object's handle */
	PFS_RR_NONE = 1u << 2,   /* rename_rep: the rename replaced nothing */
	PFS_UL_DIR_ATTR = 1u << 0, /* unlinks_rep: dir is set */
	PFS_UR_DIR = 1u << 0,      /* unlink_rep: dir is set (PFS_CAP_UNLINK_VICTIM) */
	PFS_UR_VICTIM = 1u << 1,   /* unlink_rep: victim is the removed object's handle */
	PFS_CI_CLOSE = 1u << 0, /* a CREATES item's how: no open file is made */
	PFS_CI_SYNC = 1u << 1,  /* a CREATES item's how: its data synced */
	PFS_CI_ATTRS = 1u << 2, /* a CREATES item's how: a change of attributes follows */
};
#define PFS_UNLINKS_MAX 64 /* names in one UNLINKS */
#define PFS_CREATES_MAX 64 /* items in one CREATES */
#define PFS_SLOTS_MAX 64   /* slots asked for in one SLOTS */
#define PFS_SLOTS_PER_SESSION 256 /* slots a session holds at most */

/* Delegations (PFS_CAP_DELEG; DELEG_DIR, DELEG_RETURN, SLOTS, CREATES,
 * UNLINKS, RECALL): wire_deleg.h. */
#include "podfs/wire_deleg.h"

/* Peer-assisted reads (CHUNK, CHUNK_REPORT; PEER_* between clients):
 * wire_peer.h. */
#include "podfs/wire_peer.h"

/* READDIR entry flags. */
enum {
	PFS_DE_HAS_ENTRY = 1u << 0, /* fh + attr follow (readdirplus) */
};

#endif /* PODFS_WIRE_H */
