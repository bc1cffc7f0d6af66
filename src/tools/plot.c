// plot.c — gnuplot via popen. Prefers the pngcairo terminal (antialiased) and falls back
// to the libgd png terminal; Debian's gnuplot-nox has both. A log₂ x axis when the lengths span
// PLOT_LOG_X_SPAN× or more; fit curves only over their series' measured lengths, never below 0.
#include "plot.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "../base/check.h"

static int g_avail = -1;       // -1 unknown, 0 no, 1 yes
static const char *g_term = "pngcairo";

bool plot_available(void) {
    if (g_avail >= 0) return g_avail;
    g_avail = 0;
    FILE *p = popen("gnuplot -e 'set terminal pngcairo' 2>&1", "r");
    if (!p) return false;
    char buf[512];
    size_t n = fread(buf, 1, sizeof buf - 1, p);
    buf[n] = 0;
    int st = pclose(p);
    if (st == -1 || !WIFEXITED(st) || WEXITSTATUS(st) == 127) return false;
    if (n > 0) g_term = "png";  // pngcairo unknown: it printed an error
    g_avail = WEXITSTATUS(st) == 0 || n > 0;
    return g_avail;
}

// gnuplot string literal in single quotes ('' escapes a quote).
static void put_str(FILE *f, const char *s) {
    fputc('\'', f);
    for (; *s; s++) {
        if (*s == '\'') fputc('\'', f);
        fputc(*s, f);
    }
    fputc('\'', f);
}

void plot_write_script(FILE *f, const char *path, const char *title, const char *xlabel, const char *ylabel,
                       const struct plot_series *s, int n_series) {
    fprintf(f, "set terminal %s size 960,600 noenhanced\n", g_term);
    fprintf(f, "set output ");
    put_str(f, path);
    fprintf(f, "\nset title ");
    put_str(f, title);
    fprintf(f, "\nset xlabel ");
    put_str(f, xlabel);
    fprintf(f, "\nset ylabel ");
    put_str(f, ylabel);
    fprintf(f, "\nset key left top\nset grid\nset samples 400\nset yrange [0:*]\n");
    double xmin = INFINITY, xmax = 0;
    for (int k = 0; k < n_series; k++)
        for (int i = 0; i < s[k].n; i++) {
            if (s[k].x[i] > xmax) xmax = s[k].x[i];
            if (s[k].x[i] < xmin) xmin = s[k].x[i];
        }
    if (xmin > 0 && xmax >= PLOT_LOG_X_SPAN * xmin)  // lengths that double: a log axis spaces them evenly
        fprintf(f, "set logscale x 2\nset format x '%%.0f'\nset xrange [%.17g:%.17g]\n", xmin / 1.25, xmax * 1.25);
    else if (xmax > 0)
        fprintf(f, "set xrange [0:%.17g]\n", xmax * 1.05);
    for (int k = 0; k < n_series; k++) {
        fprintf(f, "$d%d << EOD\n", k);
        double lo = INFINITY, hi = -INFINITY;
        for (int i = 0; i < s[k].n; i++) {
            fprintf(f, "%.17g %.17g\n", s[k].x[i], s[k].y[i]);
            lo = s[k].x[i] < lo ? s[k].x[i] : lo;
            hi = s[k].x[i] > hi ? s[k].x[i] : hi;
        }
        if (s[k].n == 0) fprintf(f, "NaN NaN\n");
        fprintf(f, "EOD\n");
        if (s[k].fit_degree > 0) {  // drawn over the measured lengths only, and never below zero
            fprintf(f, "p%d(x) = %.17g*x**2 + %.17g*x + %.17g\n",
                    k, s[k].fit_degree > 1 ? s[k].c[2] : 0.0, s[k].c[1], s[k].c[0]);
            fprintf(f, "f%d(x) = (x < %.17g || x > %.17g || p%d(x) < 0) ? NaN : p%d(x)\n", k, lo, hi, k, k);
        }
    }
    fprintf(f, "plot ");
    for (int k = 0; k < n_series; k++) {
        fprintf(f, "%s$d%d using 1:2 with points pt 7 ps 1.2 lc %d title ", k ? ", " : "", k, k + 1);
        put_str(f, s[k].title);
        if (s[k].fit_degree > 0) {
            char t[300];
            snprintf(t, sizeof t, "%s (%s fit)", s[k].title, s[k].fit_degree > 1 ? "quadratic" : "linear");
            fprintf(f, ", f%d(x) with lines lw 2 lc %d title ", k, k + 1);
            put_str(f, t);
        }
    }
    fprintf(f, "\nset output\n");
}

int plot_png(const char *path, const char *title, const char *xlabel, const char *ylabel,
             const struct plot_series *s, int n_series) {
    if (!plot_available())
        return err_set(OCT_EUNSUP, "gnuplot is not installed (apt-get install gnuplot-nox); skipped %s", path);
    remove(path);
    int points = 0;
    for (int k = 0; k < n_series; k++) points += s[k].n;
    if (!points) return err_set(OCT_EINVAL, "no points to plot; skipped %s", path);
    FILE *f = popen("gnuplot", "w");
    if (!f) return err_set(OCT_EIO, "cannot start gnuplot");
    plot_write_script(f, path, title, xlabel, ylabel, s, n_series);
    int st = pclose(f);
    struct stat sb;
    if (st != 0 || stat(path, &sb) != 0 || sb.st_size == 0)
        return err_set(OCT_EIO, "gnuplot failed to write %s (exit status %d)", path, st);
    return OCT_OK;
}
