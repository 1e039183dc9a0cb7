/* hsecret.c: the export's record of its handle secret (see hsecret_i.h). */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/xattr.h>

#include "podfs/auth.h"
#include "podfs/le.h"
#include "podfs/log.h"
#include "hsecret_i.h"

uint64_t hsecret_id(const uint8_t secret[32])
{
	static const char label[] = HSECRET_ID_LABEL;
	uint8_t mac[PFS_MAC_LEN];

	pfs_hmac(secret, 32, label, sizeof(label) - 1, mac);
	return pfs_load_le64(mac);
}

void hsecret_format(uint64_t id, char out[HSECRET_HEX + 1])
{
	snprintf(out, HSECRET_HEX + 1, "%016" PRIx64, id);
}

int hsecret_parse(const char *s, size_t n, uint64_t *id)
{
	uint64_t v = 0;

	if (n != HSECRET_HEX)
		return -EINVAL;
	for (size_t i = 0; i < n; i++) {
		char c = s[i];
		unsigned d;
		if (c >= '0' && c <= '9')
			d = (unsigned)(c - '0');
		else if (c >= 'a' && c <= 'f')
			d = (unsigned)(c - 'a' + 10);
		else
			return -EINVAL;
		v = v << 4 | d;
	}
	*id = v;
	return 0;
}

enum hsecret_action hsecret_decide(enum hsecret_record rec, bool accept_new)
{
	switch (rec) {
	case HSR_NONE:
		return HSA_RECORD;
	case HSR_SAME:
		return HSA_SERVE;
	case HSR_OTHER:
		return accept_new ? HSA_REPLACE : HSA_REFUSE;
	case HSR_UNREADABLE:
	default:
		return HSA_UNCHECKED;
	}
}

/* Reads the record: its state, the id found (HSR_OTHER), the errno of an
 * unreadable one. */
static enum hsecret_record read_record(int fd, uint64_t id, uint64_t *found, bool *garbled,
				       int *err)
{
	char buf[64];
	ssize_t n = fgetxattr(fd, HSECRET_XATTR, buf, sizeof(buf));

	*garbled = false;
	if (n < 0 && (errno == ENODATA || errno == ERANGE)) {
		if (errno == ENODATA)
			return HSR_NONE;
		*garbled = true; /* longer than any record */
		return HSR_OTHER;
	}
	if (n < 0) {
		*err = errno;
		return HSR_UNREADABLE;
	}
	if (hsecret_parse(buf, (size_t)n, found) < 0) {
		*garbled = true;
		return HSR_OTHER;
	}
	return *found == id ? HSR_SAME : HSR_OTHER;
}

int hsecret_check(int export_fd, const uint8_t secret[32], const char *export_dir,
		  const char *state_dir, bool key_created, bool accept_new, char *msg,
		  size_t msglen)
{
	uint64_t id = hsecret_id(secret), found = 0;
	char hex[HSECRET_HEX + 1], old[HSECRET_HEX + 1];
	bool garbled;
	int rerr = 0;
	enum hsecret_record rec = read_record(export_fd, id, &found, &garbled, &rerr);
	enum hsecret_action act = hsecret_decide(rec, accept_new);

	hsecret_format(id, hex);
	hsecret_format(found, old);
	switch (act) {
	case HSA_SERVE:
		pfs_info("handle secret %s (recorded on the export)", hex);
		return 0;
	case HSA_UNCHECKED:
		pfs_warn("%s: cannot read its handle-secret record (%s: %s): if --state-dir "
			 "changes, clients' handles go stale unnoticed; keep %s",
			 export_dir, HSECRET_XATTR, strerror(rerr), state_dir);
		return 0;
	case HSA_REFUSE:
		snprintf(msg, msglen,
			 "%s was served under another handle secret (id %s) than the one in "
			 "%s/handle.key (id %s%s): every client's file handles would be stale. "
			 "Was --state-dir changed or its directory lost? Start podfsd with the "
			 "old --state-dir; or, if it is gone for good, start it with "
			 "--new-handle-secret (podfs clients then find their files again by "
			 "name)",
			 export_dir, garbled ? "unreadable" : old, state_dir, hex,
			 key_created ? ", created just now" : "");
		return -1;
	case HSA_RECORD:
	case HSA_REPLACE:
		break;
	}
	if (fsetxattr(export_fd, HSECRET_XATTR, hex, HSECRET_HEX, 0) < 0) {
		pfs_warn("%s: cannot record its handle secret (%s: %s): if --state-dir changes, "
			 "clients' handles go stale unnoticed; keep %s",
			 export_dir, HSECRET_XATTR, strerror(errno), state_dir);
		return 0;
	}
	if (act == HSA_REPLACE)
		pfs_warn("--new-handle-secret: %s is now served under handle secret %s (was %s): "
			 "handles clients got before are stale; podfs clients find their files "
			 "again by name when they reconnect",
			 export_dir, hex, garbled ? "unreadable" : old);
	else
		pfs_info("handle secret %s recorded on %s", hex, export_dir);
	return 0;
}
