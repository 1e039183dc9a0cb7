/* status_i.h: `podfsd status`, the command that reads a running
 * podfsd's control socket (observe_i.h) and shows it. */
#ifndef PODFSD_STATUS_I_H
#define PODFSD_STATUS_I_H

/* argv[0] is "status". Returns the exit status: 0, 1 (no daemon to ask,
 * refused), 2 (bad usage). */
int status_main(int argc, char **argv);

#endif /* PODFSD_STATUS_I_H */
