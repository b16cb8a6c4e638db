/* What the matcher's files share (json_match.c: values, objects, arrays,
 * numbers and literals; json_match_string.c: strings and keys;
 * json_unique.c: the items of arrays with uniqueItems). Internal to
 * core/grammar. */
#ifndef TW_GRAMMAR_JSON_MATCH_H
#define TW_GRAMMAR_JSON_MATCH_H

#include "json_internal.h"

/* What a frame reads (tw_json_frame.kind). */
enum frame_kind { FK_VALUE = 0, FK_OBJECT, FK_ARRAY, FK_STRING, FK_NUMBER, FK_LIT };

/* Where a string stands (its frame's phase). A pair's second half is read
 * in SP_LOW_* phases: \uDC00-\uDFFF only. */
enum { SP_BODY = 0, SP_ESC, SP_HEX, SP_UTF8, SP_PAIR_BS, SP_PAIR_U, SP_LOW_HEX };

/* An open object's frame flag (in its bits, which only objects with
 * properties use otherwise): its keys no longer fit the state's buffer, so
 * they are not compared. */
#define KEYS_UNTRACKED 1u

/* A string's byte (frame f on top); false when refused. */
bool json_string_byte(tw_json_state *s, tw_json_frame *f, unsigned char c);

/* The items of an array with uniqueItems (json_unique.c). Its frame holds
 * in bits where its items' records start in kbuf, and JSET_UNTRACKED once
 * they no longer fit (its items are then not compared). */
#define JSET_UNTRACKED (1ull << 16)

/* Where the records of set a start in kbuf. */
static inline size_t json_set_start(const tw_json_frame *a)
{
    return (size_t)(a->bits & 0xFFFF);
}

/* The set whose item the top frame reads, when its items are compared;
 * NULL otherwise. */
tw_json_frame *json_set_of(tw_json_state *s);

/* Whether the top frame reads an item of a set whose items are compared. */
bool json_set_open(const tw_json_state *s);

/* Whether the item being read (its record so far) is one set a holds. */
bool json_set_seen(const tw_json_state *s, const tw_json_frame *a);

/* Appends to the item being read; a stops being compared when it does not
 * fit. */
void json_set_append(tw_json_state *s, tw_json_frame *a, const void *p, size_t k);

/* Keeps the item being read among a's. */
void json_set_commit(tw_json_state *s, tw_json_frame *a);

/* A string or number item starts its record with its tag ('s', 'n'), when
 * the top frame reads an item of a compared set. */
void json_set_item_start(tw_json_state *s, char tag);

#endif
