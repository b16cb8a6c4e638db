/* A bump allocator for the pieces of one request's protobuf message tree.
 *
 * A GenerateRequest built from JSON holds dozens of small arrays (messages,
 * tools, token ids, stop strings); giving each its own malloc would need a
 * matching free walk. The arena hands out zeroed blocks that are all released
 * by one tw_bridge_arena_fini. It refuses to grow past a byte limit so that a
 * hostile request cannot make the bridge allocate without bound.
 *
 * Not thread-safe: an arena belongs to the one request being handled.
 */
#ifndef TW_BRIDGE_ARENA_H
#define TW_BRIDGE_ARENA_H

#include <stddef.h>

typedef struct tw_bridge_arena_block tw_bridge_arena_block;

typedef struct tw_bridge_arena {
    tw_bridge_arena_block *head;
    size_t used;  /* bytes handed out plus block headers */
    size_t limit; /* 0: no limit */
} tw_bridge_arena;

/* Starts an empty arena that will not hand out more than limit bytes in all
 * (0: unlimited). */
void tw_bridge_arena_init(tw_bridge_arena *a, size_t limit);

/* Returns n zeroed bytes aligned for any type, or NULL when memory runs out or
 * the limit would be passed. n == 0 returns a valid unique pointer. */
void *tw_bridge_arena_alloc(tw_bridge_arena *a, size_t n);

/* As tw_bridge_arena_alloc for count elements of size bytes; NULL when the
 * product overflows. */
void *tw_bridge_arena_array(tw_bridge_arena *a, size_t count, size_t size);

/* Copies len bytes of s and a terminating NUL into the arena. */
char *tw_bridge_arena_strndup(tw_bridge_arena *a, const char *s, size_t len);

/* Releases every block; the arena may be reused after tw_bridge_arena_init. */
void tw_bridge_arena_fini(tw_bridge_arena *a);

#endif
