/* Run-time choice of kernel ISA. Tables are built once: scalar first, each
 * wider ISA overlaying the entries it implements on a copy of the one below,
 * so a type without a wide kernel still runs its best narrower one. */
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#include "kernels/kernels_internal.h"
#include "tw/kernels.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <cpuid.h>

/* AVX-VNNI, the VEX form of the 8-bit multiply-adds (CPUID leaf 7, sub-leaf
 * 1, EAX bit 4): Intel's cores without AVX-512 since Alder Lake and its
 * E-core Xeons have it. Read by hand, as clang 14's
 * __builtin_cpu_supports does not know the name. */
static bool cpu_has_avxvnni(void)
{
    unsigned a, b, c, d;
    if (!__get_cpuid_count(7, 1, &a, &b, &c, &d))
        return false;
    return (a >> 4) & 1u;
}
#endif

enum { ISA_SCALAR, ISA_AVX2, ISA_AVX2VNNI, ISA_AVX512, ISA_COUNT };

static const char *const isa_names[ISA_COUNT] = {"scalar", "avx2", "avx2vnni", "avx512"};

static tw_isa_table tables[ISA_COUNT];
static bool available[ISA_COUNT];
static int best = ISA_SCALAR;
static _Atomic(const tw_isa_table *) current;
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void init_tables(void)
{
    tw_isa_fill_scalar(&tables[ISA_SCALAR]);
    available[ISA_SCALAR] = true;
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
        tables[ISA_AVX2] = tables[ISA_SCALAR];
        tw_isa_fill_avx2(&tables[ISA_AVX2]);
        available[ISA_AVX2] = true;
        best = ISA_AVX2;
        if (cpu_has_avxvnni()) {
            tables[ISA_AVX2VNNI] = tables[ISA_AVX2];
            tw_isa_fill_avx2vnni(&tables[ISA_AVX2VNNI]);
            available[ISA_AVX2VNNI] = true;
            best = ISA_AVX2VNNI;
        }
        if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
            __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
            __builtin_cpu_supports("avx512vnni")) {
            tables[ISA_AVX512] = tables[ISA_AVX2];
            tw_isa_fill_avx512(&tables[ISA_AVX512]);
            available[ISA_AVX512] = true;
            best = ISA_AVX512;
        }
    }
#endif
    atomic_store(&current, &tables[best]);
}

const tw_isa_table *tw_isa_current(void)
{
    /* Fast path for the small kernels called per attention score: one
     * acquire load once the tables exist. */
    const tw_isa_table *t = atomic_load_explicit(&current, memory_order_acquire);
    if (t)
        return t;
    pthread_once(&once, init_tables);
    return atomic_load_explicit(&current, memory_order_acquire);
}

const char *tw_kernels_isa(void)
{
    return tw_isa_current()->name;
}

static int find_isa(const char *name)
{
    for (int i = 0; i < ISA_COUNT; i++)
        if (strcmp(isa_names[i], name) == 0)
            return i;
    return -1;
}

bool tw_kernels_isa_available(const char *isa)
{
    pthread_once(&once, init_tables);
    if (!isa)
        return false;
    int i = find_isa(isa);
    return i >= 0 && available[i];
}

tw_status tw_kernels_force_isa(const char *isa, tw_err *err)
{
    pthread_once(&once, init_tables);
    if (!isa || strcmp(isa, "auto") == 0) {
        atomic_store(&current, &tables[best]);
        return TW_OK;
    }
    int i = find_isa(isa);
    if (i < 0)
        return tw_errorf(
            err, TW_INVALID_ARGUMENT,
            "unknown kernel ISA '%.32s' (expected scalar, avx2, avx2vnni, avx512 or auto)", isa);
    if (!available[i])
        return tw_errorf(err, TW_FAILED_PRECONDITION, "this CPU cannot run the %s kernels",
                         isa_names[i]);
    atomic_store(&current, &tables[i]);
    return TW_OK;
}

static atomic_bool decode_prefetch;

void tw_kernels_set_decode_prefetch(bool on)
{
    atomic_store_explicit(&decode_prefetch, on, memory_order_relaxed);
}

bool tw_kernels_decode_prefetch(void)
{
    return atomic_load_explicit(&decode_prefetch, memory_order_relaxed);
}

static _Atomic int f16_prefill = TW_F16_PREFILL_TILES;

void tw_kernels_set_f16_prefill(tw_f16_prefill path)
{
    if (path != TW_F16_PREFILL_PANELS && path != TW_F16_PREFILL_BLAS)
        path = TW_F16_PREFILL_TILES;
    atomic_store_explicit(&f16_prefill, (int)path, memory_order_relaxed);
}

