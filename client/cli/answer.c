#include "answer.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* SGR "faint" and "reset": widely understood and harmless when ignored. */
#define FAINT "\033[2m"
#define RESET "\033[0m"

void cli_answer_init(cli_answer *a, bool show_reasoning)
{
    memset(a, 0, sizeof *a);
    a->show_reasoning = show_reasoning;
    a->faint = isatty(fileno(stderr)) == 1;
}

void cli_answer_reasoning(cli_answer *a, const char *text)
{
    if (!a->show_reasoning || !text)
        return;
    if (!a->in_reasoning) {
        text += strspn(text, " \t\r\n");
        if (!*text)
            return; /* wait for something worth showing */
        if (a->faint)
            fputs(FAINT, stderr);
        a->in_reasoning = true;
    }
    size_t n = strlen(text);
    if (n) {
        fputs(text, stderr);
        a->last = text[n - 1];
        fflush(stderr);
    }
}

void cli_answer_close(cli_answer *a)
{
    if (!a->in_reasoning)
        return;
    if (a->faint)
        fputs(RESET, stderr);
    if (a->last != '\n')
        fputc('\n', stderr);
    fflush(stderr);
    a->in_reasoning = false;
    a->show_reasoning = false; /* reasoning comes before the answer only */
}

void cli_answer_text(cli_answer *a, const char *text)
{
    if (!text)
        return;
    if (!a->answering) {
        text += strspn(text, "\r\n");
        if (!*text)
            return;
        a->answering = true;
    }
    cli_answer_close(a);
    fputs(text, stdout);
}
