// stats_util.c — log-binned histograms, FP8 round trips, list parsing, file reading and
// the gnuplot pipe used by the measuring tools (calibrate, inspect, eval needle).
// Bins are 1/32 octave wide so quantiles are accurate to ≈2% without keeping the values.
#include "stats_util.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../base/check.h"
#include "../base/fp8.h"
#include "../base/half.h"

int stats_hist_bin(double ax) {
    int e;
    double f = frexp(ax, &e);  // ax = f * 2^e, f in [0.5, 1)
    double l2 = (double)(e - 1) + log2(2.0 * f);
    double pos = (l2 - STATS_MIN_EXP) * STATS_BINS_PER_OCTAVE;
    if (pos < 0) return 0;
    if (pos >= STATS_N_BINS) return STATS_N_BINS - 1;
    return (int)pos;
}

double stats_hist_edge(int i) { return exp2((double)i / STATS_BINS_PER_OCTAVE + STATS_MIN_EXP); }

static inline void hist_one(struct stats_hist *h, float v) {
    double a = fabs((double)v);
    h->n++;
    if (!(a > 0)) { h->n_zero++; return; }  // zeros (and NaN, which never come from a model)
    if (a > h->max_abs) h->max_abs = a;
    h->bins[stats_hist_bin(a)]++;
}

void stats_hist_add(struct stats_hist *h, const float *x, size_t n) {
    for (size_t i = 0; i < n; i++) hist_one(h, x[i]);
}

void stats_hist_add_strided(struct stats_hist *h, const float *x, int rows, int stride, int width) {
    for (int r = 0; r < rows; r++)
        for (int i = 0; i < width; i++) hist_one(h, x[(size_t)r * stride + i]);
}

void stats_hist_merge(struct stats_hist *dst, const struct stats_hist *src) {
    dst->n += src->n;
    dst->n_zero += src->n_zero;
    if (src->max_abs > dst->max_abs) dst->max_abs = src->max_abs;
    for (int i = 0; i < STATS_N_BINS; i++) dst->bins[i] += src->bins[i];
}

double stats_hist_quantile(const struct stats_hist *h, double p) {
    if (h->n == 0) return 0;
    if (p >= 1) return h->max_abs;
    double target = p * (double)h->n;  // rank in [0, n)
    double cum = (double)h->n_zero;
    if (target < cum) return 0;
    for (int i = 0; i < STATS_N_BINS; i++) {
        if (!h->bins[i]) continue;
        if (cum + h->bins[i] > target) {
            double frac = (target - cum) / h->bins[i];  // geometric interpolation in the bin
            double lo = stats_hist_edge(i), hi = stats_hist_edge(i + 1);
            double v = lo * pow(hi / lo, frac);
            return v < h->max_abs ? v : h->max_abs;
        }
        cum += h->bins[i];
    }
    return h->max_abs;
}

float stats_fp8_max(enum dtype dt) {
    return dt == DT_E4M3 ? FP8_E4M3_MAX : dt == DT_E5M2 ? FP8_E5M2_MAX : 0.0f;
}

float stats_fp8_sat_threshold(enum dtype dt) {
    return dt == DT_E4M3 ? 464.0f : dt == DT_E5M2 ? 61440.0f : INFINITY;
}

float stats_fp8_min_normal(enum dtype dt) {
    return dt == DT_E4M3 ? 0x1p-6f : dt == DT_E5M2 ? 0x1p-14f : 0.0f;
}

float stats_round_trip(enum dtype dt, float x, float scale) {
    switch (dt) {
    case DT_E4M3: return fp8_e4m3_to_f32(fp8_e4m3_from_f32(x / scale)) * scale;
    case DT_E5M2: return fp8_e5m2_to_f32(fp8_e5m2_from_f32(x / scale)) * scale;
    case DT_BF16: return bf16_to_f32(f32_to_bf16(x));
    case DT_F16: return f16_to_f32(f32_to_f16(x));
    default: return x;
    }
}

int stats_parse_int_list(const char *flag, const char *s, long lo, long hi, long *out, int max, int *n) {
    *n = 0;
    const char *p = s;
    while (*p) {
        const char *e = p;
        while (*e && *e != ',') e++;
        char item[64];
        size_t len = (size_t)(e - p);
        if (len == 0 || len >= sizeof item) return err_set(OCT_EINVAL, "%s: bad list '%s' (want e.g. 1,2,3)", flag, s);
        memcpy(item, p, len);
        item[len] = 0;
        char *end;
        errno = 0;
        long v = strtol(item, &end, 10);
        if (errno || *end || v < lo || v > hi)
            return err_set(OCT_EINVAL, "%s: '%s' is not an integer in %ld..%ld", flag, item, lo, hi);
        if (*n >= max) return err_set(OCT_EINVAL, "%s: more than %d values", flag, max);
        out[(*n)++] = v;
        p = *e ? e + 1 : e;
        if (*e && !*p) return err_set(OCT_EINVAL, "%s: bad list '%s' (trailing comma)", flag, s);
    }
    if (*n == 0) return err_set(OCT_EINVAL, "%s: empty list", flag);
    return OCT_OK;
}

char *stats_read_file(const char *flag, const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) { err_set(OCT_EIO, "%s %s: cannot open (%s)", flag, path, strerror(errno)); return NULL; }
    size_t cap = 1 << 16, n = 0, k;
    char *buf = malloc(cap + 1);
    while (buf && (k = fread(buf + n, 1, cap - n, f)) > 0) {
        n += k;
        if (n == cap) {
            char *b2 = realloc(buf, (cap *= 2) + 1);
            if (!b2) { free(buf); buf = NULL; } else buf = b2;
        }
    }
    fclose(f);
    if (!buf) { err_set(OCT_ENOMEM, "out of memory reading %s", path); return NULL; }
    buf[n] = 0;
    *len = n;
    return buf;
}

bool stats_is_png(const char *path) {
    static const unsigned char sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
    unsigned char b[8];
    FILE *f = fopen(path, "rb");
    if (!f) return false;
    bool ok = fread(b, 1, 8, f) == 8 && !memcmp(b, sig, 8);
    fclose(f);
    return ok;
}

FILE *stats_gnuplot_open(const char *what) {
    if (system("command -v gnuplot >/dev/null 2>&1") != 0) {
        fprintf(stderr, "octet: warning: gnuplot not found (install gnuplot-nox); skipping %s\n", what);
        return NULL;
    }
    fflush(NULL);
    FILE *gp = popen("gnuplot", "w");
    if (!gp) fprintf(stderr, "octet: warning: cannot start gnuplot; skipping %s\n", what);
    return gp;
}

int stats_gnuplot_close(FILE *gp) {
    int st = pclose(gp);
    return (st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 0) ? 0 : -1;
}
