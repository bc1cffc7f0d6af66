// fit.c — least-squares line and quadratic fits, R², break-even of two lines.
// The quadratic solves its 3x3 normal equations in x scaled to [-1, 1]-ish (x / max|x|)
// so lengths up to 10^6 do not lose the a·x² term to cancellation; coefficients are
// unscaled on the way out. Owns no state.
#include "fit.h"

#include <math.h>
#include <stdio.h>

#include "../base/check.h"

double fit_r2(const double *y, const double *yhat, int n) {
    double mean = 0, ss_tot = 0, ss_res = 0;
    for (int i = 0; i < n; i++) mean += y[i];
    mean /= n > 0 ? n : 1;
    for (int i = 0; i < n; i++) {
        ss_tot += (y[i] - mean) * (y[i] - mean);
        ss_res += (y[i] - yhat[i]) * (y[i] - yhat[i]);
    }
    if (ss_tot <= 0) return ss_res <= 1e-24 ? 1.0 : 0.0;
    return 1.0 - ss_res / ss_tot;
}

static int n_distinct(const double *x, int n, int want) {
    int k = 0;
    for (int i = 0; i < n && k < want; i++) {
        int seen = 0;
        for (int j = 0; j < i; j++) seen |= x[j] == x[i];
        k += !seen;
    }
    return k;
}

int fit_line(const double *x, const double *y, int n, struct fit_line *out) {
    if (n < 2 || n_distinct(x, n, 2) < 2)
        return err_set(OCT_EINVAL, "line fit needs at least 2 distinct x values (got %d points)", n);
    double mx = 0, my = 0;
    for (int i = 0; i < n; i++) { mx += x[i]; my += y[i]; }
    mx /= n; my /= n;
    double sxx = 0, sxy = 0;
    for (int i = 0; i < n; i++) {
        sxx += (x[i] - mx) * (x[i] - mx);
        sxy += (x[i] - mx) * (y[i] - my);
    }
    out->slope = sxy / sxx;
    out->intercept = my - out->slope * mx;
    out->n = n;
    double ss_tot = 0, ss_res = 0;
    for (int i = 0; i < n; i++) {
        double r = y[i] - (out->slope * x[i] + out->intercept);
        ss_res += r * r;
        ss_tot += (y[i] - my) * (y[i] - my);
    }
    out->r2 = ss_tot > 0 ? 1.0 - ss_res / ss_tot : (ss_res <= 1e-24 ? 1.0 : 0.0);
    out->slope_se = n > 2 ? sqrt(ss_res / (n - 2) / sxx) : NAN;
    out->intercept_se = n > 2 ? sqrt(ss_res / (n - 2) * (1.0 / n + mx * mx / sxx)) : NAN;
    return OCT_OK;
}

double fit_ratio_se(const struct fit_line *num, const struct fit_line *den) {
    if (den->slope == 0 || num->slope == 0 || isnan(num->slope_se) || isnan(den->slope_se)) return NAN;
    double r = num->slope / den->slope, a = num->slope_se / num->slope, b = den->slope_se / den->slope;
    return fabs(r) * sqrt(a * a + b * b);
}

// Solves m·v = r (3x3) by Gaussian elimination with partial pivoting.
static int solve3(double m[3][3], double r[3], double v[3]) {
    for (int c = 0; c < 3; c++) {
        int p = c;
        for (int i = c + 1; i < 3; i++) if (fabs(m[i][c]) > fabs(m[p][c])) p = i;
        if (fabs(m[p][c]) < 1e-300) return OCT_EINVAL;
        for (int j = 0; j < 3; j++) { double t = m[c][j]; m[c][j] = m[p][j]; m[p][j] = t; }
        double t = r[c]; r[c] = r[p]; r[p] = t;
        for (int i = c + 1; i < 3; i++) {
            double f = m[i][c] / m[c][c];
            for (int j = c; j < 3; j++) m[i][j] -= f * m[c][j];
            r[i] -= f * r[c];
        }
    }
    for (int c = 2; c >= 0; c--) {
        double s = r[c];
        for (int j = c + 1; j < 3; j++) s -= m[c][j] * v[j];
        v[c] = s / m[c][c];
    }
    return OCT_OK;
}

int fit_quad(const double *x, const double *y, int n, struct fit_quad *out) {
    if (n < 3 || n_distinct(x, n, 3) < 3)
        return err_set(OCT_EINVAL, "quadratic fit needs at least 3 distinct x values (got %d points)", n);
    double xs = 0;
    for (int i = 0; i < n; i++) xs = fmax(xs, fabs(x[i]));
    // sums of powers of u = x/xs: s[k] = Σ u^k, t[k] = Σ u^k·y
    double s[5] = {0}, t[3] = {0};
    for (int i = 0; i < n; i++) {
        double u = x[i] / xs, p = 1;
        for (int k = 0; k < 5; k++) {
            s[k] += p;
            if (k < 3) t[k] += p * y[i];
            p *= u;
        }
    }
    double m[3][3] = {{s[4], s[3], s[2]}, {s[3], s[2], s[1]}, {s[2], s[1], s[0]}};
    double r[3] = {t[2], t[1], t[0]}, v[3];
    if (solve3(m, r, v) < 0) return err_set(OCT_EINVAL, "quadratic fit: singular normal equations");
    out->a = v[0] / (xs * xs);
    out->b = v[1] / xs;
    out->c = v[2];
    out->n = n;
    double my = 0, ss_tot = 0, ss_res = 0;
    for (int i = 0; i < n; i++) my += y[i];
    my /= n;
    for (int i = 0; i < n; i++) {
        double u = x[i] / xs, res = y[i] - (v[0] * u * u + v[1] * u + v[2]);
        ss_res += res * res;
        ss_tot += (y[i] - my) * (y[i] - my);
    }
    out->r2 = ss_tot > 0 ? 1.0 - ss_res / ss_tot : (ss_res <= 1e-24 ? 1.0 : 0.0);
    return OCT_OK;
}

struct fit_break fit_break_even(const struct fit_line *base, const struct fit_line *other) {
    struct fit_break b = {FIT_BREAK_NEVER, 0};
    double ds = base->slope - other->slope;  // > 0: other grows more slowly
    double scale = fmax(fabs(base->slope), fabs(other->slope));
    if (fabs(ds) <= 1e-12 * scale || ds == 0) {
        b.kind = other->intercept <= base->intercept ? FIT_BREAK_ALWAYS : FIT_BREAK_NEVER;
        return b;
    }
    if (ds < 0) return b;  // other's line ends up above base's, whatever happens at small x
    double x = (other->intercept - base->intercept) / ds;
    if (x <= 0) { b.kind = FIT_BREAK_ALWAYS; return b; }
    b.kind = FIT_BREAK_AT;
    b.x = x;
    return b;
}

const char *fit_break_str(struct fit_break b, char *buf, int cap) {
    if (b.kind == FIT_BREAK_NEVER) snprintf(buf, (size_t)cap, "never");
    else if (b.kind == FIT_BREAK_ALWAYS) snprintf(buf, (size_t)cap, "always");
    else snprintf(buf, (size_t)cap, "%.0f", b.x);
    return buf;
}
