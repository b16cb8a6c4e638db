/* API-key checks. Keys are kept only as SHA-256 digests and a presented
 * token is compared against each digest with CRYPTO_memcmp, so neither the
 * comparison time nor the length of the token tells anything about a key. */
#ifndef TWD_AUTH_H
#define TWD_AUTH_H

#include <stdbool.h>
#include <stddef.h>

#include "config.h"
#include "tw/status.h"

typedef struct twd_auth {
    size_t n_keys;
    unsigned char digest[TWD_MAX_API_KEYS][32];
} twd_auth;

/* Digests keys[0..n) (n <= TWD_MAX_API_KEYS). With no keys, every request
 * is accepted. */
tw_status twd_auth_init(twd_auth *a, char *const *keys, size_t n, tw_err *err);

/* TW_OK when no key is required or token matches one; UNAUTHENTICATED with
 * "missing API key" / "invalid API key" otherwise. Thread-safe. */
tw_status twd_auth_check(const twd_auth *a, const char *token, tw_err *err);

#endif
