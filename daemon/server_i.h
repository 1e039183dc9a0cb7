/* server_i.h: podfsd's server: the listener and its connections, the
 * path of a request (queued on the thread pool, its completion, its
 * reply held for acknowledgements and sent), and the orderly stop. The
 * handle cache's periodic sweep, which it starts and stops, is sweep.c's.
 *
 * Loop thread only.
 */
#ifndef PODFSD_SERVER_I_H
#define PODFSD_SERVER_I_H

#include <stddef.h>
#include <sys/socket.h>

struct pfsd;

/* Parses "ADDR:PORT" ("[v6]:PORT" for IPv6) into *out. Returns 0 or
 * -EINVAL. Any thread (no loop needed). */
int server_parse_addr(const char *s, struct sockaddr_storage *out);

/* Binds and listens on d->listen_addr and starts the timers (sweep,
 * held replies); logs "listening on ADDR:PORT" and sets *port_out to the
 * port (the one chosen, for port 0). Returns 0, or a negative libuv
 * error with a one-line reason in err. */
int server_listen(struct pfsd *d, char *err, size_t errlen, int *port_out);

struct exports;

/* Makes *rules (taken; emptied) d's export rules: each open connection
 * gets the options of the rule that now admits its peer, from its next
 * request on, and a connection no rule admits any more is closed.
 * Returns how many were closed. */
unsigned server_rules_replace(struct pfsd *d, struct exports *rules);

/* Stops serving (shutdown): closes the listener, the watcher and every
 * connection, sends the held replies, ends every session. The loop ends
 * once the last request finished. Idempotent. */
void server_stop(struct pfsd *d);

#endif /* PODFSD_SERVER_I_H */
