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
    p->start_s = p->last_s = http_now_s();
    if (!quiet && !p->tty) fprintf(stderr, "%s: 0/%d\n", p->label, total);
}

static void draw(struct progress *p, double now) {
    double el = now - p->start_s;
    double eta = p->done > 0 ? el * (p->total - p->done) / p->done : 0;
    if (p->tty) {
        char bar[31];
        int fill = p->total > 0 ? 30 * p->done / p->total : 0;
        for (int i = 0; i < 30; i++) bar[i] = i < fill ? '#' : '.';
        bar[30] = 0;
        fprintf(stderr, "\r%s [%s] %d/%d  %.1fs", p->label, bar, p->done, p->total, el);
        if (p->done > 0 && p->done < p->total) fprintf(stderr, "  eta %.0fs  ", eta);
        else fprintf(stderr, "            ");
    } else {
        fprintf(stderr, "%s: %d/%d (%.0f%%) %.1fs", p->label, p->done, p->total,
                p->total > 0 ? 100.0 * p->done / p->total : 100.0, el);
        if (p->done > 0 && p->done < p->total) fprintf(stderr, ", eta %.0fs", eta);
        fputc('\n', stderr);
    }
    fflush(stderr);
    p->last_s = now;
}

void progress_update(struct progress *p, int done) {
    p->done = done;
    if (p->quiet || p->ended) return;
    double now = http_now_s();
    if (p->tty ? now - p->last_s >= 0.1 || done == p->total : now - p->last_s >= PROGRESS_LINE_S) draw(p, now);
}

void progress_end(struct progress *p) {
    if (p->quiet || p->ended) return;
    p->ended = true;
    draw(p, http_now_s());
    if (p->tty) fputc('\n', stderr);
}
