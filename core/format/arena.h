/* A grow-only allocator for the many small strings a model file holds (keys,
 * tensor names, vocabulary). Everything is released at once. Internal to
 * core/format. */
#ifndef TW_FORMAT_ARENA_H
#define TW_FORMAT_ARENA_H

#include <stddef.h>

typedef struct twf_arena_block twf_arena_block;

typedef struct twf_arena {
    twf_arena_block *head;
} twf_arena;

void twf_arena_init(twf_arena *a);
/* n bytes aligned for any object; NULL when out of memory. */
void *twf_arena_alloc(twf_arena *a, size_t n);
void twf_arena_free(twf_arena *a);

#endif
