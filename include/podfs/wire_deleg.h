/* wire_deleg.h: the part of the wire protocol (wire.h) about
 * delegations: attributes of a new file, and a directory's changes,
 * answered by the client that holds them (PFS_CAP_DELEG; opcodes
 * DELEG_DIR, DELEG_RETURN, SLOTS, CREATES, UNLINKS and the RECALL push,
 * rows of wire.h's PFS_OPS, their messages in codec.h). Included by
 * wire.h. How podfs and podfsd use them: docs/delegation.md. */
#ifndef PODFS_WIRE_DELEG_H
#define PODFS_WIRE_DELEG_H

/* Delegations (PFS_CAP_DELEG): attributes of a new file answered by the
 * client that made it, in the spirit of NFSv4's delegations and CephFS's
 * capabilities, limited to one case: a file a client just created and
 * still holds open, which no other client has seen.
 *
 * Grant. The reply to CREATE in such a session is mkdir_rep (entry,
 *   directory attributes, flags); PFS_CR_DELEG says the server granted
 *   the caller a delegation on the new file: it made the file (not an
 *   existing one opened), the file has no extended attribute (no ACL
 *   inherited), the caller's export rule does not squash ids, and no
 *   other session caches the file or the directory. It lasts while the
 *   fid of that CREATE is open, until recalled, or until the session
 *   ends; a client gives it up at a reconnect.
 * Holding. The client answers SETATTR of the mode, owner, group and
 *   explicit times of the file itself, for a caller that is root or the
 *   owner, computing the attributes as the server's kernel would
 *   (docs/delegation.md); anything else (sizes, UTIME_NOW, another
 *   caller, an answer it cannot be sure of) goes to the server as usual,
 *   after what it answered. It sends what it answered, in order, as
 *   SETATTRs with PFS_SET_DELEG, before the data commit of the file,
 *   before a close returns, and before acknowledging a recall.
 * Recall. A request of another session that names the file, or the
 *   directory it was made in, waits while the server pushes RECALL (fh:
 *   the file or the directory) to each holder. The holder stops answering
 *   locally, sends its SETATTRs, and acknowledges the push (PUSH_ACK)
 *   only once their replies came: the push is applied then. The request
 *   runs once every holder acknowledged, or sent nothing for the server's
 *   recall timeout (podfsd --recall-timeout; a holder whose connection
 *   went is waited for on its next connection meanwhile, which gets the
 *   RECALL): such a holder's delegation is revoked, and its SETATTRs
 *   under it fail with EIO from then on.
 * Directory delegations. DELEG_DIR asks for one on directory fh; the
 *   server grants it (reply 0) on the same conditions as above (ids not
 *   squashed, no other session caches the directory), else EAGAIN. While
 *   the client holds one, it may answer the unlink of a name there
 *   itself (a file with one link, not a directory, which it knows from
 *   the directory's listing and from attributes it trusts) and send the
 *   UNLINK in the background. A request of another session that names
 *   the directory or its parent recalls it as above (RECALL of that fh):
 *   the holder sends every UNLINK it answered and waits for their
 *   replies before it acknowledges. It lasts until recalled, returned
 *   (DELEG_RETURN, once nothing is pending there), the directory is
 *   removed, the session ends or, on the client, until a reconnect.
 *   The holder may answer a rename within the directory too, and send
 *   it in the background as a RENAME with PFS_RN_DELEG.
 * Creates under a directory delegation. The holder may also ask for
 *   slots in the directory (SLOTS): files the server makes at once
 *   (O_TMPFILE, as the caller, so the caller's write permission on the
 *   directory is checked and the group follows a set-group-ID
 *   directory) but names nowhere yet, or with the grant itself in the
 *   reply to the MKDIR that made the directory (MKDIR's slots). Each
 *   has its final handle and inode
 *   number. The client then answers the create of a regular file there
 *   itself, with a slot's handle, and names it in the background
 *   (CREATES), before any other request of its own that depends on the
 *   name, before its fsync, and before acknowledging a recall. Writes
 *   to the file by handle may come before: they reach the slot. Slots
 *   end with the delegation's return, with the session, with a change
 *   of the directory's mode or owner by the session (SETATTR: they were
 *   made under its rights before), and with the server: after a
 *   restart a slot's handle is stale, and a CREATES of it fails
 *   (ESTALE) as unsynced data is lost. */

#endif /* PODFS_WIRE_DELEG_H */
