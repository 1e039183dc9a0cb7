/* notify_i.h: the service manager's readiness protocol (systemd's
 * sd_notify(3), Type=notify), spoken directly: one datagram per message
 * on the AF_UNIX socket named by $NOTIFY_SOCKET (a path, or an abstract
 * name when it starts with '@'). No libsystemd.
 *
 * podfsd sends READY=1 (with STATUS= and MAINPID=) once it listens and
 * serves, RELOADING=1 with MONOTONIC_USEC= and then READY=1 around a
 * SIGHUP reload, and STOPPING=1 when it shuts down. Without
 * $NOTIFY_SOCKET every call does nothing. Called from the loop thread
 * only (the socket name is read once, by notify_init).
 */
#ifndef PODFSD_NOTIFY_I_H
#define PODFSD_NOTIFY_I_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/un.h>

/* Fills *sa and *len for the socket named name ($NOTIFY_SOCKET's value):
 * an absolute path, or '@' then an abstract name (the '@' becomes a NUL
 * byte). Returns 0, or -EINVAL for an empty, relative or too long name.
 * Pure. */
int notify_parse(const char *name, struct sockaddr_un *sa, socklen_t *len);

/* Reads $NOTIFY_SOCKET and unsets it (nothing podfsd starts should
 * inherit it). Returns 1 if podfsd runs under a notify-aware manager, 0
 * if not, -EINVAL (after which every send does nothing) if the variable
 * names no usable socket. */
int notify_init(void);

/* Sends msg (lines "KEY=VALUE\n") as one datagram. Returns 0 (also
 * without $NOTIFY_SOCKET), or -errno if sending failed (the caller logs
 * it: the service manager would wait for READY=1 until its timeout). */
int notify_send(const char *msg);

/* Writes "READY=1\nSTATUS=serving EXPORT on ADDR\nMAINPID=PID\n" into
 * buf[len] (truncated STATUS if need be, always NUL-terminated and
 * always with every line; a newline in EXPORT or ADDR becomes '?').
 * Pure. */
void notify_ready_msg(char *buf, size_t len, const char *export_dir, const char *addr, long pid);

/* Writes "RELOADING=1\nMONOTONIC_USEC=N\n" for CLOCK_MONOTONIC usec now_us
 * into buf[len]. Pure. */
void notify_reloading_msg(char *buf, size_t len, uint64_t now_us);

#endif /* PODFSD_NOTIFY_I_H */
