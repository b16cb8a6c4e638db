#include "arena.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Small allocations share blocks of this size; larger ones get their own. */
#define ARENA_BLOCK_BYTES 8192u
#define ARENA_ALIGN 16u

struct tw_bridge_arena_block {
    tw_bridge_arena_block *next;
    size_t cap;
    size_t off;
    _Alignas(16) unsigned char data[];
};

void tw_bridge_arena_init(tw_bridge_arena *a, size_t limit)
{
    a->head = NULL;
    a->used = 0;
    a->limit = limit;
}

static tw_bridge_arena_block *arena_new_block(tw_bridge_arena *a, size_t cap)
{
    size_t total = sizeof(tw_bridge_arena_block) + cap;
    if (a->limit && (total > a->limit || a->used > a->limit - total))
        return NULL;
    tw_bridge_arena_block *b = malloc(total);
    if (!b)
        return NULL;
    b->cap = cap;
    b->off = 0;
    b->next = a->head;
    a->head = b;
    a->used += total;
    return b;
}

void *tw_bridge_arena_alloc(tw_bridge_arena *a, size_t n)
{
    if (n > SIZE_MAX - ARENA_ALIGN)
        return NULL;
    size_t need = (n + ARENA_ALIGN - 1) & ~(size_t)(ARENA_ALIGN - 1);
    if (need == 0)
        need = ARENA_ALIGN;
    tw_bridge_arena_block *b = a->head;
    if (!b || b->cap - b->off < need) {
        if (need > ARENA_BLOCK_BYTES / 2) {
            /* A large piece gets a block of its own, placed behind the
             * current one so the current block's free space stays usable. */
            tw_bridge_arena_block *big = arena_new_block(a, need);
            if (!big)
                return NULL;
            if (b) {
                a->head = b;
                big->next = b->next;
                b->next = big;
            }
            big->off = need;
            memset(big->data, 0, need);
            return big->data;
        }
        b = arena_new_block(a, ARENA_BLOCK_BYTES);
        if (!b)
            return NULL;
    }
    void *p = b->data + b->off;
    b->off += need;
    memset(p, 0, need);
    return p;
}

void *tw_bridge_arena_array(tw_bridge_arena *a, size_t count, size_t size)
{
    if (size != 0 && count > SIZE_MAX / size)
        return NULL;
    return tw_bridge_arena_alloc(a, count * size);
}

char *tw_bridge_arena_strndup(tw_bridge_arena *a, const char *s, size_t len)
{
    if (len == SIZE_MAX)
        return NULL;
    char *p = tw_bridge_arena_alloc(a, len + 1);
    if (!p)
        return NULL;
    if (len)
        memcpy(p, s, len);
    p[len] = '\0';
    return p;
}

void tw_bridge_arena_fini(tw_bridge_arena *a)
{
    tw_bridge_arena_block *b = a->head;
    while (b) {
        tw_bridge_arena_block *next = b->next;
        free(b);
        b = next;
    }
    a->head = NULL;
    a->used = 0;
}
