/* tw-gguf-dump: prints a GGUF file's metadata and tensor table. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "tw/gguf.h"

/* Long arrays and strings are abbreviated unless --full is given. */
#define SHOW_ELEMS 8
#define SHOW_CHARS 120

static void print_str(const char *s, size_t len, bool full)
{
    size_t n = full || len <= SHOW_CHARS ? len : SHOW_CHARS;
    putchar('"');
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\')
            printf("\\%c", c);
        else if (c == '\n')
            fputs("\\n", stdout);
        else if (c < 0x20 || c == 0x7f)
            printf("\\x%02x", c);
        else
            putchar(c);
    }
    putchar('"');
    if (n < len)
        printf("...(%zu bytes)", len);
}

static void print_value(const tw_gguf_value *v, bool full)
{
    uint64_t u;
    int64_t i;
    double d;
    bool b;
    size_t len;
    const char *s;
    switch (tw_gguf_value_type(v)) {
    case TW_GGUF_STRING:
        s = tw_gguf_value_str(v, &len);
        print_str(s, len, full);
        return;
    case TW_GGUF_BOOL:
        tw_gguf_value_bool(v, &b);
        fputs(b ? "true" : "false", stdout);
        return;
    case TW_GGUF_F32:
    case TW_GGUF_F64:
        tw_gguf_value_f64(v, &d);
        printf("%.9g", d);
        return;
    case TW_GGUF_ARRAY: {
        uint64_t n = tw_gguf_array_len(v);
        tw_gguf_vtype et = tw_gguf_array_type(v);
        uint64_t shown = full || n <= SHOW_ELEMS ? n : SHOW_ELEMS;
        printf("[%s x %" PRIu64 "] [", tw_gguf_vtype_name(et), n);
        for (uint64_t k = 0; k < shown; k++) {
            if (k)
                fputs(", ", stdout);
            if (et == TW_GGUF_STRING) {
                s = tw_gguf_array_str(v, k, &len);
                print_str(s, len, full);
            } else if (et == TW_GGUF_ARRAY) {
                print_value(tw_gguf_array_elem(v, k), full);
            } else if (et == TW_GGUF_F32 || et == TW_GGUF_F64) {
                tw_gguf_array_f64(v, k, &d);
                printf("%.9g", d);
            } else if (et == TW_GGUF_BOOL) {
                fputs(((const unsigned char *)tw_gguf_array_data(v))[k] ? "true" : "false",
                      stdout);
            } else if (tw_gguf_array_i64(v, k, &i)) {
                printf("%" PRId64, i);
            } else if (tw_gguf_array_u64(v, k, &u)) {
                printf("%" PRIu64, u);
            }
        }
        if (shown < n)
            fputs(", ...", stdout);
        putchar(']');
        return;
    }
    default:
        if (tw_gguf_value_i64(v, &i))
            printf("%" PRId64, i);
        else if (tw_gguf_value_u64(v, &u))
            printf("%" PRIu64, u);
        return;
    }
}

int main(int argc, char **argv)
{
    bool full = false;
    const char *path = NULL;
    for (int a = 1; a < argc; a++) {
        if (strcmp(argv[a], "--full") == 0)
            full = true;
        else if (!path && argv[a][0] != '-')
            path = argv[a];
        else
            path = NULL, a = argc;
    }
    if (!path) {
        fprintf(stderr, "usage: tw-gguf-dump [--full] FILE.gguf\n"
                        "Prints the metadata keys and the tensor table of a GGUF file.\n");
        return 2;
    }
    tw_err err = {{0}};
    tw_gguf *g;
    tw_status st = tw_gguf_open(path, &g, &err);
    if (st) {
        fprintf(stderr, "tw-gguf-dump: %s: %s\n", tw_status_name(st), err.msg);
        return 1;
    }
    printf("GGUF v%u, %" PRIu64 " bytes, alignment %u, data at %" PRIu64 "\n",
           tw_gguf_version(g), tw_gguf_file_size(g), tw_gguf_alignment(g),
           tw_gguf_data_offset(g));
    printf("%" PRId64 " metadata keys:\n", tw_gguf_key_count(g));
    for (int64_t k = 0; k < tw_gguf_key_count(g); k++) {
        const tw_gguf_value *v = tw_gguf_key_value(g, k);
        printf("  %-48s %-6s = ", tw_gguf_key_name(g, k), tw_gguf_vtype_name(tw_gguf_value_type(v)));
        print_value(v, full);
        putchar('\n');
    }
    printf("%" PRId64 " tensors:\n", tw_gguf_tensor_count(g));
    for (int64_t k = 0; k < tw_gguf_tensor_count(g); k++) {
        const tw_gguf_tensor *t = tw_gguf_tensor_at(g, k);
        char dims[128] = "";
        size_t off = 0;
        for (uint32_t d = 0; d < t->n_dims; d++)
            off += (size_t)snprintf(dims + off, sizeof dims - off, "%s%" PRIu64, d ? ", " : "",
                                    t->dims[d]);
        printf("  %-40s %-8s {%s} %" PRIu64 " bytes at %" PRIu64 "\n", t->name,
               tw_gguf_type_name(t->type), dims, t->nbytes, t->offset);
    }
    tw_gguf_close(g);
    return 0;
}