tw_f16_prefill tw_kernels_f16_prefill(void)
{
    return (tw_f16_prefill)atomic_load_explicit(&f16_prefill, memory_order_relaxed);
}

const char *tw_kernels_f16_prefill_name(tw_f16_prefill path)
{
    return path == TW_F16_PREFILL_PANELS ? "panels"
           : path == TW_F16_PREFILL_BLAS ? "blas"
                                         : "tiles";
}

bool tw_kernels_f16_prefill_has(tw_f16_prefill path)
{
    const tw_isa_table *t = tw_isa_current();
    const int k = tw_ktype_index(TW_TYPE_F16);
    if (path == TW_F16_PREFILL_PANELS)
        return t->panels[k] != NULL;
    if (path == TW_F16_PREFILL_BLAS)
        return true;
    return (t->prefill_tiles >> k) & 1u;
}

static _Atomic bool decode_prefetch_k = true;

void tw_kernels_set_decode_prefetch_k(bool on)
{
    atomic_store_explicit(&decode_prefetch_k, on, memory_order_relaxed);
}

bool tw_kernels_decode_prefetch_k(void)
{
    return atomic_load_explicit(&decode_prefetch_k, memory_order_relaxed);
}

/* The bytes of the run of rows this thread's kernel calls are pieces of
 * (tw_decode_stream), 0 outside one. */
static _Thread_local size_t stream_bytes;

void tw_decode_stream(size_t bytes)
{
    stream_bytes = bytes;
}

bool tw_decode_prefetch_for(size_t bytes)
{
    if (stream_bytes > bytes)
        bytes = stream_bytes;
    return bytes >= TW_DECODE_PREFETCH_MIN_BYTES && tw_kernels_decode_prefetch();
}

float tw_dot_f32(const float *a, const float *b, size_t n)
{
    return tw_isa_current()->dot_f32(a, b, n);
}

void tw_dot_rows_f32(const float *q, const float *K, size_t n, size_t d, float *out)
{
    tw_isa_current()->dot_rows_multi_f32(q, 0, 1, K, n, d, out, 0);
}

void tw_axpy_rows_f32(const float *p, const float *V, size_t n, size_t d, float *acc)
{
    tw_isa_current()->axpy_rows_multi_f32(p, 0, 1, V, n, d, acc, 0);
}

void tw_dot_rows_multi_f32(const float *q, size_t q_stride, size_t nq, const float *K, size_t n,
                           size_t d, float *out, size_t out_stride)
{
    tw_isa_current()->dot_rows_multi_f32(q, q_stride, nq, K, n, d, out, out_stride);
}

void tw_axpy_rows_multi_f32(const float *p, size_t p_stride, size_t nq, const float *V, size_t n,
                            size_t d, float *acc, size_t acc_stride)
{
    tw_isa_current()->axpy_rows_multi_f32(p, p_stride, nq, V, n, d, acc, acc_stride);
}

void tw_dot_rows_multi_h16(const float *q, size_t q_stride, size_t nq, const uint16_t *K, size_t n,
                           size_t d, float *out, size_t out_stride)
{
    tw_isa_current()->dot_rows_multi_h16(q, q_stride, nq, K, n, d, out, out_stride);
}

void tw_axpy_rows_multi_h16(const float *p, size_t p_stride, size_t nq, const uint16_t *V,
                            size_t n, size_t d, float *acc, size_t acc_stride)
{
    tw_isa_current()->axpy_rows_multi_h16(p, p_stride, nq, V, n, d, acc, acc_stride);
}

float tw_scale_max_f32(float *x, size_t n, float scale)
{
    return tw_isa_current()->scale_max_f32(x, n, scale);
}

size_t tw_argmax_f32(float *x, size_t n)
{
    return tw_isa_current()->argmax_f32(x, n);
}

float tw_exp_shift_f32(float *x, size_t n, float mx)
{
    return tw_isa_current()->exp_shift_f32(x, n, mx);
}

void tw_silu_mul_f32(float *g, const float *u, size_t n)
{
    tw_isa_current()->silu_mul_f32(g, u, n);
}

void tw_silu_f32(float *x, size_t n)
{
    tw_isa_current()->silu_f32(x, n);
}

void tw_delta_rule_f32(float *S, const float *src, const float *q, const float *k,
                       const float *v, float decay, float beta, size_t dk, size_t dv,
                       float *mem, float *out)
{
    tw_isa_current()->delta_rule_f32(S, src, q, k, v, decay, beta, dk, dv, mem, out);
}
