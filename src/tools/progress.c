// progress.c — a redrawn bar on a TTY, periodic plain lines otherwise (see progress.h).
#include "progress.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "http_client.h"

void progress_start(struct progress *p, const char *label, int total, bool quiet) {
    memset(p, 0, sizeof *p);
    snprintf(p->label, sizeof p->label, "%s", label);
    p->total = total;
    p->quiet = quiet;
    p->tty = isatty(2);
    p->start_s = p->last_s = p->done_s = http_now_s();
    if (!quiet && !p->tty) fprintf(stderr, "%s: 0/%d\n", p->label, total);
}

void progress_set_costs(struct progress *p, const double *cost, double later) {
    p->cost = cost;
    p->later = later > 0 ? later : 0;
}

static void draw(struct progress *p, double now);

void progress_running(struct progress *p, const char *what) {
    snprintf(p->running, sizeof p->running, "%s", what ? what : "");
    if (p->line_due && !p->quiet && !p->ended) {  // the line for the item that just finished, naming the next
        p->line_due = false;
        draw(p, http_now_s());
    }
}

static double cost_of(const struct progress *p, int lo, int hi) {
    if (!p->cost) return hi - lo;
    double s = 0;
    for (int i = lo; i < hi; i++) s += p->cost[i] > 0 ? p->cost[i] : 0;
    return s;
}

double progress_fraction(const struct progress *p) {
    double all = cost_of(p, 0, p->total);
    return all > 0 ? cost_of(p, 0, p->done) / all : 1.0;
}

static double eta(const struct progress *p, double now_s, double extra) {
    double done = cost_of(p, 0, p->done), left = cost_of(p, p->done, p->total) + extra;
    if (p->done <= 0 || !(done > 0)) return -1;
    double rate = done / (p->done_s - p->start_s > 1e-9 ? p->done_s - p->start_s : 1e-9);  // cost per second
    return left / rate - (now_s - p->done_s);
}

double progress_eta_s(const struct progress *p, double now_s) { return eta(p, now_s, 0); }
double progress_eta_all_s(const struct progress *p, double now_s) { return eta(p, now_s, p->later); }

static void draw(struct progress *p, double now) {
    p->line_due = false;
    double el = now - p->start_s, eta = progress_eta_s(p, now), frac = progress_fraction(p);
    char tail[160] = "";
    if (p->done < p->total) {
        size_t n = 0;
        if (p->running[0]) n += (size_t)snprintf(tail + n, sizeof tail - n, ", running %s", p->running);
        double all = progress_eta_all_s(p, now);
        if (p->done > 0 && eta >= 0 && p->later > 0 && all >= 0)
            snprintf(tail + n, sizeof tail - n, ", eta %.0fs (%.0fs for all)", eta, all);
        else if (p->done > 0 && eta >= 0) snprintf(tail + n, sizeof tail - n, ", eta %.0fs", eta);
        else if (p->done > 0) snprintf(tail + n, sizeof tail - n, ", eta: this item runs past its estimate");
    }
    if (p->tty) {
        char bar[31];
        int fill = (int)(30 * frac);
        for (int i = 0; i < 30; i++) bar[i] = i < fill ? '#' : '.';
        bar[30] = 0;
        fprintf(stderr, "\r%s [%s] %d/%d %.0f%%  %.1fs%s\033[K", p->label, bar, p->done, p->total, 100 * frac, el,
                tail);
    } else {
        fprintf(stderr, "%s: %d/%d (%.0f%% of the %s) %.1fs%s\n", p->label, p->done, p->total, 100 * frac,
                p->cost ? "work" : "items", el, tail);
    }
    fflush(stderr);
    p->last_s = now;
}

void progress_update(struct progress *p, int done) {
    double now = http_now_s();
    if (done != p->done) {
        p->done_s = now;
        p->running[0] = 0;  // until the caller names the next one
        // plain lines: at each finished item when items have costs (a sweep's few points), drawn when the
        // next item starts (progress_running) or at the end
        p->line_due = p->cost && !p->tty;
    }
    p->done = done;
    if (p->quiet || p->ended) return;
    if (p->tty ? now - p->last_s >= 0.1 || done == p->total : now - p->last_s >= PROGRESS_LINE_S) draw(p, now);
}

void progress_end(struct progress *p) {
    if (p->quiet || p->ended) return;
    p->ended = true;
    p->running[0] = 0;
    draw(p, http_now_s());
    if (p->tty) fputc('\n', stderr);
}
