// test.h — the unit-test harness (owns: counters, CHECK macros and the TEST_ONLY filter).
// Each tests/unit/test_*.c defines TEST(name) functions and a main() that calls
// RUN(name) for each, then `return test_summary("module");`, which prints
// "module: N passed, N failed" and returns non-zero if any check failed.
#ifndef OCTET_TEST_H
#define OCTET_TEST_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int test_n_pass, test_n_fail, test_cur_fail;

#define CHECK(cond) do { if (cond) test_n_pass++; else { test_n_fail++; test_cur_fail++; \
    fprintf(stderr, "  FAIL %s:%d: %s\n", __FILE__, __LINE__, #cond); } } while (0)
#define CHECK_MSG(cond, ...) do { if (cond) test_n_pass++; else { test_n_fail++; test_cur_fail++; \
    fprintf(stderr, "  FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond); \
    fprintf(stderr, __VA_ARGS__); fputc('\n', stderr); } } while (0)
#define CHECK_EQ_INT(a, b) CHECK_MSG((long long)(a) == (long long)(b), "%lld != %lld", \
    (long long)(a), (long long)(b))
#define CHECK_NEAR(a, b, tol) CHECK_MSG(fabs((double)(a) - (double)(b)) <= (tol), \
    "%.9g vs %.9g (tol %g)", (double)(a), (double)(b), (double)(tol))
#define CHECK_OK(expr) do { int _rc = (expr); CHECK_MSG(_rc == 0, "%s -> %d: %s", #expr, _rc, err_msg()); } while (0)

// TEST_ONLY=a,b (environment): run only the named tests (the GPU test's long groups, one at a time).
static inline int test_selected(const char *name) {
    const char *only = getenv("TEST_ONLY");
    if (!only || !*only) return 1;
    const size_t n = strlen(name);
    for (const char *p = only; (p = strstr(p, name)) != NULL; p += n)
        if ((p == only || p[-1] == ',') && (p[n] == 0 || p[n] == ',')) return 1;
    return 0;
}

#define TEST(name) static void test_##name(void)
#define RUN(name) do { if (!test_selected(#name)) break; test_cur_fail = 0; test_##name(); \
    fprintf(stderr, "%s %s\n", test_cur_fail ? "FAIL" : "ok  ", #name); } while (0)

static inline int test_summary(const char *module) {
    printf("%s: %d passed, %d failed\n", module, test_n_pass, test_n_fail);
    return test_n_fail != 0;
}

// Path of a file under ../shared/models (tests run from the repo root).
#define SHARED_MODEL(name) "../shared/models/" name

#endif
