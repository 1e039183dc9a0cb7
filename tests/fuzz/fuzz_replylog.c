/* fuzz_replylog.c: a slot of podfsd's STATE_DIR/replies as the next
 * instance reads it (daemon/replylog.c, replylog_unpack), whatever the
 * file holds.
 *
 * The input is the slot (cut or padded with zeros to REPLYLOG_SLOT
 * bytes); the boot it is read for is the one its verf field names, so
 * that a well-formed record is taken. Properties: unpacking never
 * crashes nor reads past the slot; a record taken has a payload that fits
 * its slot and a raw size within PFS_MAX_PAYLOAD, and packing it again
 * gives the same bytes (replylog_pack_append for an append's records,
 * replylog_pack_begun for a change begun);
 * for any other boot it is not taken. The seeds (corpus/replylog) are
 * four replies' records laid out as replylog_pack lays them (a mkdir's
 * reply, an error reply, an LZ4-coded one, one that fills its slot), an
 * append's record as replylog_pack_append lays it, a rename begun as
 * replylog_pack_begun lays it, an exchange begun with the handle of what
 * was at its old name, and one that is not a record.
 */
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "podfs/le.h"
#include "replylog_i.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static uint8_t slot[REPLYLOG_SLOT], again[REPLYLOG_SLOT];
	uint64_t seq = 0, other;

	memset(slot, 0, sizeof slot);
	memcpy(slot, data, size < sizeof slot ? size : sizeof slot);
	uint64_t verf = pfs_load_le64(slot + 16);
	struct replylog_rec *p = replylog_unpack(slot, verf, &seq);
	if (!p)
		return 0;
	FUZZ_ASSERT(p->len <= REPLYLOG_MAX_WIRE && p->raw <= PFS_MAX_PAYLOAD);
	FUZZ_ASSERT(p->seq == seq);
	size_t n;
	if (p->kind == REPLYLOG_BEGUN) {
		FUZZ_ASSERT(p->raw == 0 && replylog_begins(p->op));
		FUZZ_ASSERT(p->len == 0 ? p->fh.len == 0
					: p->op == PFS_OP_RENAME && p->fh.len >= 1 &&
						  p->fh.len <= PFS_FH_MAX && p->len == 1 + (size_t)p->fh.len);
		n = replylog_pack_begun(again, verf, seq, p->client_id, p->id, p->op, &p->fh);
	} else if (p->kind != REPLYLOG_REPLY) {
		FUZZ_ASSERT(p->kind == REPLYLOG_APPEND || p->kind == REPLYLOG_DROPPED);
		FUZZ_ASSERT(p->op == PFS_OP_WRITE && p->raw == 0 && !p->landed);
		FUZZ_ASSERT(p->fh.len >= 1 && p->fh.len <= PFS_FH_MAX);
		FUZZ_ASSERT(p->len == REPLYLOG_APPEND_FIXED + p->fh.len);
		n = replylog_pack_append(again, p->kind, verf, seq, p->client_id, p->id, &p->fh,
					 p->at, p->dlen, p->dcrc);
	} else {
		FUZZ_ASSERT(p->kind == REPLYLOG_REPLY);
		n = replylog_pack(again, verf, seq, p->client_id, p->id, p->op, p->hdr, p->wire,
				  p->len, p->raw);
	}
	FUZZ_ASSERT(n == REPLYLOG_FIXED + PFS_FRAME_HDR_SIZE + p->len);
	FUZZ_ASSERT(memcmp(again, slot, n) == 0);
	free(p);
	other = verf + 1;
	FUZZ_ASSERT(replylog_unpack(slot, other, &seq) == NULL);
	return 0;
}
