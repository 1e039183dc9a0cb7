/* slots.c: a session's slots (see slots_i.h). */
#include "slots_i.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

#include "deleg_i.h"
#include "session_i.h"

/* Takes the slots of dir (0: all) that keep (t: deleg_holds) does not
 * keep off s's list and returns them chained. s->mu held. */
static struct slot *unlink_some(struct session *s, uint64_t dir, struct deleg *t)
{
	struct slot *gone = NULL;

	for (struct slot **pp = &s->slots; *pp;) {
		struct slot *sl = *pp;
		bool drop = t ? !deleg_holds(t, s->client_id, sl->dir) : (!dir || sl->dir == dir);
		if (!drop) {
			pp = &sl->next;
			continue;
		}
		*pp = sl->next;
		s->nslots--;
		sl->next = gone;
		gone = sl;
	}
	return gone;
}

static void free_chain(struct session *s, struct slot *gone)
{
	while (gone) {
		struct slot *sl = gone;
		gone = sl->next;
		close(sl->fd);
		session_fid_unreserve(s);
		free(sl);
	}
}

unsigned slots_room(struct session *s, struct deleg *t, unsigned want)
{
	pthread_mutex_lock(&s->mu);
	struct slot *gone = s->nslots + want > PFS_SLOTS_PER_SESSION ? unlink_some(s, 0, t) : NULL;
	unsigned room = PFS_SLOTS_PER_SESSION - s->nslots;
	pthread_mutex_unlock(&s->mu);
	free_chain(s, gone);
	return want < room ? want : room;
}

bool slots_add(struct session *s, int fd, const struct pfs_fh *fh, uint64_t dir, uint32_t uid)
{
	struct slot *sl = malloc(sizeof(*sl));

	if (!sl)
		return false;
	sl->fh = *fh;
	sl->dir = dir;
	sl->uid = uid;
	sl->fd = fd;
	pthread_mutex_lock(&s->mu);
	sl->next = s->slots;
	s->slots = sl;
	s->nslots++;
	pthread_mutex_unlock(&s->mu);
	return true;
}

int slots_take(struct session *s, const struct pfs_fh *fh, uint64_t dir, uint32_t uid)
{
	int ret = -ESTALE;

	pthread_mutex_lock(&s->mu);
	for (struct slot **pp = &s->slots; *pp; pp = &(*pp)->next) {
		struct slot *sl = *pp;
		if (sl->dir != dir || !pfs_fh_equal(&sl->fh, fh))
			continue;
		if (sl->uid != uid) {
			ret = -EPERM;
			break;
		}
		*pp = sl->next;
		s->nslots--;
		ret = sl->fd;
		free(sl);
		break;
	}
	pthread_mutex_unlock(&s->mu);
	return ret;
}

void slots_drop(struct session *s, uint64_t dir)
{
	pthread_mutex_lock(&s->mu);
	struct slot *gone = s->nslots ? unlink_some(s, dir, NULL) : NULL;
	pthread_mutex_unlock(&s->mu);
	free_chain(s, gone);
}
