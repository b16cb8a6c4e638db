/* Loads tokenwired's configuration from a hostile INI file and a hostile
 * command line. The input holds the INI text, a marker, then one argument
 * per line. */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_ARGS 32

static char g_path[64];

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!g_path[0]) {
        unsetenv("TOKENWIRE_API_KEY");
        snprintf(g_path, sizeof g_path, "/tmp/tw-fuzz-twd-%ld.ini", (long)getpid());
    }
    const uint8_t *ini, *args;
    size_t ini_len, args_len;
    fuzz_split(data, size, "\n%%ARGS%%\n", &ini, &ini_len, &args, &args_len);
    FILE *f = fopen(g_path, "wb");
    if (!f)
        return 0;
    fwrite(ini, 1, ini_len, f);
    fclose(f);

    /* every argument is its own exact-size allocation */
    char *argv[MAX_ARGS + 4] = {0};
    int argc = 0;
    argv[argc++] = strdup("tokenwired");
    argv[argc++] = strdup("--config");
    argv[argc++] = strdup(g_path);
    size_t start = 0;
    for (size_t i = 0; i <= args_len && argc < MAX_ARGS + 3; i++) {
        if (i == args_len || args[i] == '\n') {
            argv[argc++] = strndup((const char *)args + start, i - start);
            start = i + 1;
        }
    }
    twd_config cfg;
    twd_config_defaults(&cfg);
    tw_err err = {0};
    (void)twd_config_load(&cfg, argc, argv, &err);
    twd_config_free(&cfg);
    for (int i = 0; i < argc; i++)
        free(argv[i]);
    return 0;
}
