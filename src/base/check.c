// check.c — the per-thread error message behind check.h.
#include "check.h"

#include <stdio.h>
#include <string.h>

static _Thread_local char err_buf[1024];

int err_set(int code, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err_buf, sizeof err_buf, fmt, ap);
    va_end(ap);
    return code;
}

int err_wrap(int code, const char *fmt, ...) {
    char prefix[512], old[sizeof err_buf];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    memcpy(old, err_buf, sizeof old);
    size_t np = strlen(prefix), no = strnlen(old, sizeof old - 1);
    if (np > sizeof err_buf - 1) np = sizeof err_buf - 1;
    if (np + no > sizeof err_buf - 1) no = sizeof err_buf - 1 - np;
    memcpy(err_buf, prefix, np);
    memcpy(err_buf + np, old, no);
    err_buf[np + no] = 0;
    return code;
}

const char *err_msg(void) { return err_buf; }
