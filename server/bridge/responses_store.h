/* The responses the bridge keeps for /v1/responses: each answer made with
 * `store` on, with the input items that led to it, so that a later request
 * can go on from it (previous_response_id) and a client can read it back,
 * list its input items or delete it.
 *
 * The store lives in memory and holds at most max_bytes of JSON text; the
 * response read or written longest ago goes first to make room. Each entry
 * belongs to the API key that made it (owner: a digest of the key), and is
 * invisible to every other key. Entries are kept as text, so what a reader
 * gets is its own copy.
 *
 * save and load carry the store across restarts: one JSON line per entry,
 * least recently used first, so that loading gives back the same order.
 * With a journal, every keep and delete is also appended to the file as it
 * happens, so a bridge that is killed or crashes loses nothing it
 * answered (what reads did to the order of use is not recorded).
 *
 * Thread-safety: every call may run on any thread at once.
 */
#ifndef TW_BRIDGE_RESPONSES_STORE_H
#define TW_BRIDGE_RESPONSES_STORE_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "tw/status.h"

/* The longest response id the store takes. */
#define TW_BRIDGE_RESP_ID_MAX 64

typedef struct tw_bridge_resp_store tw_bridge_resp_store;

tw_status tw_bridge_resp_store_open(size_t max_bytes, tw_bridge_resp_store **out, tw_err *err);
void tw_bridge_resp_store_close(tw_bridge_resp_store *s);

/* Keeps a response (its "id" names it) and the items of its input. False
 * when it cannot be kept: no id or a longer one than TW_BRIDGE_RESP_ID_MAX,
 * larger than the whole store, or out of memory. Keeping an id again
 * replaces what it held. */
bool tw_bridge_resp_store_put(tw_bridge_resp_store *s, const unsigned char owner[32],
                              const json_t *response, const json_t *items);

/* The response id holds for owner, and its input items; each out pointer
 * (NULL: not wanted) gets a new reference. False when nothing is kept
 * under id for owner. */
bool tw_bridge_resp_store_get(tw_bridge_resp_store *s, const unsigned char owner[32],
                              const char *id, json_t **response, json_t **items);

/* Forgets id. False when nothing was kept under it for owner. */
bool tw_bridge_resp_store_delete(tw_bridge_resp_store *s, const unsigned char owner[32],
                                 const char *id);

/* Writes every entry to path (mode 0600: conversations are private),
 * through a temporary file renamed over it, so that path holds either the
 * old whole file or the new one. */
tw_status tw_bridge_resp_store_save(tw_bridge_resp_store *s, const char *path, tw_err *err);

/* Rewrites path as save does, then appends each later keep (an entry
 * line) and delete (a line {"owner":..., "delete": id}) to it, and
 * rewrites it whenever it grows past twice what the store holds plus
 * 1 MiB. Call it after load: lines load reads are not appended again.
 * The lines reach the kernel at once (a killed bridge loses none) and,
 * unless tw_bridge_resp_store_journal_sync turned it off, the disk before
 * the call that wrote them returns (a machine that loses power loses
 * none either); a rewrite is synced, its directory too. */
tw_status tw_bridge_resp_store_journal(tw_bridge_resp_store *s, const char *path, tw_err *err);

/* Whether each journal line is synced to the disk as it is written (true
 * from open): false leaves it to the system's write-back, for a disk
 * whose syncs cost more than the answers are worth. */
void tw_bridge_resp_store_journal_sync(tw_bridge_resp_store *s, bool each_line);

/* Journal lines synced to the disk so far. */
unsigned long tw_bridge_resp_store_journal_syncs(tw_bridge_resp_store *s);

/* Journal lines that could not be written (disk full, an unwritable
 * rewrite); those answers are still kept in memory. */
unsigned long tw_bridge_resp_store_journal_errors(tw_bridge_resp_store *s);

/* Keeps the entries of a file save wrote, or a journal: its delete lines
 * take out what came before them. A missing file is an empty one.
 * A line that is not an entry (a hand-edited or damaged file) is skipped
 * and counted in *skipped, with the first such line's problem in err's
 * message; entries beyond the store's size push out the oldest, as puts
 * do. Fails only when the file cannot be read. */
tw_status tw_bridge_resp_store_load(tw_bridge_resp_store *s, const char *path, size_t *loaded,
                                    size_t *skipped, tw_err *err);

/* What the store holds now: entries and bytes of text. */
void tw_bridge_resp_store_usage(tw_bridge_resp_store *s, size_t *entries, size_t *bytes);

#endif
