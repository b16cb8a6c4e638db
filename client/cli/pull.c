#include "pull.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

static void sleep_ms(unsigned ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* The model named name in a ListModels reply, or NULL. */
static const Tokenwire__V1__ModelInfo *find(const Tokenwire__V1__Reply *rep, const char *name)
{
    const Tokenwire__V1__ListModelsReply *l = rep->list_models;
    for (size_t i = 0; l && i < l->n_models; i++)
        if (l->models[i]->name && strcmp(l->models[i]->name, name) == 0)
            return l->models[i];
    return NULL;
}

tw_status cli_pull(tw_client *c, const cli_pull_args *a, tw_err *err)
{
    Tokenwire__V1__LoadModelRequest m = TOKENWIRE__V1__LOAD_MODEL_REQUEST__INIT;
    m.source = (char *)a->source;
    m.name = (char *)a->name;
    m.sha256 = (char *)a->sha256;
    m.has_background = 1;
    m.background = 1;
    Tokenwire__V1__Reply *rep = NULL;
    tw_status st = tw_client_load_model(c, &m, &rep, err);
    if (st != TW_OK) {
        tw_wire_free_reply(rep);
        return st;
    }
    char name[256];
    const Tokenwire__V1__ModelInfo *mi = rep->load_model ? rep->load_model->model : NULL;
    snprintf(name, sizeof name, "%s", mi && mi->name ? mi->name : "");
    tw_wire_free_reply(rep);
    if (!name[0])
        return tw_errorf(err, TW_INTERNAL, "the engine did not name the model it loads");

    int last_pct = -1;
    for (;;) {
        st = tw_client_list_models(c, NULL, &rep, err);
        if (st != TW_OK) {
            tw_wire_free_reply(rep);
            return st;
        }
        mi = find(rep, name);
        const char *state = mi && mi->state ? mi->state : "";
        if (!mi) {
            st = tw_errorf(err, TW_NOT_FOUND, "model %s disappeared while loading", name);
        } else if (!strcmp(state, "ready")) {
            if (a->progress && last_pct >= 0)
                fputc('\n', stderr);
            printf("loaded %s (%s)\n", name, mi->architecture ? mi->architecture : "?");
        } else if (!strcmp(state, "failed")) {
            if (a->progress && last_pct >= 0)
                fputc('\n', stderr);
            st = tw_errorf(err, TW_ABORTED, "loading %s failed: %s", name,
                           mi->error && *mi->error ? mi->error : "no reason given");
        } else {
            int pct = (int)(mi->progress * 100.0f + 0.5f);
            if (a->progress && pct != last_pct) {
                fprintf(stderr, "\r%s: %d%%", name, pct);
                fflush(stderr);
                last_pct = pct;
            }
            tw_wire_free_reply(rep);
            sleep_ms(a->poll_ms ? a->poll_ms : 250);
            continue;
        }
        tw_wire_free_reply(rep);
        return st;
    }
}
