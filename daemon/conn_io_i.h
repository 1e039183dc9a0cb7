/* conn_io_i.h: what conn.c (the connection, its writes and backpressure)
 * and conn_read.c (its input) share. Loop thread only. */
#ifndef PODFSD_CONN_IO_I_H
#define PODFSD_CONN_IO_I_H

#include <stdbool.h>
#include <stddef.h>
#include <uv.h>

#include "conn_i.h"

/* libuv's callbacks of a connection's reading (conn_read.c). */
void conn_alloc_cb(uv_handle_t *h, size_t suggested, uv_buf_t *buf);
void conn_read_cb(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf);
/* Resumes a connection whose reading stopped for backpressure with
 * input still held (conn_flow starts it). */
void conn_kick_cb(uv_timer_t *t);
/* Sends the ciphertext the TLS stream holds as one write; acct and
 * is_reply as for the frame it carries (conn.c). */
void conn_tls_out(struct conn *c, size_t acct, bool is_reply);

#endif
