/* names.c: a set of names (see names_i.h). */
#include "names_i.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "podfs/htab.h"

struct name_ent {
	struct hnode hn; /* by name_hash */
	size_t len;
	char s[];
};

struct nameset {
	struct htab tab;
};

int nameset_add(struct nameset **nsp, const char *name, size_t len)
{
	uint64_t h = name_hash(name, len);
	struct nameset *ns = *nsp;

	if (!ns) {
		ns = malloc(sizeof(*ns));
		if (!ns)
			return -ENOMEM;
		htab_init(&ns->tab);
		*nsp = ns;
	}
	for (struct hnode *n = htab_first(&ns->tab, h); n; n = htab_next(n, h)) {
		struct name_ent *e = container_of(n, struct name_ent, hn);
		if (e->len == len && memcmp(e->s, name, len) == 0)
			return 0;
	}
	struct name_ent *e = malloc(sizeof(*e) + len + 1);
	if (!e)
		return -ENOMEM;
	e->len = len;
	memcpy(e->s, name, len);
	e->s[len] = '\0';
	htab_insert(&ns->tab, &e->hn, h);
	return 0;
}

void nameset_each_free(struct nameset *ns, void (*cb)(void *arg, const char *name, size_t len),
		       void *arg)
{
	if (!ns)
		return;
	for (struct hnode *n; (n = htab_pop(&ns->tab));) {
		struct name_ent *e = container_of(n, struct name_ent, hn);
		if (cb)
			cb(arg, e->s, e->len);
		free(e);
	}
	htab_fini(&ns->tab);
	free(ns);
}

void nameset_free(struct nameset *ns)
{
	nameset_each_free(ns, NULL, NULL);
}
