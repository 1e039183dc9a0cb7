/* cmdline_i.h: podfsd's command line (cmdline.c). */
#ifndef PODFSD_CMDLINE_I_H
#define PODFSD_CMDLINE_I_H

#include "pfsd_i.h"

/* Fills o from the command line (its defaults first). --help and
 * --version print and exit 0; --genkey FILE needs no export; a bad option
 * prints one line and exits 2 (usage_error). */
void parse_args(struct pfsd_opts *o, int argc, char **argv);

/* "podfsd: WHAT (try --help)" on stderr, exit 2. */
__attribute__((format(printf, 1, 2), noreturn)) void usage_error(const char *fmt, ...);

#endif
