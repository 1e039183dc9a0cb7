/* fuzz_handlers.c: podfsd's request handlers on a scratch export.
 *
 * Each input is a short sequence of requests of one session, run one
 * after the other by the worker code of podfsd (dispatch_work_cb: decode,
 * resolve handles, become the caller, the handler, export*.c, root
 * again) on a scratch export created at start:
 *
 *   /tmp/podfs-fuzz-XXXXXX/         (a tmpfs, nodev, in a private mount
 *       export/                      namespace when run as root)
 *           a  d/  d/f  priv/  up -> ../sentinel  abs -> <top>/sentinel
 *       sentinel                     beside the export: never touched
 *       state/                       handle key, lock holders, replies
 *
 * The export is emptied and populated again before each input, and the
 * session is new, so an input means the same every time (replay corpus).
 *
 * A record: u8 opcode (an index into the opcodes below), u8 flags
 * (bit 0: the payload is LZ4-coded, bit 1: zero-word coded, bit 2:
 * PFS_CAP_DIR_ATTR, bit 3: PFS_CAP_NEW_DIR, PFS_CAP_NEW_XATTRS,
 * PFS_CAP_RENAME_ATTR and PFS_CAP_UNLINK_VICTIM, bit 4: PFS_CAP_POST_ATTR
 * and PFS_CAP_APPEND_AT,
 * bit 5: PFS_CAP_LIST_XATTR and PFS_CAP_LIST_COOKIES, bit 6: PFS_CAP_DELEG, bit 7: sent by a
 * second session, whose requests naming what the first one holds
 * delegations on are held back for a recall), u16 payload length (LE),
 * for a coded payload u32 raw length (LE), then the payload. In an
 * uncoded payload the two bytes 01 Fk stand for the k-th known handle
 * (the export root, a, d, d/f, priv, up, abs, then the handles the
 * requests of this input got back) and are replaced by it. A READ of an
 * odd record number runs first as podfsd's loop thread tries it (nowait:
 * workers.c, workers_try_on_loop), then, where that would have waited, again.
 *
 * Run as root, the handlers have the effective capabilities podfsd keeps
 * (caps_i.h) and switch to each request's uid as podfsd does.
 *
 * The session negotiated PFS_CAP_PEER, and the daemon reads files of
 * any size in chunks (a chunk table made afresh for every input); it
 * grants delegations (a table made afresh for every input).
 *
 * Properties: no sanitizer report; the sentinel and the directory that
 * holds the export never change; every handle a reply hands out names
 * an object inside the export; the thread is root again after each
 * request; once the sessions ended and the handle cache was emptied,
 * the process holds the descriptors it held before the input (pipes
 * aside: the pool counts those it handed out, and none is out).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <mntent.h>
#include <sched.h>
#include <string.h>
#include <sys/fsuid.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "podfs/codec.h"
#include "podfs/log.h"
#include "caps_i.h"
#include "chunks_i.h"
#include "deleg_i.h"
#include "conn_i.h"
#include "dispatch_i.h"
#include "export_i.h"
#include "handles_i.h"
#include "lockstate_i.h"
#include "revalhold_i.h"
#include "pfsd_i.h"
#include "req_i.h"
#include "session_i.h"
#include "fuzz.h"

#define MAX_RECORDS 16
#define MAX_SLOTS 16
#define SENTINEL_TEXT "not to be touched\n"

static const uint16_t ops[] = {
#define OPS_ROW(n, v, ...) PFS_OP_##n,
	PFS_OPS(OPS_ROW)
#undef OPS_ROW
};
#define NOPS (sizeof(ops) / sizeof(ops[0]))

static struct pfsd *d;
/* Peer-assisted reads for files of any size (the export's are small),
 * in chunks of the smallest size. */
static const struct chunks_conf chunk_conf = {
	.shift = PFS_CHUNK_SHIFT_MIN, .min_size = 1, .max_bytes = 1u << 20, .fanout = 2,
	.fetch_ms = 1000, .per_peer = 8,
};
static struct conn *fc;
static char top[64], exp_dir[96], state_dir[96], sentinel[96];
static struct stat top_st, sent_st;
static int export_fd = -1;
static uint8_t hkey[PFSD_HKEY_LEN];
static int fds_between; /* open fds before an input (and after it) */
static struct pfs_fh slots[MAX_SLOTS];
static unsigned nslots;
static uint64_t next_client = 1;

