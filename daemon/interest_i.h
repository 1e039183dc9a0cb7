/* interest_i.h: which sessions cache which objects ("callbacks", as in AFS).
 *
 * The table maps an object key (handles_key(): a seeded 64-bit hash of the
 * kernel handle inside a wire handle, MAC excluded, so fanotify events map
 * to the same key) to the set of session slots that were handed the object
 * and have not FORGOTten it. podfsd pushes an invalidation for an object
 * only to the sessions in its set.
 *
 * Layout, for 256 clients x ~50k objects: the table is split into
 * INTEREST_STRIPES stripes (top bits of the key), each a struct htab under
 * its own mutex, so worker threads registering interest rarely contend.
 * An object is one allocation: hnode (16 bytes, hash = key) + a bitmap of
 * session slots just wide enough for the highest slot set (8 bytes per 64
 * slots). Slots are allocated lowest-free first (from 1: 0 is
 * INTEREST_SLOTLESS), so a pod of N clients uses ceil((N + 1) / 64)
 * words. With 256 clients sharing 50k objects (a shared venv): 50k x
 * (16 + 8 + 40 + ~16 malloc + 8 bucket) = ~4.4 MB, i.e. ~17 KB per
 * client, of which the interest bits proper are 6.25 KB (one bit per
 * client and object).
 *
 * Key collisions (2^-64 per pair) can only merge two objects' sets: extra
 * pushes, or a FORGET of one dropping interest in the other for that one
 * session.
 *
 * Threads: every function may be called from any thread.
 */
#ifndef PODFSD_INTEREST_I_H
#define PODFSD_INTEREST_I_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define INTEREST_SLOTS 1024 /* slot numbers; one is INTEREST_SLOTLESS */
#define INTEREST_WORDS (INTEREST_SLOTS / 64)
/* The slot that every session without one of its own shares: what any
 * of them was handed. They get the pushes about those objects, and only
 * about those: never about an object nobody was handed, which may be
 * outside the export (fanotify watches the whole filesystem). Never
 * allocated; cleared by the sweep after interest_slotless_release. */
#define INTEREST_SLOTLESS 0
#define INTEREST_STRIPES 64

struct interest;

/* An empty table with every slot free. Never fails. */
struct interest *interest_new(void);
/* Frees the table and every object in it (no other thread uses it any
 * more). Safe on NULL. */
void interest_free(struct interest *it);

/* Returns a free slot (lowest first, never INTEREST_SLOTLESS), or -1
 * when all are taken (that session then shares INTEREST_SLOTLESS:
 * correct, only more pushes; a clearing of it asked for before, by
 * interest_slotless_release, is called off, also one under way for the
 * stripes it has not reached). */
int interest_slot_alloc(struct interest *it);
/* The session of slot is gone: interest_sweep clears it from every
 * object and only then makes it free again (until then no new session
 * gets it, so none loses a push to the clearing). Cheap: podfsd's loop
 * calls it as each session ends. */
void interest_slot_release(struct interest *it, int slot);
/* Clears every slot released since the last sweep from every object
 * (freeing objects left with no slot) in one walk of the whole table,
 * and makes them free. Returns how many objects left the table. podfsd
 * runs it on the thread pool once a tick (sweep.c), so that sessions
 * ending by the hundred cost one walk, not one each on the loop thread. */
size_t interest_sweep(struct interest *it);
/* interest_slot_release, then interest_sweep. */
size_t interest_slot_free(struct interest *it, int slot);
/* The last session without a slot ended: the next interest_sweep clears
 * INTEREST_SLOTLESS from every object too, unless another such session
 * begins first (interest_slot_alloc). Cheap, as interest_slot_release:
 * the walk was on the loop thread, which a key holder holding every
 * slot could make happen at will. */
void interest_slotless_release(struct interest *it);

/* Adds slot to key's set; slot < 0 (a session without a slot) adds
 * INTEREST_SLOTLESS. */
void interest_add(struct interest *it, uint64_t key, int slot);
/* Removes slot from key's set (the object goes when its set is empty);
 * slot < 0 is a no-op (another session may share INTEREST_SLOTLESS).
 * Returns true if the object went (no session is interested any more). */
bool interest_del(struct interest *it, uint64_t key, int slot);
/* Copies key's set into bits (INTEREST_WORDS words, zero-filled past the
 * object's width). Returns false when no session is interested. */
bool interest_get(struct interest *it, uint64_t key, uint64_t bits[INTEREST_WORDS]);

/* Keys a request handed out (filled by its worker, read on the loop). */
struct keyvec {
	uint64_t *v; /* malloc'd, freed by the owner of the request */
	size_t n, cap;
};
/* interest_add(it, key, slot), and key appended to kv (if kv != NULL;
 * kv belongs to the calling thread). */
void interest_note(struct interest *it, uint64_t key, int slot, struct keyvec *kv);

/* Calls fn(key, arg) for every object (each stripe locked in turn; fn must
 * not call back into the table). For the "lost events" fallback. */
void interest_foreach(struct interest *it, void (*fn)(uint64_t key, void *arg), void *arg);

/* Objects in the table and bytes they use, buckets included (for logs
 * and tests). */
void interest_stats(struct interest *it, size_t *objects, size_t *bytes);

#endif /* PODFSD_INTEREST_I_H */
