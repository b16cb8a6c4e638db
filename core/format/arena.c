#include "format/arena.h"

#include <stdalign.h>
#include <stdint.h>
#include <stdlib.h>

#define BLOCK_MIN (64 * 1024)

struct twf_arena_block {
    twf_arena_block *next;
    size_t used, cap;
    alignas(max_align_t) unsigned char data[];
};

void twf_arena_init(twf_arena *a) { a->head = NULL; }

void *twf_arena_alloc(twf_arena *a, size_t n)
{
    const size_t align = alignof(max_align_t);
    if (n > SIZE_MAX - align - sizeof(twf_arena_block))
        return NULL;
    n = (n + align - 1) & ~(align - 1);
    twf_arena_block *b = a->head;
    if (!b || b->cap - b->used < n) {
        size_t cap = n > BLOCK_MIN ? n : BLOCK_MIN;
        b = malloc(sizeof *b + cap);
        if (!b)
            return NULL;
        b->next = a->head;
        b->used = 0;
        b->cap = cap;
        a->head = b;
    }
    void *p = b->data + b->used;
    b->used += n;
    return p;
}

void twf_arena_free(twf_arena *a)
{
    twf_arena_block *b = a->head;
    while (b) {
        twf_arena_block *next = b->next;
        free(b);
        b = next;
    }
    a->head = NULL;
}