static int rm_cb(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
	if (ftw->level == 0)
		return 0;
	if (remove(path) < 0 && errno != ENOENT) {
		fprintf(stderr, "fuzz_handlers: remove %s: %s\n", path, strerror(errno));
		abort();
	}
	return 0;
}

static void wipe(const char *dir)
{
	nftw(dir, rm_cb, 16, FTW_DEPTH | FTW_PHYS | FTW_MOUNT);
}

static void write_text(const char *path, const char *text, mode_t mode)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);

	FUZZ_ASSERT(fd >= 0);
	FUZZ_ASSERT(write(fd, text, strlen(text)) == (ssize_t)strlen(text));
	close(fd);
}

static void add_slot(const char *name)
{
	struct pfs_fh fh;

	FUZZ_ASSERT(handles_encode_at(d->hs, export_fd, name, &fh) == 0);
	slots[nslots++] = fh;
}

/* The export as every input finds it. */
static void populate(void)
{
	char p[PATH_MAX];

	wipe(exp_dir);
	chmod(exp_dir, 0755);
	FUZZ_ASSERT(chown(exp_dir, 0, 0) == 0);
	snprintf(p, sizeof p, "%s/a", exp_dir);
	write_text(p, "the quick brown fox jumps over the lazy dog\n", 0644);
	FUZZ_ASSERT(chown(p, 1000, 1000) == 0);
	snprintf(p, sizeof p, "%s/d", exp_dir);
	FUZZ_ASSERT(mkdir(p, 0777) == 0);
	FUZZ_ASSERT(chown(p, 1000, 1000) == 0);
	snprintf(p, sizeof p, "%s/d/f", exp_dir);
	write_text(p, "in d\n", 0600);
	snprintf(p, sizeof p, "%s/priv", exp_dir);
	FUZZ_ASSERT(mkdir(p, 0700) == 0);
	snprintf(p, sizeof p, "%s/up", exp_dir);
	FUZZ_ASSERT(symlink("../sentinel", p) == 0);
	snprintf(p, sizeof p, "%s/abs", exp_dir);
	FUZZ_ASSERT(symlink(sentinel, p) == 0);
	nslots = 0;
	slots[nslots++] = *handles_root(d->hs);
	add_slot("a");
	add_slot("d");
	add_slot("d/f");
	add_slot("priv");
	add_slot("up");
	add_slot("abs");
}

/* Sets the calling thread's effective and permitted capabilities to
 * eff and perm, as far as it holds them. */
static void set_caps(uint64_t eff, uint64_t perm)
{
	struct __user_cap_header_struct h = { .version = _LINUX_CAPABILITY_VERSION_3, .pid = 0 };
	struct __user_cap_data_struct cd[2];
	uint64_t have;

	FUZZ_ASSERT(syscall(SYS_capget, &h, cd) == 0);
	have = cd[0].permitted | (uint64_t)cd[1].permitted << 32;
	eff &= have;
	perm &= have;
	cd[0] = (struct __user_cap_data_struct){ (uint32_t)eff, (uint32_t)perm, 0 };
	cd[1] = (struct __user_cap_data_struct){ (uint32_t)(eff >> 32), (uint32_t)(perm >> 32), 0 };
	FUZZ_ASSERT(syscall(SYS_capset, &h, cd) == 0);
}

static bool as_root;

static void cleanup(void)
{
	if (!top[0])
		return;
	if (as_root) /* back to CAP_SYS_ADMIN for the umount */
		set_caps(CAPS_KEEP | CAPS_BIT(CAP_SYS_ADMIN), CAPS_KEEP | CAPS_BIT(CAP_SYS_ADMIN));
	umount2(top, MNT_DETACH);
	wipe(top);
	rmdir(top);
}

/* Lets go of the namespace's copies of the FUSE mounts it was made with.
 * A copy keeps its file system alive after the mount itself is unmounted
 * in the namespace it was made in: the podfs (or other FUSE daemon)
 * serving it would not see the unmount, and would not end, until this
 * process did (a mount of a test running beside the fuzzer, a user's
 * /mnt/podfs). Lazily: a copy may be busy; nothing here uses them. */
