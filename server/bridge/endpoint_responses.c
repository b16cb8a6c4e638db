/* POST /v1/responses, and the responses it keeps: GET and DELETE
 * /v1/responses/{id}, GET /v1/responses/{id}/input_items, POST
 * /v1/responses/{id}/cancel. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bridge.h"
#include "responses_map.h"

#define LIST_DEFAULT 20
#define LIST_MAX     100

static tw_status no_store(tw_bridge_apierr *ae, const char *param)
{
    return tw_bridge_fail_http(ae, TW_INVALID_ARGUMENT, param ? 400 : 404, NULL, param,
                               param ? "unsupported_parameter" : "not_found",
                               "This server keeps no responses (it runs with "
                               "--responses-store-mb 0); send the whole conversation as "
                               "'input'.");
}

static tw_status not_kept(tw_bridge_apierr *ae, const char *param, const char *id)
{
    return tw_bridge_fail_http(ae, TW_NOT_FOUND, 404, NULL, param,
                               param ? "previous_response_not_found" : "not_found",
                               "%s response with id '%.64s' not found: it was never kept "
                               "(store: false), was deleted, was made with another API key, "
                               "or was dropped to keep the store within its size "
                               "(--responses-store-mb).",
                               param ? "Previous" : "A", id);
}

/* The conversation a request goes on from: the kept response's input items
 * and its output. */
static tw_status conversation_of(tw_bridge *b, const unsigned char owner[32], const char *id,
                                 json_t **out, tw_bridge_apierr *ae)
{
    *out = NULL;
    if (!b->store)
        return no_store(ae, "previous_response_id");
    json_t *response, *items;
    if (!tw_bridge_resp_store_get(b->store, owner, id, &response, &items))
        return not_kept(ae, "previous_response_id", id);
    *out = tw_bridge_responses_conversation(items, response);
    json_decref(response);
    json_decref(items);
    return *out ? TW_OK : tw_bridge_fail_no_memory(ae);
}

typedef struct keeping {
    tw_bridge *b;
    const unsigned char *owner;
    const json_t *items;
} keeping;

static void keep_response(void *user, const json_t *response)
{
    keeping *k = user;
    if (!tw_bridge_resp_store_put(k->b->store, k->owner, response, k->items) && !k->b->cfg->quiet)
        fprintf(stderr,
                "tokenwire-bridge: response %s not kept: larger than the store "
                "(--responses-store-mb) or out of memory\n",
                json_string_value(json_object_get(response, "id")));
}

void tw_bridge_ep_responses(tw_bridge *b, const tw_bridge_http_req *rq, const tw_bridge_sink *sink,
                            tw_bridge_http_resp *resp)
{
    json_t *root = NULL, *chat = NULL, *prior = NULL, *items = NULL;
    tw_bridge_apierr ae;
    tw_bridge_gen_request g;
    memset(&g, 0, sizeof g);
    unsigned char owner[32];
    tw_bridge_config_owner(b->cfg, rq->authorization, owner);
    const char *previous = NULL;
    tw_status st = tw_bridge_parse_body(rq, &root, &ae);
    if (st == TW_OK && tw_bridge_responses_previous(root, &previous, &ae) < 0)
        st = TW_INVALID_ARGUMENT;
    if (st == TW_OK && previous)
        st = conversation_of(b, owner, previous, &prior, &ae);
    if (st == TW_OK)
        st = tw_bridge_responses_to_chat(root, prior, &chat, &ae);
    if (st == TW_OK)
        st = tw_bridge_map_chat_request(chat, &g, &ae);
    char id[48];
    const bool store = b->store && !json_is_false(json_object_get(root, "store"));
    if (st == TW_OK) {
        tw_bridge_new_id(id, sizeof id, "resp_");
        if (store && !(items = tw_bridge_responses_context(prior, root, id)))
            st = tw_bridge_fail_no_memory(&ae);
    }
    if (st == TW_OK) {
        keeping k = {.b = b, .owner = owner, .items = items};
        tw_bridge_resp_echo echo = {.request = root,
                                    .id = id,
                                    .created_at = (long long)time(NULL),
                                    .store = store,
                                    .keep = store ? keep_response : NULL,
                                    .keep_user = &k};
        tw_bridge_answer_response(b, &g, &echo, sink, resp);
    } else {
        tw_bridge_resp_error(resp, &ae);
    }
    tw_bridge_gen_request_fini(&g);
    json_decref(items);
    json_decref(prior);
    json_decref(chat);
    json_decref(root);
}

