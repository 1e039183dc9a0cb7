/* idtab.c: the key of podfsd's id tables (see idtab_i.h). */
#include <errno.h>

#include "podfs/auth.h"
#include "idtab_i.h"

uint64_t idtab_key[2];

int idtab_seed(void)
{
	return pfs_random(idtab_key, sizeof(idtab_key));
}