static void detach_fuse_copies(void)
{
	char *dirs[256];
	size_t n = 0;
	FILE *f = setmntent("/proc/self/mounts", "r");
	struct mntent *m;

	if (!f)
		return;
	while (n < sizeof dirs / sizeof dirs[0] && (m = getmntent(f)))
		if (!strcmp(m->mnt_type, "fuse") || !strcmp(m->mnt_type, "fuseblk") ||
		    !strncmp(m->mnt_type, "fuse.", 5))
			dirs[n++] = xstrdup(m->mnt_dir);
	endmntent(f);
	/* Children after their parents: a child already gone with its
	 * parent's detach fails here, harmlessly. */
	size_t gone = 0;
	for (size_t i = 0; i < n; i++) {
		if (umount2(dirs[i], MNT_DETACH) == 0)
			gone++;
		free(dirs[i]);
	}
	if (n == sizeof dirs / sizeof dirs[0] && gone)
		detach_fuse_copies(); /* more than fitted */
}

static void setup(void)
{
	char err[256];
	bool ns = false;

	pfs_log_init("fuzz_handlers", PFS_LOG_ERR);
	umask(0);
	/* As root: a tmpfs without device nodes (a fuzzed MKNOD must not
	 * make a disk writable) in a mount namespace of our own, so that it
	 * goes away with the process however it ends. */
	if (geteuid() == 0 && unshare(CLONE_NEWNS) == 0 &&
	    mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) == 0) {
		ns = true;
		detach_fuse_copies();
	}
	snprintf(top, sizeof top, "/tmp/podfs-fuzz-XXXXXX");
	FUZZ_ASSERT(mkdtemp(top));
	if (ns && mount("podfs-fuzz", top, "tmpfs", MS_NODEV | MS_NOSUID, "size=64m,mode=0755") < 0)
		ns = false;
	if (!ns && geteuid() == 0) {
		fprintf(stderr, "fuzz_handlers: no private tmpfs: refusing to run as root\n");
		rmdir(top);
		exit(1);
	}
	atexit(cleanup);
	snprintf(exp_dir, sizeof exp_dir, "%s/export", top);
	snprintf(state_dir, sizeof state_dir, "%s/state", top);
	snprintf(sentinel, sizeof sentinel, "%s/sentinel", top);
	FUZZ_ASSERT(mkdir(exp_dir, 0755) == 0);
	write_text(sentinel, SENTINEL_TEXT, 0666);
	FUZZ_ASSERT(stat(sentinel, &sent_st) == 0);

	d = xcalloc(1, sizeof(*d));
	d->o.export_dir = exp_dir;
	d->o.state_dir = state_dir;
	d->o.lz4 = PFS_LZ4_NEVER;
	d->o.threads = 1;
	/* podfsd's limits for a small file descriptor table: without them a
	 * session may open no file (every fid answered EMFILE). */
	FUZZ_ASSERT(limits_defaults(&d->lim, 1024, (size_t)1 << 30, 256, 1, err, sizeof err) == 0);
	FUZZ_ASSERT(handles_load_key(state_dir, hkey, NULL, err, sizeof err) == 0);
	export_fd = open(exp_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	FUZZ_ASSERT(export_fd >= 0);
	if (handles_new(&d->hs, export_fd, hkey, 256, err, sizeof err) < 0) {
		fprintf(stderr, "fuzz_handlers: %s\n", err);
		exit(1);
	}
	d->atime_mode = (unsigned char)export_atime_mode(export_fd);
	FUZZ_ASSERT(lockstate_new(state_dir, 0, &d->ls, err, sizeof err) == 0);
	FUZZ_ASSERT(revalhold_new(state_dir, 0, &d->rh, err, sizeof err) == 0);
	/* The replies of changes are written as podfsd writes them. */
	FUZZ_ASSERT(replylog_open(&d->replies, state_dir, 1, err, sizeof err) == 0);
	FUZZ_ASSERT(uv_loop_init(&d->loop) == 0);
	sessions_init(d);
	LIST_INIT(&d->conns);
	pipes_init(&d->pipes);
	d->it = interest_new();
	d->chunks = chunks_new(&chunk_conf);
	d->deleg = deleg_new(DELEG_MAX, DELEG_PER_OWNER);
	fc = xcalloc(1, sizeof(*fc));
	fc->d = d;
	fc->id = 1;
	fc->st = CS_READY;
	/* Taken last: the state directory and the export are made. */
	FUZZ_ASSERT(stat(top, &top_st) == 0);
	/* The handlers run with the capabilities podfsd keeps (caps_i.h);
	 * CAP_SYS_ADMIN stays permitted for the umount at exit only. */
	as_root = ns;
	if (as_root)
		set_caps(CAPS_KEEP, CAPS_KEEP | CAPS_BIT(CAP_SYS_ADMIN));
}

