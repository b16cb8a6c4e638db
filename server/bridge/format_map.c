/* The answer's format from an OpenAI request: response_format (text,
 * json_object, json_schema), and vLLM's guided_json and guided_choice,
 * which the SDKs send through extra_body. Which schema keywords are
 * understood is the engine's business: it refuses the others by name. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json_field.h"
#include "request_map.h"

/* OpenAI's rule for a response format's name: 1 to 64 of [a-zA-Z0-9_-]. */
static bool format_name_valid(const char *s, size_t n)
{
    if (n == 0 || n > 64)
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '-'))
            return false;
    }
    return true;
}

/* Keeps a schema's text (dump, malloc'd and freed here; NULL: out of
 * memory) in the request's arena for the Generate, within the engine's
 * limit. */
static tw_status keep_schema(tw_bridge_gen_request *r, char *dump, const char *param,
                             tw_bridge_apierr *ae)
{
    if (!dump)
        return tw_bridge_fail_no_memory(ae);
    size_t len = strlen(dump);
    if (len > TW_BRIDGE_MAX_JSON_SCHEMA) {
        free(dump);
        return tw_bridge_fail(ae, TW_INVALID_ARGUMENT, param, "invalid_value",
                              "Invalid '%s': the schema is %zu bytes as compact JSON, more than "
                              "the limit of %u.",
                              param, len, TW_BRIDGE_MAX_JSON_SCHEMA);
    }
    r->format.json_schema = tw_bridge_arena_strndup(&r->arena, dump, len);
    free(dump);
    return r->format.json_schema ? TW_OK : tw_bridge_fail_no_memory(ae);
}

/* response_format.json_schema: {name, schema, strict, description}. Only
 * the schema reaches the engine (as compact JSON text in the arena); the
 * rest is checked as OpenAI checks it, so that a request this server takes
 * is one OpenAI would take too. Which schema keywords are understood is the
 * engine's business: it refuses the others by name. */
static tw_status map_json_schema(const json_t *rf, tw_bridge_gen_request *r, tw_bridge_apierr *ae)
{
    json_t *js = NULL;
    int got =
        tw_bridge_get_typed(rf, "json_schema", "response_format.json_schema", JSON_OBJECT, &js, ae);
    if (got < 0)
        return TW_INVALID_ARGUMENT;
    if (got == 0)
        return tw_bridge_fail_missing(ae, "response_format.json_schema");
    const char *name = NULL;
    size_t len = 0;
    got = tw_bridge_get_string(js, "name", "response_format.json_schema.name", 64, &name, &len, ae);
    if (got < 0)
        return TW_INVALID_ARGUMENT;
    if (got == 0)
        return tw_bridge_fail_missing(ae, "response_format.json_schema.name");
    if (!format_name_valid(name, len))
        return tw_bridge_fail(ae, TW_INVALID_ARGUMENT, "response_format.json_schema.name",
                              "invalid_value",
                              "Invalid 'response_format.json_schema.name': '%.64s' does not "
                              "match '^[a-zA-Z0-9_-]{1,64}$'.",
                              name);
    const char *description = NULL;
    if (tw_bridge_get_string(js, "description", "response_format.json_schema.description",
                             (size_t)-1 / 4, &description, NULL, ae) < 0)
        return TW_INVALID_ARGUMENT;
    bool strict;
    if (tw_bridge_get_bool(js, "strict", "response_format.json_schema.strict", &strict, ae) < 0)
        return TW_INVALID_ARGUMENT;
    json_t *schema = NULL;
    got = tw_bridge_get_typed(js, "schema", "response_format.json_schema.schema", JSON_OBJECT,
                              &schema, ae);
    if (got <= 0)
        return got < 0 ? TW_INVALID_ARGUMENT : TW_OK; /* no schema: any JSON object */
    return keep_schema(r, json_dumps(schema, JSON_COMPACT | JSON_PRESERVE_ORDER),
                       "response_format.json_schema.schema", ae);
}

/* response_format: "text" asks for nothing; "json_object" and
 * "json_schema" make the engine constrain the answer to a JSON document. */
