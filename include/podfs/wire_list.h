/* wire_list.h: the part of the wire protocol (wire.h) that lists whole
 * directories: LISTDIR, LISTDIR_PAGE and LISTDIRS (opcodes 61-63, rows of
 * wire.h's PFS_OPS, their requests in codec.h), and the cookies their
 * items carry. Included by wire.h. How podfs uses listings:
 * docs/listings.md. */
#ifndef PODFS_WIRE_LIST_H
#define PODFS_WIRE_LIST_H

/* LISTDIR: a whole directory in one round trip, for a client that will
 *   answer lookups in it from the listing (cold start: a name not in a
 *   complete listing the client holds coherently does not exist).
 *   Request listdir_req: the directory, max_inline (as LOOKUP_DATA) and
 *   max_bytes (<= PFS_MAX_IO), the reply's size limit. Reply: u32 flags
 *   (PFS_LS_COMPLETE: every name of the directory is listed; otherwise
 *   the listing is a prefix the client must not use for absences), then
 *   items to the end of the payload: name, entry, u32 flags (PFS_LD_DATA:
 *   data is the whole content, read with the caller's credentials, and
 *   PFS_LD_READABLE, as in LOOKUP_DATA; with PFS_CAP_LIST_XATTR, the
 *   PFS_LD_NO_* bits of the extended attributes the object lacks), bytes
 *   data; with PFS_CAP_LIST_COOKIES (below), a cookie in the
 *   header and in each item. "." and ".." are not listed. Inline data
 *   takes at most PFS_LISTDIR_DATA_MAX bytes of a reply, and less where
 *   the items need the room (the server keeps a listing complete rather
 *   than fill it with data); which files come with data is the server's
 *   choice (podfsd: in directory order, skipping what an import does not
 *   read: -O bytecode, and .py sources beside a __pycache__; docs/listings.md),
 *   the others come without. The session caches every listed entry
 *   (pushes follow), and the directory. */
#define PFS_LISTDIR_DATA_MAX (960u * 1024)
#define PFS_LISTDIR_ITEMS_MAX 4096

/* LISTDIRS: the listings of several directories in one round trip, and
 *   of their subdirectories, for a client fetching ahead the directories
 *   a walk is about to read (docs/listings.md). Request listdirs_req: the
 *   credentials; max_bytes (<= PFS_MAX_IO), the reply's size limit;
 *   max_dirs (<= PFS_LISTDIRS_ITEMS_MAX), the listings it may hold; and a
 *   packed list of 1 to PFS_LISTDIRS_MAX directory handles. The server
 *   lists depth first, as a walk reads them: the first directory, then
 *   each of its subdirectories (in its listing's order) with theirs, then
 *   the second one..., while max_dirs and the room last. Reply: one item
 *   per directory listed, in that order, to the end of the payload: the
 *   directory's entry (handle and attributes), u32 status (0, or the
 *   positive errno LISTDIR would have answered: ESTALE, ENOTDIR,
 *   EACCES...), bytes listing (empty unless status is 0: exactly
 *   LISTDIR's reply for it with max_inline 0, PFS_LD_NO_* bits included
 *   with PFS_CAP_LIST_XATTR). The first requested directory is always
 *   answered (its listing incomplete if it does not fit); the others,
 *   and subdirectories, only if they fit whole: the client asks again
 *   for requested ones the reply lacks. A subdirectory the server cannot
 *   reach without opening it by handle anew is left out. The session
 *   caches every listed directory and entry, as with LISTDIR. A server
 *   without it answers ENOSYS: the client then sends LISTDIR. */
#define PFS_LISTDIRS_MAX 64        /* handles in a request */
#define PFS_LISTDIRS_ITEMS_MAX 256 /* listings in a reply */
enum {
	PFS_LS_COMPLETE = 1u << 0,
	PFS_LS_MORE = 1u << 1, /* listing_page: the listing goes on at cookie */
};

/* LISTDIR_PAGE: a directory too large for one LISTDIR reply, in pages.
 *   Request listdir_page_req: as listdir_req, and cookie: where the page
 *   starts (0: at the beginning; else the cookie of the page before).
 *   Reply listing_page: u32 flags, u64 cookie, (with
 *   PFS_CAP_LIST_COOKIES: the two dot cookies, below), then items as in
 *   a listing, to the end of the payload. PFS_LS_COMPLETE: every name from
 *   the page's start to the end of the directory is listed (the last
 *   page). PFS_LS_MORE: every name from its start up to where it stopped
 *   (PFS_LISTDIR_ITEMS_MAX items, or max_bytes, at least 4 KiB) is
 *   listed, and the next page starts at cookie (a position in the
 *   directory stream, as telldir gives it: podfsd exports filesystems
 *   whose positions stay valid across opens, as NFS does). Neither: a
 *   name that cannot be carried or looked up stopped it, and the pages
 *   do not make a complete listing. Pages are listed, registered and
 *   read as LISTDIR's items are, each when it is asked for: a client
 *   assembles them into one listing only if no push about the directory
 *   came since it asked for the first (any name created, removed or
 *   renamed there since is pushed, so pages taken at different times
 *   still list each name exactly once). An item that would not fit with
 *   its content comes without it. */
#define PFS_LISTDIR_PAGE_MIN 4096

/* Cookies (PFS_CAP_LIST_COOKIES). In a session that negotiated it, a
 * listing's header (a LISTDIR reply, a listing of LISTDIRS, a
 * LISTDIR_PAGE reply after its u64 cookie) goes on with u64 dots[4], and
 * each item has a u64 cookie after its u32 flags:
 *
 *   item: name, entry, u32 flags, u64 cookie, bytes data
 *
 * An item's cookie is its READDIR next_off: the position in the
 * directory stream just after it (getdents' d_off), where a READDIR of
 * the directory goes on. "." and ".." are not items, and not always the
 * first entries of the stream (ext4 gives a one-block directory in hash
 * order, dots included): dots[0] is the cookie of the entry before "."
 * (0 if it is the first), dots[1] its own; dots[2] and dots[3] the same
 * for "..". Both of a pair are 0 if the listing (a page) did not read
 * that dot. So a client can answer readdir from a complete listing, the
 * dots and the items in the server's order, with the cookies READDIR
 * itself gives; and a reading that goes on at one of them later (in
 * another open, after the listing went stale) goes on at the server
 * where it left off, each name still given once. Without the
 * capability, a listing has neither, and a client that answers readdir
 * from it must keep its own cookies from ever reaching READDIR. */
#define PFS_LS_DOTS_SIZE 32 /* dots[4] */
/* The bytes of a LISTDIR reply's header (a listing of LISTDIRS too):
 * its flags, and the dots with PFS_CAP_LIST_COOKIES. */
#define PFS_LS_HDR_SIZE(cookies) (4 + ((cookies) ? PFS_LS_DOTS_SIZE : 0))

#endif /* PODFS_WIRE_LIST_H */
