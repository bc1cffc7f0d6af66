// stats_util.h — small numeric and I/O helpers shared by calibrate, inspect and eval needle
// (owns: the log-binned |x| histogram, FP8 round-trip of one value, list-flag parsing,
// whole-file reading and the gnuplot pipe; not: any model or cache state).
// Invariant: a histogram's percentile is within one bin (2^(1/32), ≈2.2%) of the exact
// order statistic and never exceeds the exact maximum it tracks alongside.
#ifndef OCTET_STATS_UTIL_H
#define OCTET_STATS_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "../base/dtype.h"

#define STATS_BINS_PER_OCTAVE 32
#define STATS_MIN_EXP (-40)     // |x| below 2^-40 (but nonzero) lands in bin 0
#define STATS_MAX_EXP 24        // |x| at or above 2^24 lands in the last bin
#define STATS_N_BINS ((STATS_MAX_EXP - STATS_MIN_EXP) * STATS_BINS_PER_OCTAVE)

// Histogram of |x| on a log2 axis, plus exact count, zero count and maximum.
struct stats_hist {
    uint64_t n, n_zero;
    double max_abs;
    uint32_t bins[STATS_N_BINS];
};

void stats_hist_add(struct stats_hist *h, const float *x, size_t n);
void stats_hist_add_strided(struct stats_hist *h, const float *x, int rows, int stride, int width);
void stats_hist_merge(struct stats_hist *dst, const struct stats_hist *src);
// The p-quantile (p in [0,1]) of |x|; 0 for an empty histogram; p = 1 gives max_abs.
double stats_hist_quantile(const struct stats_hist *h, double p);
// Bin index of a positive |x| and the lower edge of bin i.
int stats_hist_bin(double ax);
double stats_hist_edge(int i);

// Largest finite value of an FP8 dtype (448, 57344), 0 for others.
float stats_fp8_max(enum dtype dt);
// |x / scale| above which an FP8 store saturates (max + half an ulp: 464, 61440).
float stats_fp8_sat_threshold(enum dtype dt);
// Smallest normal value of an FP8 dtype (2^-6, 2^-14), 0 for others.
float stats_fp8_min_normal(enum dtype dt);
// x stored as dtype with scale and read back (real value): the kv_write rule.
float stats_round_trip(enum dtype dt, float x, float scale);

// Parses "a,b,c" integers in [lo, hi] into out[max]; errors name the flag and the item.
int stats_parse_int_list(const char *flag, const char *s, long lo, long hi, long *out, int max, int *n);
// Reads a whole file (NUL-terminated, *len bytes); errors name the flag and path.
char *stats_read_file(const char *flag, const char *path, size_t *len);
// True if `path` starts with the 8-byte PNG signature.
bool stats_is_png(const char *path);

// A gnuplot process reading commands from the returned stream, or NULL (with a warning
// on stderr naming `what`) if gnuplot is not installed. stats_gnuplot_close waits for it
// and returns 0 if it exited cleanly.
FILE *stats_gnuplot_open(const char *what);
int stats_gnuplot_close(FILE *gp);

#endif
