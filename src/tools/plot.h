// plot.h — PNG charts through gnuplot (owns: the gnuplot script for points + fitted
// curves; not: the numbers). gnuplot runs as a child via popen; data travel inline as
// datablocks, so no temporary files are left behind.
// Invariant: plot_png returns OCT_OK only if a non-empty PNG was written; without gnuplot
// it returns OCT_EUNSUP (callers warn and go on).
#ifndef OCTET_PLOT_H
#define OCTET_PLOT_H

#include <stdbool.h>

struct plot_series {
    const char *title;
    const double *x, *y;   // [n] points
    int n;
    int fit_degree;        // 0 = no curve, 1 = y = c[1]·x + c[0], 2 = + c[2]·x²
    double c[3];           // coefficients by power of x
};

// True if gnuplot can be started (cached after the first call).
bool plot_available(void);
int plot_png(const char *path, const char *title, const char *xlabel, const char *ylabel,
             const struct plot_series *s, int n_series);

#endif
