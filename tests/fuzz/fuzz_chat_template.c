/* Compiles hostile template text and renders it with a fixed conversation,
 * under tight limits so that a template that loops or grows without bound
 * is cut off by the renderer rather than by the fuzzer's timeout. */
#include <jansson.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tw/chat_template.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static json_t *g_vars;

static const char VARS[] =
    "{\"messages\": ["
    "{\"role\": \"system\", \"content\": \"Be brief.\"},"
    "{\"role\": \"user\", \"content\": \"What is the weather in Paris?\"},"
    "{\"role\": \"assistant\", \"content\": \"\", \"tool_calls\": [{\"id\": \"c0\", \"type\": "
    "\"function\", \"function\": {\"name\": \"get_weather\", \"arguments\": {\"city\": "
    "\"Paris\"}}}]},"
    "{\"role\": \"tool\", \"tool_call_id\": \"c0\", \"content\": \"22C\"},"
    "{\"role\": \"user\", \"content\": [{\"type\": \"text\", \"text\": \"thanks\"}]}],"
    "\"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", "
    "\"description\": \"d\", \"parameters\": {\"type\": \"object\", \"properties\": "
    "{\"city\": {\"type\": \"string\"}}}}}],"
    "\"add_generation_prompt\": true, \"enable_thinking\": false,"
    "\"bos_token\": \"<s>\", \"eos_token\": \"</s>\", \"n\": 3, \"f\": 1.5, \"z\": null}";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!g_vars) {
        g_vars = json_loads(VARS, 0, NULL);
        if (!g_vars)
            abort();
    }
    char *src = malloc(size ? size : 1);
    if (!src)
        return 0;
    memcpy(src, data, size);
    tw_chat_template *t = NULL;
    tw_err err = {0};
    (void)tw_chat_template_family(src, size);
    if (tw_chat_template_compile(src, size, &t, &err) == TW_OK) {
        tw_chat_render_opts opts = {.max_output = 1 << 20,
                                    .max_memory = 64 << 20,
                                    .max_steps = 200000,
                                    .now = 1700000000};
        char *out = NULL;
        size_t len = 0;
        if (tw_chat_template_render_ex(t, g_vars, &opts, &out, &len, &err) == TW_OK) {
            if (strlen(out) > len)
                abort();
            free(out);
        }
        tw_chat_template_free(t);
    }
    free(src);
    return 0;
}
