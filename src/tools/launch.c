// launch.c — fork/exec of /proc/self/exe serve, readiness from stdout + /health.
// A SIGINT/SIGTERM to the benchmark kills the current child first (the handler only calls
// async-signal-safe kill/signal/raise), so an interrupted sweep leaves no server behind.
#include "launch.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../base/check.h"
#include "http_client.h"

static volatile pid_t g_child;

static void on_signal(int sig) {
    if (g_child > 0) kill(g_child, SIGKILL);
    signal(sig, SIG_DFL);
    raise(sig);
}

static void tail_log(const char *path, char *out, size_t cap) {
    out[0] = 0;
    FILE *f = fopen(path, "r");
    if (!f) return;
    char buf[4096];
    fseek(f, 0, SEEK_END);
    long sz = ftell(f), from = sz > 600 ? sz - 600 : 0;
    fseek(f, from, SEEK_SET);
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = 0;
    fclose(f);
    for (char *q = buf; *q; q++) if (*q == '\n') *q = ' ';
    size_t k = strlen(buf) < cap ? strlen(buf) : cap - 1;
    memcpy(out, buf, k);
    out[k] = 0;
}

static void sleep_ms(int ms) {
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

int launch_server(struct launched_server *s, const char *model, char *const *flags, int n_flags,
                  const char *log_path, double timeout_s) {
    memset(s, 0, sizeof *s);
    snprintf(s->log_path, sizeof s->log_path, "%s", log_path);
    char exe[4096];  // argv[0] only: exec goes through /proc/self/exe
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0) return err_set(OCT_EIO, "cannot find this binary (/proc/self/exe): %s", strerror(errno));
    exe[n] = 0;
    char *del = strstr(exe, " (deleted)");
    if (del) *del = 0;
    char **argv = calloc((size_t)n_flags + 8, sizeof *argv);
    if (!argv) return err_set(OCT_ENOMEM, "launch: out of memory");
    int k = 0;
    argv[k++] = exe; argv[k++] = "serve"; argv[k++] = "--model"; argv[k++] = (char *)model;
    argv[k++] = "--port"; argv[k++] = "0";
    for (int i = 0; i < n_flags; i++) argv[k++] = flags[i];
    int pfd[2];
    if (pipe(pfd) != 0) { free(argv); return err_set(OCT_EIO, "launch: pipe: %s", strerror(errno)); }
    int logfd = open(log_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (logfd < 0) {
        close(pfd[0]); close(pfd[1]); free(argv);
        return err_set(OCT_EIO, "cannot write the server log %s: %s", log_path, strerror(errno));
    }
    signal(SIGINT, on_signal);
    signal(SIGTERM, on_signal);
    pid_t pid = fork();
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGTERM);
        dup2(pfd[1], 1);
        dup2(logfd, 2);
        close(pfd[0]); close(pfd[1]); close(logfd);
        execv("/proc/self/exe", argv);  // the running image, even if a rebuild replaced the file
        _exit(127);
    }
    free(argv);
    close(pfd[1]);
    close(logfd);
    if (pid < 0) { close(pfd[0]); return err_set(OCT_EIO, "launch: fork: %s", strerror(errno)); }
    s->pid = g_child = pid;
    double t0 = http_now_s();
    char line[1024];
    size_t used = 0;
    int rc = OCT_OK;
    for (;;) {  // wait for "octet: serving NAME on http://HOST:PORT"
        double left = timeout_s - (http_now_s() - t0);
        if (left <= 0) { rc = err_set(OCT_EIO, "server did not start within %.0f s", timeout_s); break; }
        struct pollfd p = {pfd[0], POLLIN, 0};
        if (poll(&p, 1, (int)(left * 1000) + 1) <= 0) continue;
        ssize_t r = read(pfd[0], line + used, sizeof line - 1 - used);
        if (r <= 0) { rc = err_set(OCT_EIO, "server exited before listening"); break; }
        used += (size_t)r;
        line[used] = 0;
        char *u = strstr(line, " on http://"), *nl = u ? strchr(u, '\n') : NULL;
        if (u && nl) {
            *nl = 0;
            snprintf(s->base_url, sizeof s->base_url, "%s", u + 4);
            break;
        }
        if (used >= sizeof line - 1) used = 0;
    }
    close(pfd[0]);  // the server prints nothing else on stdout
    while (rc == OCT_OK) {
        char url[300], *body = NULL;
        long status = 0;
        snprintf(url, sizeof url, "%s/health", s->base_url);
        if (http_get(url, NULL, 5, &body, &status) == OCT_OK && status == 200) { free(body); break; }
        free(body);
        if (http_now_s() - t0 > timeout_s) rc = err_set(OCT_EIO, "%s never answered 200", url);
        else sleep_ms(100);
    }
    if (rc < 0) {
        char tail[700], why[512];
        snprintf(why, sizeof why, "%s", err_msg());
        launch_stop(s);
        tail_log(log_path, tail, sizeof tail);
        return err_set(rc, "%s (log %s: ...%s)", why, log_path, tail);
    }
    return OCT_OK;
}

void launch_stop(struct launched_server *s) {
    if (s->pid <= 0) return;
    kill(s->pid, SIGTERM);
    int st;
    for (int i = 0; i < 200; i++) {
        if (waitpid(s->pid, &st, WNOHANG) == s->pid) goto gone;
        sleep_ms(100);
    }
    kill(s->pid, SIGKILL);
    waitpid(s->pid, &st, 0);
gone:
    if (g_child == s->pid) g_child = 0;
    s->pid = 0;
}
