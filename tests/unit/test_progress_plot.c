// test_progress_plot.c — the sweep's progress ETA and charts (src/tools/progress.c, plot.c,
// sweep_report.c's cost model): an ETA weighted by each item's cost (prompt lengths double,
// prefill grows about quadratically), and gnuplot scripts with a log₂ x axis for doubling
// lengths whose fit curves are drawn over the measured range only and never below zero
// (the script is run through gnuplot, which evaluates the curves; skipped without gnuplot).
#include <stdlib.h>
#include <unistd.h>

#include "../../src/tools/plot.h"
#include "../../src/tools/progress.h"
#include "../../src/tools/sweep.h"
#include "../test.h"

TEST(eta_by_cost) {
    static const double cost[3] = {1, 4, 16};
    struct progress p;
    progress_start(&p, "t", 3, true);
    progress_set_costs(&p, cost, 21);
    p.start_s = 0;
    p.done = 1;
    p.done_s = 1.0;                                 // the first item (cost 1) took 1 s
    CHECK_NEAR(progress_eta_s(&p, 1.0), 20.0, 1e-9);  // 4 + 16 left at 1 per second
    CHECK_NEAR(progress_eta_s(&p, 5.0), 16.0, 1e-9);  // counts down while the next one runs
    CHECK(progress_eta_s(&p, 30.0) < 0);              // running past its estimate: no made-up number
    CHECK_NEAR(progress_fraction(&p), 1.0 / 21, 1e-12);
    CHECK_NEAR(progress_eta_all_s(&p, 1.0), 41.0, 1e-9);  // and a second run of the same 21 after it
    progress_set_costs(&p, NULL, 0);                   // equal items: the old count-based estimate
    CHECK_NEAR(progress_eta_s(&p, 1.0), 2.0, 1e-9);
    CHECK_NEAR(progress_fraction(&p), 1.0 / 3, 1e-12);
    p.done = 0;
    CHECK(progress_eta_s(&p, 1.0) < 0);             // nothing finished: no rate yet
}

TEST(cost_model) {
    // doubling a long prompt costs about 4x (prefill's quadratic term), a short one about 2x
    double r_long = sweep_cost_model(8192, 128) / sweep_cost_model(4096, 128);
    double r_short = sweep_cost_model(256, 128) / sweep_cost_model(128, 128);
    CHECK_MSG(r_long > 3.3 && r_long < 4.0, "%g", r_long);
    CHECK_MSG(r_short > 1.3 && r_short < 2.5, "%g", r_short);
    CHECK(sweep_cost_model(256, 256) > sweep_cost_model(256, 128));  // decode counts
}

// Runs the script for series s plus `extra` commands through gnuplot; returns its stdout.
static char *run_gnuplot(const struct plot_series *s, int n, const char *extra) {
    char dir[] = "/tmp/test_plot_XXXXXX", script[64], png[64], cmd[200];
    if (!mkdtemp(dir)) return NULL;
    snprintf(script, sizeof script, "%s/s.gp", dir);
    snprintf(png, sizeof png, "%s/p.png", dir);
    FILE *f = fopen(script, "w");
    plot_write_script(f, png, "t", "x", "y", s, n);
    fprintf(f, "set print '-'\n%s\n", extra);
    fclose(f);
    snprintf(cmd, sizeof cmd, "gnuplot %s 2>&1", script);
    FILE *p = popen(cmd, "r");
    char *out = calloc(1, 4096);
    size_t k = p ? fread(out, 1, 4095, p) : 0;
    out[k] = 0;
    if (p) pclose(p);
    unlink(script);
    unlink(png);
    rmdir(dir);
    return out;
}

TEST(plot_axes_and_fits) {
    static const double x[6] = {256, 512, 1024, 2048, 4096, 8192}, y[6] = {1, 2, 3, 4, 5, 6};
    // y = 1e-5·x² - 500: negative below ~7071 tokens
    struct plot_series s = {"auto (bf16)", x, y, 6, 2, {-500, 0, 1e-5}};
    char *buf = NULL;
    size_t n = 0;
    FILE *m = open_memstream(&buf, &n);
    plot_write_script(m, "/dev/null", "t", "x", "y", &s, 1);
    fclose(m);
    CHECK(strstr(buf, "set logscale x 2"));
    CHECK(strstr(buf, "set yrange [0:*]"));
    CHECK(strstr(buf, "'auto (bf16) (quadratic fit)'"));
    free(buf);
    // lengths within 4x of each other: a linear axis from 0
    struct plot_series lin = {"fp8", x, y, 2, 1, {1, 1, 0}};
    m = open_memstream(&buf, &n);
    plot_write_script(m, "/dev/null", "t", "x", "y", &lin, 1);
    fclose(m);
    CHECK(!strstr(buf, "logscale") && strstr(buf, "set xrange [0:"));
    free(buf);
    if (!plot_available()) { fprintf(stderr, "  (gnuplot missing: curves not evaluated)\n"); return; }
    char *out = run_gnuplot(&s, 1, "print f0(300), f0(8000), f0(100), f0(10000)");
    // below zero, inside the range: omitted; positive: drawn; outside the measured lengths: omitted
    CHECK_MSG(out && !strcmp(out, "NaN 140.0 NaN NaN\n"), "gnuplot printed '%s'", out ? out : "");
    free(out);
}

int main(void) {
    RUN(eta_by_cost);
    RUN(cost_model);
    RUN(plot_axes_and_fits);
    return test_summary("progress_plot");
}
