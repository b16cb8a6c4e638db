/* tokenwired's configuration: defaults, an INI file, the environment and the
 * command line, in rising precedence. Every INI key is also a long option of
 * the same name (dashes and underscores are interchangeable in the file; the
 * section a key sits in does not matter).
 */
#ifndef TWD_CONFIG_H
#define TWD_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tw/model.h"
#include "tw/status.h"

#define TWD_DEFAULT_LISTEN "tcp://127.0.0.1:7470"
#define TWD_DEFAULT_PUBLISH "tcp://127.0.0.1:7471"
#define TWD_MAX_LISTEN 8
#define TWD_MAX_MODELS 16
#define TWD_MAX_API_KEYS 16

typedef struct twd_model_spec {
    char *path;
    char *name; /* NULL: derived from the path */
    char *draft; /* draft model for speculative decoding; NULL: none */
    char *chat_template; /* template file in place of the model's; NULL: its own */
} twd_model_spec;

/* --isa: the kernels' instruction set, the widest the CPU has or a
 * narrower one. */
typedef enum twd_isa {
    TWD_ISA_AUTO = 0,
    TWD_ISA_SCALAR,
    TWD_ISA_AVX2,
    TWD_ISA_AVX2VNNI,
    TWD_ISA_AVX512
} twd_isa;

/* Its name for tw_kernels_force_isa ("auto" for TWD_ISA_AUTO). */
const char *twd_isa_name(twd_isa isa);

/* --decode-prefetch: measured at start, or set. */
typedef enum twd_prefetch { TWD_PREFETCH_AUTO = 0, TWD_PREFETCH_ON, TWD_PREFETCH_OFF } twd_prefetch;

/* --f16-prefill (F16 and BF16 prompts): measured at start, or set. */
typedef enum twd_f16_prefill {
    TWD_F16_PREFILL_AUTO = 0,
    TWD_F16_PREFILL_TILES,
    TWD_F16_PREFILL_PANELS,
    TWD_F16_PREFILL_BLAS
} twd_f16_prefill;

typedef struct twd_config {
    twd_model_spec models[TWD_MAX_MODELS];
    size_t n_models;
    char *listen[TWD_MAX_LISTEN];
    size_t n_listen;
    char *publish;
    uint32_t threads; /* 0 ("auto"): one per physical core (tw_hw_choose) */
    uint32_t max_batch;     /* 0: chosen from the hardware */
    uint32_t prefill_chunk; /* 0: chosen from the hardware */
    bool mlock;             /* lock weights (all mappings) in RAM after loading */
    uint64_t cache_bytes;   /* in-memory prefix cache per model; 0: engine default */
    char *state_dir;        /* persistent state store; NULL: engine default */
    uint64_t state_bytes;   /* 0: engine default */
    uint32_t state_entries; /* 0: engine default */
    bool no_state_store;
    uint64_t kv_budget_bytes;      /* sequence memory budget; 0: derived by the engine */
    bool no_long_context_thinking; /* --long-context-thinking off */
    bool prefix_cache_copy;        /* --prefix-cache-pages copy */
    tw_weight_pages weight_pages;  /* --weight-pages */
    tw_kv_type kv_type;            /* --kv-type */
    tw_type quantize;              /* --quantize (TW_TYPE_F32: none) */
    twd_isa isa;                   /* --isa */
    twd_prefetch decode_prefetch;  /* --decode-prefetch */
    twd_f16_prefill f16_prefill;   /* --f16-prefill */
    bool fetch_ahead_set;          /* --fetch-ahead-bytes given (not "auto") */
    uint64_t fetch_ahead_bytes;    /* its bytes; 0: off */
    uint32_t long_context_chars;   /* 0: engine default (3000) */
    uint32_t short_question_chars; /* 0: engine default (200) */
    char *api_keys[TWD_MAX_API_KEYS];
    size_t n_api_keys;
    char *tls_cert; /* PEM files for tls+tcp:// listeners */
    char *tls_key;
    char *models_dir;
    uint64_t max_download_bytes; /* largest model download accepted; 0: no limit */
    size_t max_message_bytes;
    uint32_t max_prompt_tokens;
    uint32_t max_concurrent;      /* generations running or queued at once */
    uint32_t default_deadline_ms; /* applied when a request sets none; 0: none */
    uint32_t stream_grace_ms;     /* how long a finished stream stays resumable */
    size_t max_stream_bytes;      /* chunks kept per stream before the oldest expire */
    uint32_t max_streams;         /* streams kept at once */
    uint32_t rpc_contexts;        /* REP contexts (requests served at once) */
    uint32_t max_resume_wait_ms;
    bool verbose;
    bool help;
    bool version;
} twd_config;

/* Fills cfg with the defaults (no allocation). */
void twd_config_defaults(twd_config *cfg);

/* Builds cfg from argv (and the --config file and the environment it
 * names). INVALID_ARGUMENT names the bad option, file line or value. On
 * failure cfg is left valid for twd_config_free. */
tw_status twd_config_load(twd_config *cfg, int argc, char **argv, tw_err *err);

void twd_config_free(twd_config *cfg);

/* Writes the usage text to f (a FILE *). */
void twd_config_usage(void *f, const char *prog);

#endif
