// plot.h — PNG charts through gnuplot (owns: the gnuplot script for points + fitted
// curves; not: the numbers). gnuplot runs as a child via popen; data travel inline as
// datablocks, so no temporary files are left behind.
// Invariant: plot_png returns OCT_OK only if a non-empty PNG was written; without gnuplot
// it returns OCT_EUNSUP (callers warn and go on).
#ifndef OCTET_PLOT_H
#define OCTET_PLOT_H

#include <stdbool.h>
#include <stdio.h>

#define PLOT_LOG_X_SPAN 4.0  // x from min to at least 4× min: a log₂ axis (lengths that double)

struct plot_series {
    const char *title;
    const double *x, *y;   // [n] points
    int n;
    int fit_degree;        // 0 = no curve, 1 = y = c[1]·x + c[0], 2 = + c[2]·x² (drawn over the series'
                           // x range, omitted where negative: a fit says nothing outside its points)
    double c[3];           // coefficients by power of x
};

// True if gnuplot can be started (cached after the first call).
bool plot_available(void);
int plot_png(const char *path, const char *title, const char *xlabel, const char *ylabel,
             const struct plot_series *s, int n_series);
// The gnuplot script plot_png runs: series k's points are $dk, its fit curve fk(x) (NaN outside
// the series' x range and where the fit is negative).
void plot_write_script(FILE *f, const char *path, const char *title, const char *xlabel, const char *ylabel,
                       const struct plot_series *s, int n_series);

#endif
