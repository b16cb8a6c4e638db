/* The in-memory prefix cache (tw/prefix_cache.h): a tree of token blocks,
 * found through a hash table keyed by chained block hashes, evicted leaf
 * first in LRU order within a byte budget. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "tw/prefix_cache.h"
#include "tw/seq_state.h"

#define B TW_PREFIX_BLOCK
#define ROOT_KEY 0x9e3779b97f4a7c15ull

typedef struct node {
    uint64_t key;
    struct node *parent; /* NULL: a first block */
    struct node *hnext;  /* hash chain */
    struct node *prev, *next; /* LRU list, most recent first */
    uint32_t children;
    int refs;
    size_t depth; /* blocks from the root including this one */
    size_t bytes; /* what this node counts against the budget */
    float *snap;  /* recurrent state at the node's end, or NULL */
    uint32_t tokens[B];
    unsigned char kv[]; /* [B tokens] in tw_seq_kv_read()'s layout and type */
} node;

struct tw_prefix_cache {
    pthread_mutex_t mu;
    tw_model *model;
    size_t kv_bytes; /* per block */
    size_t rec_floats;
    uint64_t max_bytes;
    uint32_t every;
    node **buckets;
    size_t n_buckets; /* power of two */
    node *lru;        /* sentinel (no K/V): lru->next is the most recent */
    tw_prefix_cache_stats st;
};

