// progress.h — progress reporting for long benchmark runs (owns: one status line on
// stderr and its ETA; not: what is being counted or what an item costs).
// On a terminal it redraws a bar in place; otherwise it prints a line at most every
// `PROGRESS_LINE_S` seconds and one at the end, so logs stay short.
// Items may cost different amounts (a sweep's prompt lengths double, and prefill grows about
// quadratically with length): with costs given, the fraction done and the ETA are by cost, and
// the ETA counts down from the last finished item at the rate measured so far.
#ifndef OCTET_PROGRESS_H
#define OCTET_PROGRESS_H

#include <stdbool.h>

#define PROGRESS_LINE_S 10.0

struct progress {
    char label[96];
    char running[64];        // what is in flight ("input 8192"), shown while it runs
    int total, done;
    const double *cost;      // [total] relative cost of each item, in completion order (NULL: equal)
    double later;            // cost of the work queued after these items (a sweep's later configurations)
    double start_s, last_s, done_s;  // start, last line drawn, last item finished
    bool tty, quiet, ended, line_due;
};

// quiet = true prints nothing (tests, nested runs).
void progress_start(struct progress *p, const char *label, int total, bool quiet);
// Relative cost of each item (kept, not copied: it must outlive the run); NULL = all equal.
// later: the cost, in the same units, of the work that follows this run (0: none), so the line
// can also give the ETA of everything.
void progress_set_costs(struct progress *p, const double *cost, double later);
// What is being run now (printed beside the count), or NULL.
void progress_running(struct progress *p, const char *what);
void progress_update(struct progress *p, int done);
// Seconds left by cost: the remaining cost at the rate so far, less the time since the last
// item finished; < 0 when nothing finished yet or the item in flight runs past its estimate.
double progress_eta_s(const struct progress *p, double now_s);
// The same, with the work after this run (progress_set_costs' later) added.
double progress_eta_all_s(const struct progress *p, double now_s);
// Fraction of the cost done, 0..1.
double progress_fraction(const struct progress *p);
// Final line (newline on a TTY); safe to call twice.
void progress_end(struct progress *p);

#endif