static void check_outside(void)
{
	struct stat st;
	char buf[64];
	int fd;
	ssize_t n;

	FUZZ_ASSERT(stat(top, &st) == 0);
	FUZZ_ASSERT(st.st_mtim.tv_sec == top_st.st_mtim.tv_sec &&
		    st.st_mtim.tv_nsec == top_st.st_mtim.tv_nsec);
	FUZZ_ASSERT(st.st_mode == top_st.st_mode && st.st_uid == top_st.st_uid);
	FUZZ_ASSERT(stat(sentinel, &st) == 0);
	FUZZ_ASSERT(st.st_ino == sent_st.st_ino && st.st_nlink == 1);
	FUZZ_ASSERT(st.st_ctim.tv_sec == sent_st.st_ctim.tv_sec &&
		    st.st_ctim.tv_nsec == sent_st.st_ctim.tv_nsec);
	FUZZ_ASSERT(st.st_mtim.tv_sec == sent_st.st_mtim.tv_sec &&
		    st.st_mtim.tv_nsec == sent_st.st_mtim.tv_nsec);
	fd = open(sentinel, O_RDONLY | O_CLOEXEC);
	FUZZ_ASSERT(fd >= 0);
	n = read(fd, buf, sizeof buf);
	close(fd);
	FUZZ_ASSERT(n == (ssize_t)strlen(SENTINEL_TEXT) && memcmp(buf, SENTINEL_TEXT, (size_t)n) == 0);
	/* Root again, without the caller's groups. */
	FUZZ_ASSERT(setfsuid((uid_t)-1) == 0 && setfsgid((gid_t)-1) == 0);
	FUZZ_ASSERT(syscall(SYS_getgroups, 0, NULL) == 0);
}

/* Handle fh of a reply names something inside the export; it becomes a
 * known handle. */
static void check_handle(const struct pfs_fh *fh_)
{
	struct pfs_fh fh = *fh_;
	struct hent *e;
	char link[64], path[PATH_MAX];
	size_t el = strlen(exp_dir);
	ssize_t n;

	if (handles_get(d->hs, &fh, &e) < 0)
		return; /* gone already (a racing unlink cannot happen here, but ESTALE is fine) */
	snprintf(link, sizeof link, "/proc/self/fd/%d", e->fd);
	n = readlink(link, path, sizeof path - 1);
	handles_put(d->hs, e);
	FUZZ_ASSERT(n > 0);
	path[n] = '\0';
	if (!(strncmp(path, exp_dir, el) == 0 && (path[el] == '\0' || path[el] == '/'))) {
		fprintf(stderr, "fuzz_handlers: a reply handed out a handle of %s\n", path);
		abort();
	}
	if (nslots < MAX_SLOTS)
		slots[nslots++] = fh;
}

/* The handle at the start of an entry reply. */
static void check_entry(const uint8_t *p, size_t len)
{
	struct pfs_rd rd;
	struct pfs_fh fh;

	pfs_rd_init(&rd, p, len);
	FUZZ_ASSERT(pfs_dec_fh_item(&rd, &fh) == 1);
	check_handle(&fh);
}

/* Every directory of a LISTDIRS reply (wire.h), which is well formed. */
static void check_listdirs(const uint8_t *p, size_t len)
{
	struct pfs_rd rd;

	pfs_rd_init(&rd, p, len);
	while (rd.left > 0) {
		struct pfs_entry e;
		struct pfs_bytes b;
		uint32_t status;
		FUZZ_ASSERT(pfs_get_ENTRY(&rd, &e) && pfs_get_U32(&rd, &status) &&
			    pfs_get_BYTES(&rd, &b));
		FUZZ_ASSERT(status != 0 || b.len >= 4);
		check_handle(&e.fh);
	}
}

/* The payload with each 01 Fk replaced by known handle k. */
static uint8_t *substitute(const uint8_t *p, size_t len, size_t *out_len)
{
	uint8_t *out = xmalloc(len * (PFS_FH_MAX + 1) / 2 + 1);
	size_t o = 0;

	for (size_t i = 0; i < len; i++) {
		if (i + 1 < len && p[i] == 1 && (p[i + 1] & 0xf0) == 0xf0 &&
		    (p[i + 1] & 0x0f) < nslots) {
			const struct pfs_fh *fh = &slots[p[i + 1] & 0x0f];
			out[o++] = fh->len;
			memcpy(out + o, fh->data, fh->len);
			o += fh->len;
			i++;
			continue;
		}
		out[o++] = p[i];
	}
	*out_len = o;
	return out;
}

