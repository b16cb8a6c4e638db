/* Routing, authentication and the common response helpers. */
#include <stdlib.h>
#include <string.h>

#include "bridge.h"

/* Deeper nesting than any real request needs; jansson's own limit is far
 * higher and would let a body of brackets cost deep recursion later. */
#define BODY_MAX_DEPTH 64

tw_status tw_bridge_init(tw_bridge *b, const tw_bridge_config *cfg, tw_bridge_engine *engine,
                         tw_err *err)
{
    b->cfg = cfg;
    b->engine = engine;
    b->store = NULL;
    tw_bridge_metrics_init(&b->metrics);
    if (cfg->responses_store_bytes)
        return tw_bridge_resp_store_open(cfg->responses_store_bytes, &b->store, err);
    return TW_OK;
}

void tw_bridge_fini(tw_bridge *b)
{
    tw_bridge_resp_store_close(b->store);
    b->store = NULL;
}

void tw_bridge_http_resp_fini(tw_bridge_http_resp *resp)
{
    free(resp->body);
    resp->body = NULL;
    resp->body_len = 0;
}

static void resp_set_body(tw_bridge_http_resp *resp, int status, char *body)
{
    free(resp->body);
    resp->status = status;
    resp->body = body;
    resp->body_len = body ? strlen(body) : 0;
    resp->content_type = "application/json";
}

void tw_bridge_resp_json(tw_bridge_http_resp *resp, int status, json_t *j)
{
    char *text = j ? json_dumps(j, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(9))
                   : NULL;
    json_decref(j);
    if (!text) {
        /* Out of memory: a fixed body still tells the client what happened. */
        text = strdup("{\"error\":{\"message\":\"out of memory\",\"type\":\"server_error\","
                      "\"param\":null,\"code\":null}}");
        status = 500;
    }
    resp_set_body(resp, status, text);
}

void tw_bridge_resp_error(tw_bridge_http_resp *resp, const tw_bridge_apierr *ae)
{
    tw_bridge_resp_json(resp, ae->http_status, tw_bridge_apierr_json(ae));
    if (ae->http_status == 503)
        resp->retry_after_s = 1;
}

static size_t json_depth(const json_t *j, size_t limit)
{
    if (limit == 0)
        return 1;
    size_t best = 0;
    if (json_is_object(j)) {
        const char *k;
        json_t *v;
        json_object_foreach((json_t *)j, k, v) {
            size_t d = json_depth(v, limit - 1);
            if (d > best)
                best = d;
            if (best >= limit)
                break;
        }
        return best + 1;
    }
    if (json_is_array(j)) {
        size_t i;
        json_t *v;
        json_array_foreach(j, i, v) {
            size_t d = json_depth(v, limit - 1);
            if (d > best)
                best = d;
            if (best >= limit)
                break;
        }
        return best + 1;
    }
    return 0;
}

tw_status tw_bridge_parse_body(const tw_bridge_http_req *rq, json_t **out,
                               tw_bridge_apierr *ae)
{
    *out = NULL;
    if (!rq->body || rq->body_len == 0)
        return tw_bridge_fail(ae, TW_INVALID_ARGUMENT, NULL, "invalid_request_body",
                              "The request body is empty; expected a JSON object.");
    json_error_t jerr;
    /* jansson refuses invalid UTF-8 and \u0000 by default, so every string
     * handed on is valid, NUL-free text. */
    json_t *j = json_loadb(rq->body, rq->body_len, JSON_REJECT_DUPLICATES, &jerr);
    if (!j)
        return tw_bridge_fail(ae, TW_INVALID_ARGUMENT, NULL, "invalid_json",
                              "We could not parse the JSON body of your request: %s (line %d, "
                              "column %d).",
                              jerr.text, jerr.line, jerr.column);
    if (!json_is_object(j)) {
        json_decref(j);
        return tw_bridge_fail(ae, TW_INVALID_ARGUMENT, NULL, "invalid_request_body",
                              "The request body must be a JSON object.");
    }
    if (json_depth(j, BODY_MAX_DEPTH + 1) > BODY_MAX_DEPTH) {
        json_decref(j);
        return tw_bridge_fail(ae, TW_INVALID_ARGUMENT, NULL, "invalid_request_body",
                              "The request body is nested more than %d levels deep.",
                              BODY_MAX_DEPTH);
    }
    *out = j;
    return TW_OK;
}

