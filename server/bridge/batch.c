#include "batch.h"

#include <pthread.h>
#include <stdatomic.h>

typedef struct prompt_queue {
    size_t n;
    atomic_size_t next;
    void (*fn)(size_t i, void *user);
    void *user;
} prompt_queue;

static void *take_prompts(void *arg)
{
    prompt_queue *q = arg;
    for (size_t i; (i = atomic_fetch_add(&q->next, 1)) < q->n;)
        q->fn(i, q->user);
    return NULL;
}

void tw_bridge_for_each_prompt(size_t n, void (*fn)(size_t i, void *user), void *user)
{
    tw_bridge_for_each_prompt_at(n, TW_BRIDGE_BATCH_IN_FLIGHT, fn, user);
}

void tw_bridge_for_each_prompt_at(size_t n, size_t width, void (*fn)(size_t i, void *user),
                                  void *user)
{
    prompt_queue q = {.n = n, .fn = fn, .user = user};
    atomic_init(&q.next, 0);
    pthread_t th[TW_BRIDGE_ENCODER_IN_FLIGHT - 1];
    if (width < 1)
        width = 1;
    if (width > TW_BRIDGE_ENCODER_IN_FLIGHT)
        width = TW_BRIDGE_ENCODER_IN_FLIGHT;
    size_t started = 0;
    /* a thread that cannot start leaves its prompts to the others */
    while (started + 1 < width && started + 1 < n &&
           pthread_create(&th[started], NULL, take_prompts, &q) == 0)
        started++;
    take_prompts(&q);
    for (size_t i = 0; i < started; i++)
        pthread_join(th[i], NULL);
}

/* Adds the integers of usage object from into to, nested objects alike. */
static void add_usage(json_t *to, const json_t *from)
{
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)from, key, v)
    {
        json_t *t = json_object_get(to, key);
        if (json_is_integer(v) && json_is_integer(t))
            json_integer_set(t, json_integer_value(t) + json_integer_value(v));
        else if (json_is_object(v) && json_is_object(t))
            add_usage(t, v);
    }
}

json_t *tw_bridge_merge_replies(json_t **out, size_t n_prompts, uint32_t n)
{
    json_t *all = out[0];
    out[0] = NULL;
    json_t *choices = json_object_get(all, "choices");
    for (size_t i = 1; i < n_prompts; i++) {
        size_t k;
        json_t *c;
        json_array_foreach(json_object_get(out[i], "choices"), k, c)
        {
            json_int_t idx = json_integer_value(json_object_get(c, "index"));
            if (json_object_set_new(c, "index", json_integer((json_int_t)(i * n) + idx)) ||
                json_array_append(choices, c)) {
                json_decref(all);
                return NULL;
            }
        }
        add_usage(json_object_get(all, "usage"), json_object_get(out[i], "usage"));
    }
    return all;
}

tw_status tw_bridge_first_failure(const tw_status *st, const tw_bridge_apierr *aes, size_t n,
                                  tw_bridge_apierr *ae)
{
    for (size_t i = 0; i < n; i++) {
        if (st[i] != TW_OK) {
            *ae = aes[i];
            return st[i];
        }
    }
    return TW_OK;
}