static bool has_entry_reply(uint16_t op)
{
	return op == PFS_OP_LOOKUP || op == PFS_OP_MKNOD || op == PFS_OP_MKDIR ||
	       op == PFS_OP_SYMLINK || op == PFS_OP_LINK || op == PFS_OP_CREATE ||
	       op == PFS_OP_LOOKUP_DATA || op == PFS_OP_AUTH;
}

static void run_one(struct session *s, uint64_t id, uint16_t op, uint8_t flags, uint32_t raw_len,
		    const uint8_t *p, size_t len)
{
	struct req r;
	size_t wl = len;
	uint8_t *in;

	memset(&r, 0, sizeof r);
	if (flags & 3) {
		in = payload_alloc(len); /* as the frame reader makes them */
		if (len)
			memcpy(in, p, len);
		r.h.flags = (flags & 1) ? PFS_FF_LZ4 : PFS_FF_ZR;
		r.h.raw_len = raw_len;
	} else {
		uint8_t *sub = substitute(p, len, &wl);
		in = payload_alloc(wl);
		if (wl)
			memcpy(in, sub, wl);
		free(sub);
		r.h.raw_len = (uint32_t)wl;
	}
	r.h.id = id;
	r.h.op = op;
	r.h.wire_len = (uint32_t)wl;
	if (op == PFS_OP_FORGET) {
		dispatch_forget(d, s, &r.h, in);
		payload_free(in);
		return;
	}
	if (op == PFS_OP_HELLO || op == PFS_OP_GOODBYE || op == PFS_OP_PUSH_ACK) {
		payload_free(in); /* answered on the loop, never by a worker */
		return;
	}
	r.c = fc;
	r.d = d;
	r.s = s;
	r.in = in;
	r.dir_attr = (flags & 4) != 0;
	r.new_dir = r.dir_attr && (flags & 8);
	r.new_xattrs = r.new_dir;
	r.rename_attr = r.new_dir;
	r.unlink_victim = r.new_dir;
	r.post_attr = (flags & 16) != 0;
	r.append_at = r.post_attr;
	r.list_xattr = (flags & 32) != 0;
	r.list_cookies = r.list_xattr;
	r.deleg = (flags & 64) != 0;
	if (r.deleg) /* granted only where ids reach the kernel as they are */
		r.rule.squash = EXPORT_SQUASH_NONE;
	r.work.data = &r;
	/* A READ of an odd record number is tried first as the loop thread
	 * tries it (workers_try_on_loop): answered at once, or left
	 * untouched for a worker. */
	if (op == PFS_OP_READ && (id & 1)) {
		r.nowait = true;
		dispatch_work_cb(&r.work);
		r.nowait = false;
		if (r.blocked) {
			FUZZ_ASSERT(r.in && r.reply.len == 0 && !r.splice_len && !r.invals);
			r.blocked = false;
			dispatch_work_cb(&r.work);
		}
	} else {
		dispatch_work_cb(&r.work);
	}
	FUZZ_ASSERT(!r.blocked);
	/* Held back for a recall: no reply; the holders give their
	 * delegations back as if they had acknowledged, and it runs again
	 * (server.c). Or held back to forewarn the other session of a
	 * change of rights (op_forewarn): as if it had acknowledged. Each
	 * at most once. */
	for (int held = 0; r.recall; held++) {
		if (getenv("PODFS_FUZZ_VERBOSE"))
			fprintf(stderr, "req %llu %s: held back for a %s\n", (unsigned long long)id,
				pfs_op_name(op), r.forewarn ? "change of rights" : "recall");
		FUZZ_ASSERT(held < 2 && r.reply.len == 0 && !r.invals && r.in);
		FUZZ_ASSERT(r.forewarn ? r.nrecall == 0 && !r.forewarned : r.nrecall > 0);
		for (size_t i = 0; i < r.nrecall; i++)
			deleg_recalled(d->deleg, r.recall_owners[i], r.recall_key, true);
		if (r.forewarn)
			r.forewarned = true;
		r.recall = r.forewarn = false;
		r.nrecall = 0;
		dispatch_work_cb(&r.work);
	}
	if (getenv("PODFS_FUZZ_VERBOSE"))
		fprintf(stderr, "req %llu %s: status %d%s, %zu reply bytes\n",
			(unsigned long long)id, pfs_op_name(op), r.status,
			r.violation ? " (violation)" : "", r.reply.len + r.splice_len);
	check_outside();
	if (!r.violation && r.status == 0 && !r.splice_len && has_entry_reply(op))
		check_entry(r.reply.wire, r.reply.len);
	if (!r.violation && r.status == 0 && op == PFS_OP_LISTDIRS)
		check_listdirs(r.reply.wire, r.reply.len);
	payload_free(r.in);
	free(r.reply.own[0]);
	free(r.reply.own[1]);
	if (r.splice_len)
		pipes_put(&d->pipes, r.pipe, false);
	while (r.invals) {
		struct inval *iv = r.invals;
		r.invals = iv->next;
		free(iv);
	}
	free(r.keys.v);
}

