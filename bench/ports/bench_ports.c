/* tw-bench-ports: how many of the instructions the AVX2 kernels are made of
 * this core retires per cycle, alone and mixed. The kernels' speed comes
 * down to a few shared resources (the vector pipes that multiply, the
 * other vector pipes, the load ports), and these loops tell which ones an
 * instruction uses: two instructions that share a resource mixed 1:1 run
 * no faster than either alone. Each loop is 16 independent instructions
 * on fixed registers, so only throughput limits it; the clock comes from
 * a chain of dependent scalar adds of a register, one cycle each, timed the
 * same way. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#if defined(__x86_64__)

#define ITERS 20000000L

static _Alignas(64) uint8_t buf[4096];

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ymm0..ymm11 take results in turn; ymm12..ymm15 are inputs only. */
#define R(n)           "%%ymm" #n
#define V(op, a, b, d) op " " R(a) ", " R(b) ", " R(d) "\n"
#define MADDUBS(d)     V("vpmaddubsw", 15, 14, d)
#define MADDWD(d)      V("vpmaddwd", 15, 14, d)
#define SIGNB(d)       V("vpsignb", 15, 14, d)
#define FMA(d)         V("vfmadd231ps", 15, 14, d)
#define ADDW(d)        V("vpaddw", 15, 14, d)
#define SHUFD(d)       "vpshufd $0x55, " R(14) ", " R(d) "\n"
#define BCAST(d)       "vpbroadcastd " #d "*4(%1), " R(d) "\n"
#define LOAD(d)        "vmovdqa " #d "*32(%1), " R(d) "\n"
/* one cycle each, as every add waits for the one before; a register
 * operand, because newer Intel cores (Golden Cove on) fold chains of
 * immediate adds at rename, several a cycle, which read as 10 GHz */
#define CHAINED_ADD(d) "add %%rdx, %%rax\n"
/* a kernel step: four activation bytes broadcast, multiplied into a row
 * group's 32 levels and summed (Q4_0), or with the sign trick (Q8_0) */
#define Q4STEP(d) BCAST(d) V("vpmaddubsw", d, 14, d) V("vpaddw", d, 15, d)
#define Q8STEP(d)                                                                                  \
    BCAST(d)                                                                                       \
    V("vpsignb", 14, d, d) V("vpmaddubsw", d, 15, d) V("vpmaddwd", d, 13, d) V("vpaddd", d, 12, d)

#define X8(M)     M(0) M(1) M(2) M(3) M(4) M(5) M(6) M(7)
#define X16(M)    X8(M) M(8) M(9) M(10) M(11) M(0) M(1) M(2) M(3)
#define MIX(A, B) A(0) B(1) A(2) B(3) A(4) B(5) A(6) B(7) A(8) B(9) A(10) B(11) A(0) B(1) A(2) B(3)

/* One timed run of a loop body: ITERS iterations, in seconds. */
#define LOOP_FN(fn, body)                                                                          \
    static double fn(void)                                                                         \
    {                                                                                              \
        long n = ITERS;                                                                            \
        const void *p = buf;                                                                       \
        double t0 = now_s();                                                                       \
        __asm__ volatile(".p2align 6\n1:\n" body "dec %0\njnz 1b\n"                                \
                         : "+r"(n)                                                                 \
                         : "r"(p)                                                                  \
                         : "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", \
                           "xmm9", "xmm10", "xmm11", "rax", "rdx", "memory", "cc");                \
        return now_s() - t0;                                                                       \
    }

LOOP_FN(run_clock, X16(CHAINED_ADD))
LOOP_FN(run_maddubs, X16(MADDUBS))
LOOP_FN(run_maddwd, X16(MADDWD))
LOOP_FN(run_signb, X16(SIGNB))
LOOP_FN(run_fma, X16(FMA))
LOOP_FN(run_addw, X16(ADDW))
LOOP_FN(run_shufd, X16(SHUFD))
LOOP_FN(run_maddubs_signb, MIX(MADDUBS, SIGNB))
LOOP_FN(run_maddubs_maddwd, MIX(MADDUBS, MADDWD))
LOOP_FN(run_maddubs_addw, MIX(MADDUBS, ADDW))
LOOP_FN(run_maddubs_shufd, MIX(MADDUBS, SHUFD))
LOOP_FN(run_bcast, X16(BCAST))
LOOP_FN(run_load, X16(LOAD))
LOOP_FN(run_bcast_load, MIX(BCAST, LOAD))
LOOP_FN(run_q4_step, X8(Q4STEP))
LOOP_FN(run_q8_step, X8(Q8STEP))

typedef struct row {
    const char *name;
    double (*run)(void);
    int per_iter; /* instructions (or kernel steps) per iteration */
    int macs;     /* multiply-adds per step for the kernel steps, else 0 */
} row;

/* The fastest of three runs: the others lost time to something else. */
static double best_secs(double (*run)(void))
{
    double best = 1e30;
    for (int r = 0; r < 3; r++) {
        double secs = run();
        best = secs < best ? secs : best;
    }
    return best;
}

static void report(const row *w, double secs, double hz)
{
    double per_cycle = (double)w->per_iter * (double)ITERS / (secs * hz);
    if (w->macs)
        printf("  %-38s %5.2f steps/cycle  %6.1f MAC/cycle\n", w->name, per_cycle,
               per_cycle * w->macs);
    else
        printf("  %-38s %5.2f per cycle\n", w->name, per_cycle);
}

int main(int argc, char **argv)
{
    (void)argv;
    if (argc > 1) {
        fprintf(stderr, "usage: tw-bench-ports\n");
        return 2;
    }
    memset(buf, 1, sizeof buf);
    double hz = 16.0 * (double)ITERS / best_secs(run_clock);
    printf("tw-bench-ports: clock %.2f GHz (dependent adds), best of 3 runs per loop\n", hz * 1e-9);
    static const row rows[] = {
        {"vpmaddubsw", run_maddubs, 16, 0},
        {"vpmaddwd", run_maddwd, 16, 0},
        {"vpsignb", run_signb, 16, 0},
        {"vfmadd231ps", run_fma, 16, 0},
        {"vpaddw", run_addw, 16, 0},
        {"vpshufd", run_shufd, 16, 0},
        {"vpmaddubsw + vpsignb, 1:1", run_maddubs_signb, 16, 0},
        {"vpmaddubsw + vpmaddwd, 1:1", run_maddubs_maddwd, 16, 0},
        {"vpmaddubsw + vpaddw, 1:1", run_maddubs_addw, 16, 0},
        {"vpmaddubsw + vpshufd, 1:1", run_maddubs_shufd, 16, 0},
        {"vpbroadcastd from memory", run_bcast, 16, 0},
        {"vmovdqa load", run_load, 16, 0},
        {"broadcast + load, 1:1", run_bcast_load, 16, 0},
        {"Q4_0 step (bcast, maddubs, add)", run_q4_step, 8, 32},
        {"Q8_0 step (bcast, sign, 2 madd, add)", run_q8_step, 8, 32},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++)
        report(&rows[i], best_secs(rows[i].run), hz);
    return 0;
}

#else

int main(void)
{
    fprintf(stderr, "tw-bench-ports: x86-64 only\n");
    return 0;
}

#endif
