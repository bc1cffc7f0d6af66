// launch.h — starting and stopping `octet serve` children for `bench sweep` (owns: the
// child process, its stdout pipe until the "serving ... on URL" line, its stderr log;
// not: what is sent to it). The child gets PR_SET_PDEATHSIG, so it never outlives us.
// Invariant: after launch_server fails or launch_stop returns, no child is left running.
#ifndef OCTET_LAUNCH_H
#define OCTET_LAUNCH_H

#include <sys/types.h>

struct launched_server {
    pid_t pid;              // 0 when none
    char base_url[256];     // http://HOST:PORT
    char log_path[1024];    // the child's stderr
};

// Runs `<this binary> serve --model M --port 0 <flags…>` and waits until it prints its
// URL and GET /health answers 200, at most timeout_s seconds.
int launch_server(struct launched_server *s, const char *model, char *const *flags, int n_flags,
                  const char *log_path, double timeout_s);
// SIGTERM, up to 20 s to drain, then SIGKILL. Safe on a zeroed struct.
void launch_stop(struct launched_server *s);

#endif
