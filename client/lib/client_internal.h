/* What the stream code needs of a tw_client; not installed. */
#ifndef TW_CLIENT_INTERNAL_H
#define TW_CLIENT_INTERNAL_H

#include <nng/nng.h>
#include <stdbool.h>
#include <stdint.h>

#include "tokenwire/client.h"

/* Wall-clock milliseconds since the Unix epoch. */
uint64_t tw_client_now_unix_ms(void);

bool tw_client_has_sub(const tw_client *c);

/* Opens a context on the SUB socket subscribed to topic; an NNG error code. */
int tw_client_sub_ctx_open(tw_client *c, const void *topic, size_t topic_len, nng_ctx *out);

/* Called by a SUB reader that heard nothing for a while: replaces a SUB
 * dialer that has had no connection for two seconds (NNG 1.5.2's dialer
 * can stop redialing for good). Any thread. */
void tw_client_sub_check(tw_client *c);

uint32_t tw_client_timeout_ms(const tw_client *c);
uint32_t tw_client_poll_ms(const tw_client *c);
const tw_wire_limits *tw_client_limits(const tw_client *c);

#endif
