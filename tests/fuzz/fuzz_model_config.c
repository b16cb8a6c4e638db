/* Parses hostile JSON text as a Hugging Face config.json, as the model
 * loader does before it sizes anything. */
#include <jansson.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "model/config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    json_error_t jerr;
    json_t *root = json_loadb((const char *)data, size, JSON_REJECT_DUPLICATES, &jerr);
    if (!root)
        return 0;
    tw_mconfig *cfg = malloc(sizeof *cfg);
    if (cfg) {
        tw_err err = {0};
        (void)tw_mconfig_parse(root, cfg, &err);
        free(cfg);
    }
    json_decref(root);
    return 0;
}
