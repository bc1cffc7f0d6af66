// check.h — octet's error convention (owns: the status enum and the per-thread message).
// Library code never exits: a function that can fail returns `int` (0 = OK, <0 = error)
// and records a human-readable message with err_set(); the caller prints err_msg().
// Invariant: after a failing call, err_msg() names the file/key/field at fault.
#ifndef OCTET_CHECK_H
#define OCTET_CHECK_H

#include <stdarg.h>

enum {
    OCT_OK = 0,
    OCT_EINVAL = -1,  // bad argument or malformed input
    OCT_EIO = -2,     // file could not be opened, read or mapped
    OCT_ENOMEM = -3,  // allocation failed
    OCT_EUNSUP = -4,  // valid input we do not support (dtype, architecture, version)
    OCT_EFULL = -5,   // a bounded resource (KV blocks, queue) is exhausted
};

// Records a printf-style message for the current thread and returns `code`, so callers
// can write `return err_set(OCT_EINVAL, "gguf %s: bad magic", path);`.
int err_set(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

// Prepends context ("loading model: ") to the current message; returns `code`.
int err_wrap(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

// The current thread's last message ("" if none).
const char *err_msg(void);

// Propagate a failing status unchanged.
#define TRY(expr) do { int _rc = (expr); if (_rc < 0) return _rc; } while (0)

#endif