/* ------------------------------------------------------ kept responses */

static int hex_digit(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    c = (char)tolower((unsigned char)c);
    return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* Decodes n bytes of a query component (%XX and '+') into out (cap bytes).
 * False when it is malformed or does not fit. */
static bool query_decode(const char *s, size_t n, char *out, size_t cap)
{
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (c == '+') {
            c = ' ';
        } else if (c == '%') {
            if (i + 2 >= n)
                return false;
            int hi = hex_digit(s[i + 1]), lo = hex_digit(s[i + 2]);
            if (hi < 0 || lo < 0 || (hi | lo) == 0)
                return false;
            c = (char)(hi << 4 | lo);
            i += 2;
        }
        if (o + 1 >= cap)
            return false;
        out[o++] = c;
    }
    out[o] = '\0';
    return true;
}

typedef struct list_query {
    long long limit;
    bool ascending;
    char after[TW_BRIDGE_RESP_ID_MAX * 2 + 1];
    bool stream;
} list_query;

/* limit, order and after (input_items); stream (retrieve). Other
 * parameters (include) are accepted and change nothing here. */
static tw_status parse_query(const char *query, list_query *q, tw_bridge_apierr *ae)
{
    q->limit = LIST_DEFAULT;
    q->ascending = false;
    q->after[0] = '\0';
    q->stream = false;
    for (const char *p = query; p && *p;) {
        size_t n = strcspn(p, "&");
        size_t klen = strcspn(p, "=");
        if (klen > n)
            klen = n;
        char key[32], value[256];
        const bool eq = klen < n;
        if (!query_decode(p, klen, key, sizeof key))
            key[0] = '\0'; /* a name no parameter has */
        if (!query_decode(eq ? p + klen + 1 : p + n, eq ? n - klen - 1 : 0, value, sizeof value))
            return tw_bridge_fail(ae, TW_INVALID_ARGUMENT, key[0] ? key : NULL, "invalid_value",
                                  "A query parameter's value is malformed or longer than %zu "
                                  "bytes.",
                                  sizeof value - 1);
        if (!strcmp(key, "limit")) {
            char *end;
            q->limit = strtoll(value, &end, 10);
            if (!value[0] || *end || q->limit < 1 || q->limit > LIST_MAX)
                return tw_bridge_fail(ae, TW_INVALID_ARGUMENT, "limit", "invalid_value",
                                      "'limit' must be an integer from 1 to %d, not '%.32s'.",
                                      LIST_MAX, value);
        } else if (!strcmp(key, "order")) {
            if (strcmp(value, "asc") && strcmp(value, "desc"))
                return tw_bridge_fail(ae, TW_INVALID_ARGUMENT, "order", "invalid_value",
                                      "'order' must be 'asc' or 'desc', not '%.32s'.", value);
            q->ascending = !strcmp(value, "asc");
        } else if (!strcmp(key, "after")) {
            if (strlen(value) >= sizeof q->after)
                return tw_bridge_fail(ae, TW_INVALID_ARGUMENT, "after", "invalid_value",
                                      "'after' is longer than any item id.");
            memcpy(q->after, value, strlen(value) + 1);
        } else if (!strcmp(key, "stream")) {
            q->stream = !strcmp(value, "true") || !strcmp(value, "1");
        }
        p += n + (p[n] == '&');
    }
    return TW_OK;
}

/* One page of a response's input items, as OpenAI lists them. */
static tw_status list_page(const json_t *items, const list_query *q, json_t **out,
                           tw_bridge_apierr *ae)
{
    size_t n = json_array_size(items), at = 0;
    /* the k-th item in the order asked for */
#define NTH(k) json_array_get(items, q->ascending ? (k) : n - 1 - (k))
    if (q->after[0]) {
        while (at < n) {
            const char *item_id = json_string_value(json_object_get(NTH(at), "id"));
            if (item_id && !strcmp(item_id, q->after))
                break;
            at++;
        }
        if (at == n)
            return tw_bridge_fail(ae, TW_INVALID_ARGUMENT, "after", "invalid_value",
                                  "No input item with id '%.128s' in this response.", q->after);
        at++;
    }
    json_t *data = json_array();
    size_t end = at + (size_t)q->limit < n ? at + (size_t)q->limit : n;
    int bad = !data;
    for (size_t k = at; !bad && k < end; k++)
        bad |= json_array_append(data, NTH(k));
    const json_t *first = json_object_get(json_array_get(data, 0), "id");
    const json_t *last = json_object_get(json_array_get(data, json_array_size(data) - 1), "id");
#undef NTH
    *out = bad ? NULL
               : json_pack("{s:s, s:O, s:O?, s:O?, s:b}", "object", "list", "data", data,
                           "first_id", first, "last_id", last, "has_more", end < n);
    json_decref(data);
    return *out ? TW_OK : tw_bridge_fail_no_memory(ae);
}

