/* A small HTTP/1.1 file server on 127.0.0.1 for the download tests, built on
 * plain sockets so that it can misbehave on purpose: cut a body short,
 * answer slowly, honour or ignore Range. One request per connection. */
#ifndef TWT_HTTP_FIXTURE_H
#define TWT_HTTP_FIXTURE_H

#include <stdbool.h>
#include <stddef.h>

typedef struct twt_http twt_http;

/* Starts serving on an ephemeral port (a thread accepts). */
twt_http *twt_http_start(void);
void twt_http_stop(twt_http *h);
int twt_http_port(const twt_http *h);

/* Serves data (borrowed, must outlive the server) at the exact request
 * target path (e.g. "/m.gguf"); anything else is 404. */
void twt_http_add(twt_http *h, const char *path, const void *data, size_t len);

/* The next response to a request without Range announces the whole length
 * but sends only the first half, then closes the connection. */
void twt_http_cut_next(twt_http *h);

/* Pause this many ms between 16 pieces of every body (0: none). */
void twt_http_set_slow_ms(twt_http *h, unsigned ms);

/* When false, Range is ignored and the whole file comes with 200. */
void twt_http_set_honour_range(twt_http *h, bool on);

/* The Range header of the last request ("" when none) and the requests so far. */
void twt_http_last_range(twt_http *h, char *out, size_t cap);
int twt_http_requests(twt_http *h);

#endif
