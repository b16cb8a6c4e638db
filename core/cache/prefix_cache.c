/* The in-memory prefix cache (tw/prefix_cache.h): a tree of token blocks,
 * found through a hash table keyed by chained block hashes, evicted leaf
 * first in LRU order within a byte budget.
 *
 * Where a block's rows fill whole pages of every K/V run, the nodes keep
 * their K/V in one memory file instead of the heap, and a restore maps
 * those pages into the sequence (tw_seq_kv_map_file) instead of copying
 * them: every sequence restored from a prefix then reads one copy of it.
 * The file is laid out run-major, run r's slots at r * run_span, a node's
 * rows at its slot in each, and the nodes of one insert take neighbouring
 * slots, so a prefix maps in one call per run and stretch of neighbours.
 * A restore pins the nodes it mapped until the sequence gives its lease
 * back; the cache itself lives on (closed) until the last lease is back. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include "tw/kernels.h"
#include "tw/prefix_cache.h"
#include "tw/seq_state.h"

#define B TW_PREFIX_BLOCK
/* A restore ends on a prefill group boundary, where continuing the prompt
 * gives the bits reading it whole gives (tw_model_forward). */
_Static_assert(TW_PREFIX_BLOCK % TW_PREFILL_GROUP == 0, "cache blocks of whole prefill groups");
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
    size_t slot;  /* its rows' slot in the file (shared K/V) */
    uint32_t tokens[B];
    unsigned char kv[]; /* without the file: [B tokens] in tw_seq_kv_read()'s layout and type */
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
    /* shared K/V (fd >= 0): the memory file, its slots and their use */
    int fd;
    size_t slot_bytes; /* one block of one run */
    size_t n_slots;    /* per run: twice what the budget holds */
    uint64_t run_span; /* n_slots * slot_bytes */
    uint8_t *slot_used;
    size_t slot_cursor;
    /* the owner and every lease out; freed when the last goes */
    size_t users;
    bool closed;
};

/* A restore's mapped nodes, pinned until the sequence gives it back. */
typedef struct lease {
    tw_kv_lease base; /* first: the sequence hands back this */
    tw_prefix_cache *c;
    size_t n;
    node *nodes[];
} lease;

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

/* The memory file for the nodes' K/V where a block fills whole pages of
 * every run; without it (another geometry, no memfd) nodes keep their K/V
 * on the heap and restores copy it. */
static void open_file(tw_prefix_cache *c)
{
    const size_t runs = tw_seq_kv_runs(c->model);
    const long page = sysconf(_SC_PAGESIZE);
    if (!runs || page <= 0 || c->kv_bytes % runs || (c->kv_bytes / runs) % (size_t)page)
        return;
    c->slot_bytes = c->kv_bytes / runs;
    uint64_t fit = c->max_bytes / (sizeof(node) + c->kv_bytes);
    if (fit > ((uint64_t)1 << 24))
        return;
    c->n_slots = 2 * (size_t)fit + 16;
    c->run_span = (uint64_t)c->n_slots * c->slot_bytes;
    /* a file past RLIMIT_FSIZE would be refused with SIGXFSZ, which ends
     * the process */
    struct rlimit fsize;
    if (getrlimit(RLIMIT_FSIZE, &fsize) == 0 && fsize.rlim_cur != RLIM_INFINITY &&
        c->run_span * runs > (uint64_t)fsize.rlim_cur)
        return;
    c->slot_used = calloc(c->n_slots, 1);
    int fd = memfd_create("tokenwire-prefix-kv", MFD_CLOEXEC);
    /* sparse: only the slots written take memory */
    if (!c->slot_used || fd < 0 || ftruncate(fd, (off_t)(c->run_span * runs)) != 0) {
        if (fd >= 0)
            close(fd);
        free(c->slot_used);
        c->slot_used = NULL;
        return;
    }
    c->fd = fd;
}

/* A free slot: `prefer` (the one after the previous block's) when free, so
 * that a prefix's blocks lie side by side; else the next free one on. */
static bool slot_take(tw_prefix_cache *c, size_t prefer, size_t *out)
{
    size_t s = prefer < c->n_slots && !c->slot_used[prefer] ? prefer : c->slot_cursor;
    for (size_t tried = 0; tried < c->n_slots; tried++, s = (s + 1) % c->n_slots)
        if (!c->slot_used[s]) {
            c->slot_used[s] = 1;
            c->slot_cursor = (s + 1) % c->n_slots;
            *out = s;
            return true;
        }
    return false;
}

/* Gives a slot's pages back to the system; no sequence reads them (the node
 * was not pinned). */
static void slot_free(tw_prefix_cache *c, size_t slot)
{
    const size_t runs = tw_seq_kv_runs(c->model);
    for (size_t r = 0; r < runs; r++)
        (void)fallocate(c->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
                        (off_t)(r * c->run_span + slot * c->slot_bytes), (off_t)c->slot_bytes);
    c->slot_used[slot] = 0;
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
    c->fd = -1;
    c->users = 1;
    if (!(opts && opts->copy_kv))
        open_file(c);
    pthread_mutex_init(&c->mu, NULL);
    *out = c;
    return TW_OK;
}

static void node_free(node *n)
{
    free(n->snap);
    free(n);
}

static void destroy(tw_prefix_cache *c)
{
    for (node *n = c->lru->next, *next; n != c->lru; n = next) {
        next = n->next;
        node_free(n);
    }
    if (c->fd >= 0)
        close(c->fd);
    free(c->slot_used);
    free(c->buckets);
    free(c->lru);
    pthread_mutex_destroy(&c->mu);
    free(c);
}

