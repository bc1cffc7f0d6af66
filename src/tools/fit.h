// fit.h — least-squares fits for the benchmark tools (owns: line and quadratic fits,
// R², the break-even length of two ITL lines; not: I/O or plotting).
// Invariant: a fit of n points succeeds only if the system is determined (n >= 2 distinct
// x for a line, n >= 3 distinct x for a quadratic); otherwise it returns OCT_EINVAL.
#ifndef OCTET_FIT_H
#define OCTET_FIT_H

// y = slope·x + intercept.
struct fit_line {
    double slope, intercept;
    double r2;        // coefficient of determination (1 when the points lie on the line)
    double slope_se;  // standard error of the slope (residuals' variance / Sxx; NAN with 2 points)
    int n;            // points used
    double intercept_se;  // standard error of the intercept (residuals' variance · (1/n + mean(x)² / Sxx))
};

// y = a·x² + b·x + c.
struct fit_quad {
    double a, b, c;
    double r2;
    int n;
};

// Least squares over (x[i], y[i]), i < n. Returns 0, or OCT_EINVAL (message set) when the
// points do not determine the fit.
int fit_line(const double *x, const double *y, int n, struct fit_line *out);
int fit_quad(const double *x, const double *y, int n, struct fit_quad *out);

// Standard error of num.slope / den.slope from the two slopes' errors (first order, independent
// fits); NAN when either is unknown or den's slope is 0.
double fit_ratio_se(const struct fit_line *num, const struct fit_line *den);

// R² of predictions yhat against y (1 - SS_res/SS_tot; 1 when y is constant and matched).
double fit_r2(const double *y, const double *yhat, int n);

enum fit_break_kind {
    FIT_BREAK_AT,      // `other` is at least as fast as `base` from length x on
    FIT_BREAK_ALWAYS,  // `other` is at least as fast at every length >= 0
    FIT_BREAK_NEVER,   // `other` is slower at large lengths (or everywhere)
};

struct fit_break {
    enum fit_break_kind kind;
    double x;          // the crossing length, for FIT_BREAK_AT (> 0)
};

// Where `other`'s line falls to or below `base`'s for good: the smallest L >= 0 such that
// other(x) <= base(x) for every x >= L. Parallel lines (slopes equal to 1e-12 relative)
// give ALWAYS when other's intercept is not higher, else NEVER.
struct fit_break fit_break_even(const struct fit_line *base, const struct fit_line *other);

// Writes "never", "always" or the length rounded to an integer into buf.
const char *fit_break_str(struct fit_break b, char *buf, int cap);

#endif
