#include "auth.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <string.h>

static bool sha256(const char *s, size_t n, unsigned char out[32])
{
    unsigned int len = 0;
    return EVP_Digest(s, n, out, &len, EVP_sha256(), NULL) == 1 && len == 32;
}

tw_status twd_auth_init(twd_auth *a, char *const *keys, size_t n, tw_err *err)
{
    memset(a, 0, sizeof *a);
    if (n > TWD_MAX_API_KEYS)
        return tw_errorf(err, TW_INVALID_ARGUMENT, "more than %d API keys", TWD_MAX_API_KEYS);
    for (size_t i = 0; i < n; i++)
        if (!sha256(keys[i], strlen(keys[i]), a->digest[i]))
            return tw_errorf(err, TW_INTERNAL, "SHA-256 is not available");
    a->n_keys = n;
    return TW_OK;
}

tw_status twd_auth_check(const twd_auth *a, const char *token, tw_err *err)
{
    if (a->n_keys == 0)
        return TW_OK;
    if (!token || !*token)
        return tw_errorf(err, TW_UNAUTHENTICATED, "missing API key (set auth_token)");
    unsigned char d[32];
    if (!sha256(token, strlen(token), d))
        return tw_errorf(err, TW_INTERNAL, "SHA-256 is not available");
    int match = 0;
    /* Every key is compared, so the time does not say which one matched. */
    for (size_t i = 0; i < a->n_keys; i++)
        match |= CRYPTO_memcmp(d, a->digest[i], sizeof d) == 0;
    if (!match)
        return tw_errorf(err, TW_UNAUTHENTICATED, "invalid API key");
    return TW_OK;
}