/* The open fds but pipes: libFuzzer's symbolizer keeps pipes open once
 * it names a new function; the daemon's own pipes are the pool's,
 * accounted for by d->pipes.out. */
static int count_fds(void)
{
	DIR *dir = opendir("/proc/self/fd");
	struct dirent *de;
	int n = 0;

	FUZZ_ASSERT(dir != NULL);
	while ((de = readdir(dir))) {
		char t[64];
		ssize_t k = readlinkat(dirfd(dir), de->d_name, t, sizeof(t) - 1);
		if (k < 0 || (t[k] = 0, strncmp(t, "pipe:", 5) != 0))
			n++;
	}
	closedir(dir);
	return n;
}

static uint32_t get_le(const uint8_t *p, size_t n)
{
	uint32_t v = 0;

	for (size_t i = 0; i < n; i++)
		v |= (uint32_t)p[i] << (8 * i);
	return v;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct session *s, *s2;
	unsigned count = 0;

	if (!d) {
		setup();
		fds_between = count_fds();
	}
	populate();
	s = session_new(d, next_client++, NULL);
	snprintf(s->host, sizeof s->host, "fuzzhost");
	s->caps = PFS_CAP_PEER; /* CHUNK and CHUNK_REPORT are answered */
	s2 = session_new(d, next_client++, NULL);
	snprintf(s2->host, sizeof s2->host, "fuzzhost2");
	while (size >= 4 && count < MAX_RECORDS) {
		uint16_t op = ops[data[0] % NOPS];
		uint8_t flags = data[1];
		size_t len = get_le(data + 2, 2);
		uint32_t raw_len = 0;

		data += 4;
		size -= 4;
		if (flags & 3) {
			if (size < 4)
				break;
			raw_len = get_le(data, 4);
			data += 4;
			size -= 4;
		}
		if (len > size)
			len = size;
		/* What the frame reader lets through (pfs_hdr_unpack). */
		if ((flags & 3) && (raw_len == 0 || raw_len > PFS_MAX_PAYLOAD || len == 0 ||
				    (!(flags & 1) && len > raw_len)))
			break;
		run_one((flags & 128) ? s2 : s, ++count, op, flags, raw_len, data, len);
		data += len;
		size -= len;
	}
	session_kill(s);
	session_kill(s2);
	uv_run(&d->loop, UV_RUN_NOWAIT);
	interest_sweep(d->it); /* their slots, as podfsd's next tick would */
	check_outside();
	/* A fresh chunk table for the next input: what it remembers of
	 * this one's files and session must not change the next one. */
	chunks_free(d->chunks);
	d->chunks = chunks_new(&chunk_conf);
	deleg_free(d->deleg);
	d->deleg = deleg_new(DELEG_MAX, DELEG_PER_OWNER);
	/* A fresh handle cache too (it closes the fds it held, the export's
	 * included): what is open now is what the process held before the
	 * input, or a request leaked a descriptor. */
	char err[256];
	handles_free(d->hs);
	export_fd = open(exp_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	FUZZ_ASSERT(export_fd >= 0);
	FUZZ_ASSERT(handles_new(&d->hs, export_fd, hkey, 256, err, sizeof err) == 0);
	FUZZ_ASSERT(count_fds() == fds_between && d->pipes.out == 0);
	return 0;
}
