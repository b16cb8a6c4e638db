/* tokenwire pull: LoadModel of a URL (or path) in the background, then
 * ListModels polled until the model is ready or failed. */
#ifndef TW_CLI_PULL_H
#define TW_CLI_PULL_H

#include <stdbool.h>

#include "tokenwire/client.h"

typedef struct cli_pull_args {
    const char *source;
    const char *name;   /* NULL: the engine derives one */
    const char *sha256; /* NULL: not checked */
    bool progress;      /* print the progress on stderr while waiting */
    unsigned poll_ms;
} cli_pull_args;

/* Starts the load and waits for its end, printing "loaded NAME (ARCH)" on
 * stdout. Returns the engine's code (the failure reason in err); a model
 * that fails in the background gives ABORTED with its reason. */
tw_status cli_pull(tw_client *c, const cli_pull_args *a, tw_err *err);

#endif
