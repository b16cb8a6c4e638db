/* How the CLI prints a generated answer. The reasoning a model writes
 * before its answer (the part inside <think>...</think>) goes to stderr,
 * faint when stderr is a terminal, so that stdout carries the answer alone
 * and `tokenwire chat ... > file` keeps only the answer. Reasoning that is
 * only white space (the empty block of a model asked not to think) is not
 * printed at all. Streaming and non-streaming output look the same.
 *
 * Not thread-safe; one printer per answer. */
#ifndef TW_CLI_ANSWER_H
#define TW_CLI_ANSWER_H

#include <stdbool.h>

typedef struct cli_answer {
    bool show_reasoning;
    bool faint;        /* stderr is a terminal */
    bool in_reasoning; /* reasoning printed, not closed yet */
    bool answering;    /* a visible character of the answer is out */
    char last;         /* last character of reasoning printed */
} cli_answer;

/* Starts a printer; show_reasoning false drops the reasoning entirely. */
void cli_answer_init(cli_answer *a, bool show_reasoning);

/* A piece of reasoning (streamed, or the whole of it); NULL is ignored.
 * White space before the first visible character is dropped. */
void cli_answer_reasoning(cli_answer *a, const char *text);

/* A piece of the answer on stdout (NULL is ignored); closes the reasoning
 * block first. Line breaks before the answer's first character (what
 * separated it from the reasoning) are dropped; nothing else is changed. */
void cli_answer_text(cli_answer *a, const char *text);

/* Closes an open reasoning block (a final newline, the colour reset). Call
 * it at the end of every answer. */
void cli_answer_close(cli_answer *a);

#endif