/* Drops one user (the owner or a lease) under the mutex; true when that
 * was the last of a closed cache, which the caller then destroys. */
static bool drop_user(tw_prefix_cache *c)
{
    c->users--;
    return c->closed && c->users == 0;
}

static void drop_unpinned(tw_prefix_cache *c);

void tw_prefix_cache_free(tw_prefix_cache *c)
{
    if (!c)
        return;
    pthread_mutex_lock(&c->mu);
    /* what no sequence reads goes now; the rest when its last reader lets go */
    drop_unpinned(c);
    c->closed = true;
    bool last = drop_user(c);
    pthread_mutex_unlock(&c->mu);
    if (last)
        destroy(c);
}

static void lease_release(tw_kv_lease *base)
{
    lease *l = (lease *)base;
    tw_prefix_cache *c = l->c;
    pthread_mutex_lock(&c->mu);
    for (size_t i = 0; i < l->n; i++)
        l->nodes[i]->refs--;
    bool last = drop_user(c);
    pthread_mutex_unlock(&c->mu);
    free(l);
    if (last)
        destroy(c);
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
    if (c->fd >= 0)
        slot_free(c, n->slot);
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

/* The rows of path[0, n) (root first) into seq from the file: each stretch
 * of neighbouring slots mapped where the sequence's pages allow, copied
 * where not. *mapped gets the tokens mapped. */
static tw_status restore_from_file(tw_prefix_cache *c, tw_seq *seq, node *const *path, size_t n,
                                   size_t *mapped, tw_err *err)
{
    *mapped = 0;
    for (size_t i = 0, j; i < n; i = j) {
        for (j = i + 1; j < n && path[j]->slot == path[j - 1]->slot + 1; j++)
            ;
        const size_t pos = i * B, rows = (j - i) * B;
        const uint64_t base = (uint64_t)path[i]->slot * c->slot_bytes;
        tw_err merr;
        tw_status st = tw_seq_kv_map_file(seq, pos, rows, c->fd, base, c->run_span, &merr);
        if (st == TW_OK)
            *mapped += rows;
        else if (st != TW_RESOURCE_EXHAUSTED && st != TW_FAILED_PRECONDITION)
            return tw_errorf(err, st, "prefix cache restore: %s", merr.msg);
        else {
            st = tw_seq_kv_load_file(seq, pos, rows, c->fd, base, c->run_span, err);
            if (st != TW_OK)
                return st;
        }
    }
    return TW_OK;
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
    /* before the mutex: a reset gives back the leases the sequence holds,
     * which may be this cache's */
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
    lease *l = NULL;
    if (best) {
        /* Leaf first, so the path's ancestors end up the most recent. */
        for (node *p = best; p; p = p->parent)
            touch(c, p);
        size_t mapped = 0;
        if (c->fd >= 0) {
            l = malloc(sizeof *l + best->depth * sizeof(node *));
            if (!l) {
                st = tw_errorf(err, TW_RESOURCE_EXHAUSTED, "prefix cache restore: out of memory");
            } else {
                l->n = best->depth;
                for (node *p = best; p; p = p->parent)
                    l->nodes[p->depth - 1] = p;
                st = restore_from_file(c, seq, l->nodes, l->n, &mapped, err);
            }
        } else {
            for (node *p = best; p && st == TW_OK; p = p->parent)
                st = tw_seq_kv_write(seq, (p->depth - 1) * B, B, p->kv, err);
        }
        if (st == TW_OK)
            st = tw_seq_set_len(seq, best->depth * B, best->snap, err);
        if (st == TW_OK) {
            *restored = best->depth * B;
            c->st.hits++;
            c->st.tokens_reused += *restored;
            c->st.tokens_mapped += mapped;
        }
        if (l && (mapped || st != TW_OK)) {
            /* the sequence reads the file's pages now (a failed restore may
             * have mapped some before it failed, until the reset below):
             * their nodes stay until it gives the lease back */
            for (size_t i = 0; i < l->n; i++)
                l->nodes[i]->refs++;
            l->base.release = lease_release;
            l->base.next = NULL;
            l->c = c;
            c->users++;
            tw_seq_kv_hold(seq, &l->base);
            l = NULL;
        }
    }
    pthread_mutex_unlock(&c->mu);
    free(l);
    if (st != TW_OK)
        tw_seq_reset(seq);
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
    /* the budget counts a node's K/V wherever it is kept */
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
            child = malloc(c->fd >= 0 ? sizeof(node) : node_bytes);
            if (!child)
                break;
            memset(child, 0, sizeof *child);
            memcpy(child->tokens, tokens + b * B, sizeof child->tokens);
            if (c->fd >= 0) {
                if (!slot_take(c, cur ? cur->slot + 1 : c->slot_cursor, &child->slot)) {
                    free(child);
                    break;
                }
                st = tw_seq_kv_store_file(seq, b * B, B, c->fd,
                                          (uint64_t)child->slot * c->slot_bytes, c->run_span, err);
                if (st != TW_OK)
                    slot_free(c, child->slot);
            } else {
                st = tw_seq_kv_read(seq, b * B, B, child->kv, err);
            }
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

/* Removes every node that is not pinned (under the mutex). */
static void drop_unpinned(tw_prefix_cache *c)
{
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
}

void tw_prefix_cache_clear(tw_prefix_cache *c)
{
    if (!c)
        return;
    pthread_mutex_lock(&c->mu);
    drop_unpinned(c);
    pthread_mutex_unlock(&c->mu);
}

bool tw_prefix_cache_maps(const tw_prefix_cache *c)
{
    return c && c->fd >= 0;
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