/* M_ANY: the handler checks the method itself. */
typedef enum { M_GET, M_POST, M_ANY } route_method;

typedef struct route_match {
    tw_bridge_route route;
    route_method method;
    bool auth;
    const char *model_id; /* for /v1/models/{id} */
} route_match;

/* Finds the route of a path. Returns false for an unknown path. */
static bool find_route(const char *path, const char *method, route_match *m)
{
    static const struct {
        const char *path;
        tw_bridge_route route;
        route_method method;
        bool auth;
    } table[] = {
        {"/v1/chat/completions", TW_BRIDGE_ROUTE_CHAT, M_POST, true},
        {"/v1/completions", TW_BRIDGE_ROUTE_COMPLETIONS, M_POST, true},
        {"/v1/responses", TW_BRIDGE_ROUTE_RESPONSES, M_POST, true},
        {"/v1/embeddings", TW_BRIDGE_ROUTE_EMBEDDINGS, M_POST, true},
        {"/v1/models", TW_BRIDGE_ROUTE_MODELS, M_GET, true},
        {"/health", TW_BRIDGE_ROUTE_HEALTH, M_GET, false},
        {"/metrics", TW_BRIDGE_ROUTE_METRICS, M_GET, true},
        {"/tokenize", TW_BRIDGE_ROUTE_TOKENIZE, M_POST, true},
        {"/detokenize", TW_BRIDGE_ROUTE_DETOKENIZE, M_POST, true},
    };
    size_t plen = strlen(path);
    /* One trailing slash is tolerated ("/v1/models/"). */
    if (plen > 1 && path[plen - 1] == '/')
        plen--;
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++) {
        if (strlen(table[i].path) == plen && memcmp(table[i].path, path, plen) == 0) {
            m->route = table[i].route;
            m->method = table[i].method;
            m->auth = table[i].auth;
            m->model_id = NULL;
            return true;
        }
    }
    static const char kept_prefix[] = "/v1/responses/";
    if (plen > sizeof kept_prefix - 1 && !strncmp(path, kept_prefix, sizeof kept_prefix - 1)) {
        /* retrieve, delete, input_items, cancel */
        m->route = TW_BRIDGE_ROUTE_RESPONSES_KEPT;
        m->method = M_ANY;
        m->auth = true;
        m->model_id = NULL;
        return true;
    }
    static const char models_prefix[] = "/v1/models/";
    size_t mp = sizeof models_prefix - 1;
    if (plen > mp && strncmp(path, models_prefix, mp) == 0) {
        m->auth = true;
        /* POST /v1/models/pull loads; GET /v1/models/pull is a model named
         * "pull". Model names may contain '/' (org/name). */
        if (plen - mp == 4 && memcmp(path + mp, "pull", 4) == 0 && method &&
            strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0) {
            m->route = TW_BRIDGE_ROUTE_PULL;
            m->method = M_POST;
            m->model_id = NULL;
            return true;
        }
        m->route = TW_BRIDGE_ROUTE_MODEL;
        m->method = M_GET;
        m->model_id = path + mp;
        return true;
    }
    return false;
}

void tw_bridge_resp_bad_method(tw_bridge_http_resp *resp, const tw_bridge_http_req *rq,
                               const char *allow)
{
    tw_bridge_apierr ae;
    tw_bridge_fail_http(&ae, TW_INVALID_ARGUMENT, 405, "invalid_request_error", NULL,
                        "method_not_allowed", "Method %s is not allowed for %.200s; use %s.",
                        rq->method, rq->path, allow);
    tw_bridge_resp_error(resp, &ae);
    resp->allow = allow;
}

static void fail_resp(tw_bridge_http_resp *resp, tw_status st, int http, const char *type,
                      const char *code, const char *msg)
{
    tw_bridge_apierr ae;
    tw_bridge_fail_http(&ae, st, http, type, NULL, code, "%s", msg);
    tw_bridge_resp_error(resp, &ae);
}