void tw_bridge_ep_stored_response(tw_bridge *b, const tw_bridge_http_req *rq,
                                  tw_bridge_http_resp *resp)
{
    static const char prefix[] = "/v1/responses/";
    const char *tail = rq->path + sizeof prefix - 1;
    size_t id_len = strcspn(tail, "/");
    char id[TW_BRIDGE_RESP_ID_MAX + 1] = "";
    if (id_len <= TW_BRIDGE_RESP_ID_MAX)
        memcpy(id, tail, id_len), id[id_len] = '\0';
    const char *sub = tail + id_len + (tail[id_len] == '/');
    size_t sub_len = strlen(sub);
    if (sub_len && sub[sub_len - 1] == '/')
        sub_len--;
    const bool get = !strcmp(rq->method, "GET") || !strcmp(rq->method, "HEAD");
    const bool del = !strcmp(rq->method, "DELETE"), post = !strcmp(rq->method, "POST");
    enum { WHOLE, ITEMS, CANCEL } what;
    if (sub_len == 0)
        what = WHOLE;
    else if (sub_len == 11 && !strncmp(sub, "input_items", 11))
        what = ITEMS;
    else if (sub_len == 6 && !strncmp(sub, "cancel", 6))
        what = CANCEL;
    else {
        tw_bridge_apierr ae;
        tw_bridge_fail_http(&ae, TW_NOT_FOUND, 404, NULL, NULL, "unknown_url",
                            "Unknown request URL: %s %.200s.", rq->method, rq->path);
        tw_bridge_resp_error(resp, &ae);
        return;
    }
    const char *allow = what == WHOLE ? "GET, HEAD, DELETE" : what == ITEMS ? "GET, HEAD" : "POST";
    if ((what == WHOLE && !get && !del) || (what == ITEMS && !get) || (what == CANCEL && !post)) {
        tw_bridge_resp_bad_method(resp, rq, allow);
        return;
    }

    tw_bridge_apierr ae;
    list_query q;
    unsigned char owner[32];
    tw_bridge_config_owner(b->cfg, rq->authorization, owner);
    json_t *response = NULL, *items = NULL, *out = NULL;
    tw_status st = parse_query(rq->query, &q, &ae);
    if (st == TW_OK && !b->store)
        st = no_store(&ae, NULL);
    else if (st == TW_OK && q.stream)
        st = tw_bridge_fail(&ae, TW_INVALID_ARGUMENT, "stream", "unsupported_parameter",
                            "Streaming a kept response again is not supported; read it whole.");
    else if (st == TW_OK && del)
        st = tw_bridge_resp_store_delete(b->store, owner, id) ? TW_OK : not_kept(&ae, NULL, id);
    else if (st == TW_OK && !tw_bridge_resp_store_get(b->store, owner, id, &response,
                                                      what == ITEMS ? &items : NULL))
        st = not_kept(&ae, NULL, id);
    if (st == TW_OK && del) {
        out = json_pack("{s:s, s:s, s:b}", "id", id, "object", "response", "deleted", 1);
        st = out ? TW_OK : tw_bridge_fail_no_memory(&ae);
    } else if (st == TW_OK && what == WHOLE) {
        out = json_incref(response);
    } else if (st == TW_OK && what == ITEMS) {
        st = list_page(items, &q, &out, &ae);
    } else if (st == TW_OK) {
        st = tw_bridge_fail(&ae, TW_INVALID_ARGUMENT, NULL, "invalid_request",
                            "Only responses made with background: true can be cancelled; "
                            "this one was answered when it was made.");
    }
    if (st == TW_OK)
        tw_bridge_resp_json(resp, 200, out);
    else
        tw_bridge_resp_error(resp, &ae);
    json_decref(response);
    json_decref(items);
}
