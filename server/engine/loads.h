/* LoadModel jobs: downloads (pull.h) and loads that have not reached the
 * engine yet.
 *
 * The engine only knows a model once it is loaded; while a job downloads or
 * loads, and after a background job failed, the job's entry here is what
 * ListModels shows (state "loading" with its progress, or "failed" with the
 * reason). A finished job's entry is removed; a failed background job's
 * entry stays until a new load takes its name or newer failures push it out.
 *
 * Threads: every function may be called from any thread (one mutex).
 */
#ifndef TWD_LOADS_H
#define TWD_LOADS_H

#include <stddef.h>

#include "tokenwire.pb-c.h"
#include "tw/engine.h"

typedef struct twd_loads twd_loads;
typedef struct twd_worker twd_worker;

tw_status twd_loads_create(twd_loads **out, tw_err *err);

/* No job may be running (twd_server_drain waits for them). NULL allowed. */
void twd_loads_destroy(twd_loads *t);

/* Appends to the malloc'd array *infos of *n models (from
 * tw_engine_list_models) every job entry whose name is not among them.
 * RESOURCE_EXHAUSTED leaves *infos and *n as they were. */
tw_status twd_loads_merge(twd_loads *t, tw_engine_model_info **infos, size_t *n, tw_err *err);

/* Runs LoadModel l on the calling loader thread and answers w: downloads an
 * http(s) source into the models directory first, and with l->background
 * answers at once with the model in state "loading" and goes on. Gives
 * back the job slot the caller took (twd_server.job_slots) before it
 * answers, or when a background load ends. l is borrowed for the call. */
void twd_run_load(twd_worker *w, const Tokenwire__V1__LoadModelRequest *l);

#endif