static uint64_t mix64(uint64_t x)
{
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

static uint64_t block_key(uint64_t parent_key, const uint32_t *tokens)
{
    uint64_t h = parent_key;
    for (size_t i = 0; i < B; i++)
        h = mix64(h ^ ((uint64_t)tokens[i] + 0x100000000ull * i));
    return h;
}

static void lru_unlink(node *n)
{
    n->prev->next = n->next;
    n->next->prev = n->prev;
}

static void lru_push_front(tw_prefix_cache *c, node *n)
{
    n->next = c->lru->next;
    n->prev = c->lru;
    c->lru->next->prev = n;
    c->lru->next = n;
}

static void touch(tw_prefix_cache *c, node *n)
{
    lru_unlink(n);
    lru_push_front(c, n);
}

tw_status tw_prefix_cache_create(tw_model *model, const tw_prefix_cache_opts *opts,
                                 tw_prefix_cache **out, tw_err *err)
{
    if (!out || !model)
        return tw_errorf(err, TW_INVALID_ARGUMENT, "prefix cache: NULL argument");
    *out = NULL;
    tw_prefix_cache *c = calloc(1, sizeof *c);
    if (!c)
        return tw_errorf(err, TW_RESOURCE_EXHAUSTED, "prefix cache: out of memory");
    c->model = model;
    c->kv_bytes = tw_seq_kv_bytes_per_token(model) * B;
    c->rec_floats = tw_seq_recurrent_floats(model);
    c->max_bytes = opts && opts->max_bytes ? opts->max_bytes : (uint64_t)1 << 30;
    c->every = opts && opts->snapshot_every ? opts->snapshot_every : 32;
    uint64_t per = sizeof(node) + c->kv_bytes;
    uint64_t want = c->max_bytes / per;
    c->n_buckets = 256;
    while (c->n_buckets < want && c->n_buckets < ((size_t)1 << 20))
        c->n_buckets <<= 1;
    c->buckets = calloc(c->n_buckets, sizeof *c->buckets);
    c->lru = calloc(1, sizeof *c->lru);
    if (!c->buckets || !c->lru) {
        free(c->buckets);
        free(c->lru);
        free(c);
        return tw_errorf(err, TW_RESOURCE_EXHAUSTED, "prefix cache: out of memory");
    }
    c->lru->next = c->lru->prev = c->lru;
    pthread_mutex_init(&c->mu, NULL);
    *out = c;
    return TW_OK;
}

static void node_free(node *n)
{
    free(n->snap);
    free(n);
}

void tw_prefix_cache_free(tw_prefix_cache *c)
{
    if (!c)
        return;
    for (node *n = c->lru->next, *next; n != c->lru; n = next) {
        next = n->next;
        node_free(n);
    }
    free(c->buckets);
    free(c->lru);
    pthread_mutex_destroy(&c->mu);
    free(c);
}

static node *find_child(const tw_prefix_cache *c, const node *parent, const uint32_t *tokens)
{
    uint64_t key = block_key(parent ? parent->key : ROOT_KEY, tokens);
    for (node *n = c->buckets[key & (c->n_buckets - 1)]; n; n = n->hnext)
        if (n->key == key && n->parent == parent &&
            memcmp(n->tokens, tokens, sizeof n->tokens) == 0)
            return n;
    return NULL;
}

static void remove_node(tw_prefix_cache *c, node *n)
{
    node **pp = &c->buckets[n->key & (c->n_buckets - 1)];
    while (*pp != n)
        pp = &(*pp)->hnext;
    *pp = n->hnext;
    lru_unlink(n);
    if (n->parent)
        n->parent->children--;
    c->st.bytes -= n->bytes;
    c->st.nodes--;
    if (n->snap)
        c->st.snapshots--;
    node_free(n);
}

/* Evicts least recently used unpinned leaves until `need` more bytes fit.
 * Evicting a leaf can make its parent a leaf, so the scan restarts from the
 * oldest end after each removal. */
static bool make_room(tw_prefix_cache *c, size_t need)
{
    if (need > c->max_bytes)
        return false;
    while (c->st.bytes + need > c->max_bytes) {
        node *victim = NULL;
        for (node *n = c->lru->prev; n != c->lru; n = n->prev)
            if (n->children == 0 && n->refs == 0) {
                victim = n;
                break;
            }
        if (!victim)
            return false;
        remove_node(c, victim);
        c->st.evictions++;
    }
    return true;
}

tw_status tw_prefix_cache_restore(tw_prefix_cache *c, tw_seq *seq, const uint32_t *tokens,
                                  size_t n, size_t limit, size_t *restored, tw_err *err)
{
    if (restored)
        *restored = 0;
    if (!c || !seq || !restored || (!tokens && n))
        return tw_errorf(err, TW_INVALID_ARGUMENT, "prefix cache restore: NULL argument");
    if (limit > n)
        limit = n;
    if (limit > tw_seq_capacity(seq))
        limit = tw_seq_capacity(seq);
    tw_seq_reset(seq);
    pthread_mutex_lock(&c->mu);
    c->st.lookups++;
    node *cur = NULL, *best = NULL;
    for (size_t b = 0; (b + 1) * B <= limit; b++) {
        node *child = find_child(c, cur, tokens + b * B);
        if (!child)
            break;
        cur = child;
        if (!c->rec_floats || cur->snap)
            best = cur;
    }
    tw_status st = TW_OK;
    if (best) {
        /* Leaf first, so the path's ancestors end up the most recent. */
        for (node *p = best; p; p = p->parent) {
            touch(c, p);
            st = tw_seq_kv_write(seq, (p->depth - 1) * B, B, p->kv, err);
            if (st != TW_OK)
                break;
        }
        if (st == TW_OK)
            st = tw_seq_set_len(seq, best->depth * B, best->snap, err);
        if (st == TW_OK) {
            *restored = best->depth * B;
            c->st.hits++;
            c->st.tokens_reused += *restored;
        } else {
            tw_seq_reset(seq);
        }
    }
    pthread_mutex_unlock(&c->mu);
    return st;
}

tw_status tw_prefix_cache_insert(tw_prefix_cache *c, const tw_seq *seq, const uint32_t *tokens,
                                 bool snapshot, size_t *cached, tw_err *err)
{
    if (cached)
        *cached = 0;
    if (!c || !seq || (!tokens && tw_seq_len(seq)))
        return tw_errorf(err, TW_INVALID_ARGUMENT, "prefix cache insert: NULL argument");
    size_t len = tw_seq_len(seq), nblocks = len / B;
    size_t node_bytes = sizeof(node) + c->kv_bytes;
    tw_status st = TW_OK;
    pthread_mutex_lock(&c->mu);
    node *cur = NULL;
    for (size_t b = 0; b < nblocks; b++) {
        node *child = find_child(c, cur, tokens + b * B);
        if (!child) {
            if (cur)
                cur->refs++; /* the parent must survive making room */
            bool room = make_room(c, node_bytes);
            if (cur)
                cur->refs--;
            if (!room)
                break;
            child = malloc(node_bytes);
            if (!child)
                break;
            memset(child, 0, sizeof *child);
            memcpy(child->tokens, tokens + b * B, sizeof child->tokens);
            st = tw_seq_kv_read(seq, b * B, B, child->kv, err);
            if (st != TW_OK) {
                free(child);
                break;
            }
            child->key = block_key(cur ? cur->key : ROOT_KEY, child->tokens);
            child->parent = cur;
            child->depth = b + 1;
            child->bytes = node_bytes;
            if (cur)
                cur->children++;
            node **bucket = &c->buckets[child->key & (c->n_buckets - 1)];
            child->hnext = *bucket;
            *bucket = child;
            lru_push_front(c, child);
            c->st.bytes += node_bytes;
            c->st.nodes++;
        }
        touch(c, child);
        cur = child;
    }
    if (st == TW_OK && snapshot && c->rec_floats && cur && cur->depth * B == len && !cur->snap) {
        size_t bytes = c->rec_floats * sizeof(float);
        cur->refs++;
        bool room = make_room(c, bytes);
        cur->refs--;
        float *snap = room ? malloc(bytes) : NULL;
        if (snap && tw_seq_recurrent_read(seq, snap, err) == TW_OK) {
            cur->snap = snap;
            cur->bytes += bytes;
            c->st.bytes += bytes;
            c->st.snapshots++;
        } else {
            free(snap);
        }
    }
    if (cached)
        *cached = cur ? cur->depth * B : 0;
    pthread_mutex_unlock(&c->mu);
    return st;
}

bool tw_prefix_cache_wants_snapshot(const tw_prefix_cache *c, size_t pos, size_t prompt_len,
                                    size_t mark)
{
    if (!c || !c->rec_floats || pos == 0 || pos % B != 0)
        return false;
    if (pos == prompt_len / B * B)
        return true;
    if (mark && pos == mark / B * B)
        return true;
    return (pos / B) % c->every == 0;
}

size_t tw_prefix_cache_next_stop(const tw_prefix_cache *c, size_t pos, size_t limit,
                                 size_t prompt_len, size_t mark)
{
    if (!c || !c->rec_floats)
        return limit;
    for (size_t p = (pos / B + 1) * B; p < limit; p += B)
        if (tw_prefix_cache_wants_snapshot(c, p, prompt_len, mark))
            return p;
    return limit;
}

void tw_prefix_cache_clear(tw_prefix_cache *c)
{
    if (!c)
        return;
    pthread_mutex_lock(&c->mu);
    bool again = true;
    while (again) {
        again = false;
        for (node *n = c->lru->prev, *prev; n != c->lru; n = prev) {
            prev = n->prev;
            if (n->children == 0 && n->refs == 0) {
                remove_node(c, n);
                again = true;
            }
        }
    }
    pthread_mutex_unlock(&c->mu);
}

void tw_prefix_cache_get_stats(tw_prefix_cache *c, tw_prefix_cache_stats *out)
{
    memset(out, 0, sizeof *out);
    if (!c)
        return;
    pthread_mutex_lock(&c->mu);
    *out = c->st;
    pthread_mutex_unlock(&c->mu);
}