static tw_status map_response_format(const json_t *root, tw_bridge_gen_request *r,
                                     tw_bridge_apierr *ae)
{
    json_t *rf = NULL;
    int got = tw_bridge_get_typed(root, "response_format", NULL, JSON_OBJECT, &rf, ae);
    if (got <= 0)
        return got < 0 ? TW_INVALID_ARGUMENT : TW_OK;
    const char *type = NULL;
    got = tw_bridge_get_string(rf, "type", "response_format.type", 64, &type, NULL, ae);
    if (got < 0)
        return TW_INVALID_ARGUMENT;
    if (got == 0)
        return tw_bridge_fail_missing(ae, "response_format.type");
    if (strcmp(type, "text") == 0)
        return TW_OK;
    bool with_schema = strcmp(type, "json_schema") == 0;
    if (!with_schema && strcmp(type, "json_object") != 0)
        return tw_bridge_fail(ae, TW_INVALID_ARGUMENT, "response_format.type", "invalid_value",
                              "Invalid value for 'response_format.type': expected 'text', "
                              "'json_object' or 'json_schema', but got '%.64s'.",
                              type);
    tw_status st;
    if (with_schema && (st = map_json_schema(rf, r, ae)) != TW_OK)
        return st;
    r->format.has_kind = 1;
    r->format.kind = TOKENWIRE__V1__OUTPUT_KIND__OUTPUT_JSON;
    r->gen.format = &r->format;
    return TW_OK;
}

/* guided_json: a schema (object, or its text) the answer must fit. */
static tw_status map_guided_json(const json_t *g, tw_bridge_gen_request *r, tw_bridge_apierr *ae)
{
    char *dump = json_is_string(g) ? strdup(json_string_value(g))
                                   : json_dumps(g, JSON_COMPACT | JSON_PRESERVE_ORDER);
    tw_status st = keep_schema(r, dump, "guided_json", ae);
    if (st != TW_OK)
        return st;
    r->format.has_kind = 1;
    r->format.kind = TOKENWIRE__V1__OUTPUT_KIND__OUTPUT_JSON;
    return TW_OK;
}

/* guided_choice: the answer is exactly one of these strings. */
static tw_status map_guided_choice(const json_t *g, tw_bridge_gen_request *r,
                                   tw_bridge_apierr *ae)
{
    size_t n = json_array_size(g);
    if (n == 0 || n > TW_BRIDGE_MAX_CHOICES)
        return tw_bridge_fail(ae, TW_INVALID_ARGUMENT, "guided_choice", "invalid_value",
                              "Invalid 'guided_choice': expected 1 to %d strings.",
                              TW_BRIDGE_MAX_CHOICES);
    char **choices = tw_bridge_arena_array(&r->arena, n, sizeof *choices);
    if (!choices)
        return tw_bridge_fail_no_memory(ae);
    for (size_t i = 0; i < n; i++) {
        const json_t *c = json_array_get(g, i);
        size_t len = json_string_length(c);
        if (!json_is_string(c) || len == 0 || len > TW_BRIDGE_MAX_CHOICE_BYTES ||
            memchr(json_string_value(c), 0, len))
            return tw_bridge_fail(ae, TW_INVALID_ARGUMENT, "guided_choice", "invalid_value",
                                  "Invalid 'guided_choice[%zu]': expected a non-empty string of "
                                  "at most %d bytes.",
                                  i, TW_BRIDGE_MAX_CHOICE_BYTES);
        choices[i] = tw_bridge_arena_strndup(&r->arena, json_string_value(c), len);
        if (!choices[i])
            return tw_bridge_fail_no_memory(ae);
    }
    r->format.has_kind = 1;
    r->format.kind = TOKENWIRE__V1__OUTPUT_KIND__OUTPUT_CHOICE;
    r->format.choices = choices;
    r->format.n_choices = n;
    return TW_OK;
}

tw_status tw_bridge_map_format(const json_t *root, tw_bridge_gen_request *r,
                               tw_bridge_apierr *ae)
{
    tw_status st = map_response_format(root, r, ae);
    if (st != TW_OK)
        return st;
    const json_t *gj = json_object_get(root, "guided_json");
    const json_t *gc = json_object_get(root, "guided_choice");
    gj = json_is_null(gj) ? NULL : gj;
    gc = json_is_null(gc) ? NULL : gc;
    if (!gj && !gc)
        return TW_OK;
    if ((gj && gc) || r->gen.format)
        return tw_bridge_fail(ae, TW_INVALID_ARGUMENT, gc ? "guided_choice" : "guided_json",
                              "invalid_value",
                              "Only one of 'response_format' (json), 'guided_json' and "
                              "'guided_choice' may be given.");
    if (gj && !json_is_object(gj) && !json_is_string(gj))
        return tw_bridge_fail(ae, TW_INVALID_ARGUMENT, "guided_json", "invalid_type",
                              "Invalid type for 'guided_json': expected an object or a string.");
    if (gc && !json_is_array(gc))
        return tw_bridge_fail(ae, TW_INVALID_ARGUMENT, "guided_choice", "invalid_type",
                              "Invalid type for 'guided_choice': expected an array of strings.");
    st = gj ? map_guided_json(gj, r, ae) : map_guided_choice(gc, r, ae);
    if (st == TW_OK)
        r->gen.format = &r->format;
    return st;
}