void tw_bridge_handle(tw_bridge *b, const tw_bridge_http_req *rq, const tw_bridge_sink *sink,
                      tw_bridge_http_resp *resp)
{
    memset(resp, 0, sizeof *resp);
    resp->route = TW_BRIDGE_ROUTE_OTHER;
    route_match m;
    if (!find_route(rq->path, rq->method, &m)) {
        tw_bridge_apierr ae;
        tw_bridge_fail_http(&ae, TW_NOT_FOUND, 404, "invalid_request_error", NULL, "unknown_url",
                            "Unknown request URL: %s %.200s.", rq->method, rq->path);
        tw_bridge_resp_error(resp, &ae);
        return;
    }
    resp->route = m.route;
    bool is_get = !strcmp(rq->method, "GET") || !strcmp(rq->method, "HEAD");
    bool is_post = !strcmp(rq->method, "POST");
    if ((m.method == M_GET && !is_get) || (m.method == M_POST && !is_post)) {
        tw_bridge_resp_bad_method(resp, rq, m.method == M_GET ? "GET, HEAD" : "POST");
        return;
    }
    if (m.auth && !tw_bridge_config_check_auth(b->cfg, rq->authorization)) {
        fail_resp(resp, TW_UNAUTHENTICATED, 401, "invalid_request_error",
                  rq->authorization ? "invalid_api_key" : NULL,
                  rq->authorization
                      ? "Incorrect API key provided."
                      : "You didn't provide an API key. You need to provide your API key in "
                        "an Authorization header using Bearer auth (i.e. Authorization: "
                        "Bearer YOUR_KEY).");
        resp->www_authenticate = true;
        return;
    }
    if (rq->body_too_large) {
        tw_bridge_apierr ae;
        tw_bridge_fail_http(&ae, TW_RESOURCE_EXHAUSTED, 413, "invalid_request_error", NULL,
                            "request_too_large",
                            "The request body is larger than the %zu bytes this server "
                            "accepts.",
                            b->cfg->max_body_bytes);
        tw_bridge_resp_error(resp, &ae);
        return;
    }
    switch (m.route) {
    case TW_BRIDGE_ROUTE_CHAT:
        tw_bridge_ep_generate(b, TW_BRIDGE_API_CHAT, rq, sink, resp);
        break;
    case TW_BRIDGE_ROUTE_COMPLETIONS:
        tw_bridge_ep_generate(b, TW_BRIDGE_API_COMPLETION, rq, sink, resp);
        break;
    case TW_BRIDGE_ROUTE_RESPONSES:
        tw_bridge_ep_responses(b, rq, sink, resp);
        break;
    case TW_BRIDGE_ROUTE_EMBEDDINGS:
        tw_bridge_ep_embeddings(b, rq, sink, resp);
        break;
    case TW_BRIDGE_ROUTE_RESPONSES_KEPT:
        tw_bridge_ep_stored_response(b, rq, resp);
        break;
    case TW_BRIDGE_ROUTE_MODELS:
        tw_bridge_ep_models(b, NULL, resp);
        break;
    case TW_BRIDGE_ROUTE_MODEL:
        tw_bridge_ep_models(b, m.model_id, resp);
        break;
    case TW_BRIDGE_ROUTE_PULL:
        tw_bridge_ep_pull(b, rq, resp);
        break;
    case TW_BRIDGE_ROUTE_HEALTH:
        tw_bridge_ep_health(b, resp);
        break;
    case TW_BRIDGE_ROUTE_METRICS:
        tw_bridge_ep_metrics(b, resp);
        break;
    case TW_BRIDGE_ROUTE_TOKENIZE:
        tw_bridge_ep_tokenize(b, rq, resp);
        break;
    case TW_BRIDGE_ROUTE_DETOKENIZE:
        tw_bridge_ep_detokenize(b, rq, resp);
        break;
    default:
        fail_resp(resp, TW_NOT_FOUND, 404, NULL, "unknown_url", "Unknown request URL.");
        break;
    }
    resp->route = m.route;
}
