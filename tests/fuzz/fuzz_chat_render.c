/* Renders the real chat templates of the reference data with hostile JSON
 * variables: the conversation a client sends reaches the template as is.
 * The first byte picks the template. */
#include <jansson.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_util.h"
#include "tw/chat_template.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char *const NAMES[] = {
    "chat/Qwen-Qwen2.5-7B-Instruct.jinja",  "chat/Qwen-Qwen3-0.6B.jinja",
    "chat/google-gemma-2-2b-it.jinja",      "chat/meta-llama-Llama-3.1-8B-Instruct.jinja",
    "chat/mistralai-Mistral-Nemo-Instruct-2407.jinja",
};
#define N_T (sizeof NAMES / sizeof NAMES[0])
static tw_chat_template *g_t[N_T + 1];

static void load_once(void)
{
    static int done;
    if (done)
        return;
    done = 1;
    tw_err err = {0};
    for (size_t i = 0; i < N_T; i++) {
        char path[4096];
        size_t len = 0;
        char *src = fuzz_read_file(fuzz_shared_path(path, sizeof path, NAMES[i]), &len);
        if (!src || tw_chat_template_compile(src, len, &g_t[i], &err) != TW_OK) {
            fprintf(stderr, "fuzz_chat_render: cannot load %s: %s\n", path, err.msg);
            abort();
        }
        free(src);
    }
    const char *chatml = tw_chat_template_chatml();
    if (tw_chat_template_compile(chatml, strlen(chatml), &g_t[N_T], &err) != TW_OK)
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    load_once();
    if (size < 1)
        return 0;
    const tw_chat_template *t = g_t[data[0] % (N_T + 1)];
    json_t *vars = json_loadb((const char *)data + 1, size - 1, 0, NULL);
    if (!vars)
        return 0;
    tw_chat_render_opts opts = {.max_output = 1 << 20,
                                .max_memory = 64 << 20,
                                .max_steps = 200000,
                                .now = 1700000000};
    char *out = NULL;
    size_t len = 0;
    tw_err err = {0};
    if (tw_chat_template_render_ex(t, vars, &opts, &out, &len, &err) == TW_OK)
        free(out);
    json_decref(vars);
    return 0;
}
