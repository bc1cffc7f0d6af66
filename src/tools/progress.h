// progress.h — progress reporting for long benchmark runs (owns: one status line on
// stderr; not: what is being counted).
// On a terminal it redraws a bar in place; otherwise it prints a line at most every
// `PROGRESS_LINE_S` seconds and one at the end, so logs stay short.
#ifndef OCTET_PROGRESS_H
#define OCTET_PROGRESS_H

#include <stdbool.h>

#define PROGRESS_LINE_S 10.0

struct progress {
    char label[64];
    int total, done;
    double start_s, last_s;
    bool tty, quiet, ended;
};

// quiet = true prints nothing (tests, nested runs).
void progress_start(struct progress *p, const char *label, int total, bool quiet);
void progress_update(struct progress *p, int done);
// Final line (newline on a TTY); safe to call twice.
void progress_end(struct progress *p);

#endif
