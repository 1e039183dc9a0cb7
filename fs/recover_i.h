/* recover_i.h: finding cached objects again by name after the server's
 * handle secret changed (see fhmap_i.h).
 *
 * The kernel holds inodes by nodeid, and each inode knows the directory
 * and the name it was last looked up under (inode_set_parent). From the
 * root (whose new handle came with the reconnect's AUTH reply), each
 * object is looked up again in its directory, directories before what is
 * in them: an answer that is the same object (same inode number and
 * type) gives the object its new handle (fhmap_put). An object whose name
 * is gone, or names another object now, is left out: its requests keep
 * getting ESTALE, as on NFS, and the revalidation that follows drops
 * what the kernel caches of it, so a path that exists is looked up
 * afresh. Work is bounded by the inodes the kernel holds: one LOOKUP each.
 */
#ifndef PODFS_RECOVER_I_H
#define PODFS_RECOVER_I_H

struct client;

/* Requests wait at most this long for recover_handles (rpc_hold). */
#define RECOVER_HOLD_MS 30000

/* Re-resolves every inode of c's table (the cache thread, after the
 * reconnect that saw the change; c->fm already maps the root, and the
 * other requests are held: rpc_hold), then lets the held requests go.
 * Logs one line with the outcome. */
void recover_handles(struct client *c);

#endif /* PODFS_RECOVER_I_H */
