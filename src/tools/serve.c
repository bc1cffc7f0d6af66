// serve.c — `octet serve`: flags → model + engine + HTTP server, then waits for SIGINT or
// SIGTERM and shuts down in order (stop accepting, drain, abort the rest, stop the engine),
// exiting 0. Owns only the process wiring; the server lives in src/server/.
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../base/check.h"
#include "../engine/engine.h"
#include "../model/model.h"
#include "../model/tokenizer.h"
#include "../server/harmony.h"
#include "../server/http.h"
#include "../server/http_guard.h"
#include "cli.h"
#include "tools.h"

static void usage(void) {
    fprintf(stderr,
            "usage: octet serve --model PATH [flags]\n"
            "server flags:\n"
            "  --host ADDR                  address to bind (default 127.0.0.1)\n"
            "  --port N                     port (default 8000; 0 = pick a free one)\n"
            "  --served-model-name NAME     the name clients send as \"model\" (default: the --model file's name;\n"
            "                               its path is accepted too)\n"
            "  --api-key KEY                require 'Authorization: Bearer KEY' on /v1/* (not empty)\n"
            "  --allowed-hosts H1,H2|*      Host header values answered besides IP literals, localhost and\n"
            "                               --host (DNS rebinding protection; * = any)\n"
            "  --max-body-bytes N           largest request body (default 4194304)\n"
            "  --shutdown-grace-ms N        on SIGTERM, how long in-flight requests may finish (default 10000);\n"
            "                               a second SIGTERM or SIGINT exits at once\n"
            "  --timeout-keep-alive S       close a connection idle (or silent mid-request) this long (default 5)\n"
            "  --http-timeout S             answer 408 to a request not received whole in S seconds (default 30)\n"
            "  --max-connections N          open connections at most; more wait to be accepted (default 1024)\n"
            "  --max-connections-per-ip N   open connections from one address at most; more are refused\n"
            "                               (default 256; 0 = no limit)\n"
            "engine flags:\n"
            "  --max-num-seqs N             running requests per step (default 64)\n"
            "  --enable-chunked-prefill | --no-enable-chunked-prefill   (default on)\n"
            "  --enable-prefix-caching | --no-enable-prefix-caching     (default on)\n"
            "  --async-scheduling | --no-async-scheduling   launch a greedy decode step before the previous\n"
            "                               one's tokens are read back (default on where the backend runs\n"
            "                               steps asynchronously: CUDA)\n"
            "  --kv-cache-memory BYTES      KV pool budget (default: a quarter of RAM on the CPU; on a GPU what\n"
            "                               --gpu-memory-utilization leaves after weights and activations)\n"
            "  --gpu-memory-utilization F   share of the GPU's memory octet may use in all (default 0.9)\n"
            "  --num-kv-blocks N            KV pool size in blocks (overrides the budget; for tests)\n"
            "chat flags:\n"
            "  --special-tokens-in-content  parse special-token text (<|eot_id|>, <|im_end|>...) inside chat message\n"
            "                               content too; by default only the chat template's own text holds special\n"
            "                               tokens, so a message cannot forge a turn boundary\n"
            "  --reasoning-parser qwen3|deepseek_r1  reply's <think> block as reasoning_content, the rest as\n"
            "                               content (vLLM's flag; qwen3: a reply that opens with <think>,\n"
            "                               deepseek_r1: every reply until </think>); gpt-oss's harmony replies\n"
            "                               are always split by channel\n"
            "  --enable-auto-tool-choice --tool-call-parser hermes|openai   tool calling as vLLM's flags do it: a\n"
            "                               request's tools in the prompt, the reply's calls returned as tool_calls\n"
            "                               (tool_choice auto or none; without the flags, tools only with\n"
            "                               tool_choice none); hermes: ChatML and Qwen3 templates, the reply's\n"
            "                               <tool_call> blocks; openai: gpt-oss, its messages to functions.NAME\n");
    cli_print_model_flags();
}

// Waits for a second SIGINT/SIGTERM during shutdown and exits at once (status 1).
static void *second_signal(void *arg) {
    int sig = 0;
    sigwait(arg, &sig);
    fprintf(stderr, "octet: second %s: exiting without finishing the shutdown\n", sig == SIGINT ? "SIGINT" : "SIGTERM");
    _exit(1);
}

// Server/engine flags that are not shared with other subcommands. Returns 1 if consumed,
// 0 if unknown, <0 on a bad value.
static int parse_serve_flag(struct engine_options *eo, struct server_options *so, const char **name,
                            int argc, char **argv, int *i) {
    const char *f = argv[*i], *v;
    long n;
    if (!strcmp(f, "--enable-chunked-prefill")) eo->enable_chunked_prefill = true;
    else if (!strcmp(f, "--no-enable-chunked-prefill")) eo->enable_chunked_prefill = false;
    else if (!strcmp(f, "--enable-prefix-caching")) eo->enable_prefix_caching = true;
    else if (!strcmp(f, "--no-enable-prefix-caching")) eo->enable_prefix_caching = false;
    else if (!strcmp(f, "--async-scheduling")) eo->async_scheduling = ENGINE_ASYNC_AUTO;
    else if (!strcmp(f, "--no-async-scheduling")) eo->async_scheduling = ENGINE_ASYNC_OFF;
    else if (!strcmp(f, "--gpu-memory-utilization")) {
        double d;
        if (!(v = cli_value(argc, argv, i))) return OCT_EINVAL;
        TRY(cli_float(f, v, &d));
        if (!(d > 0 && d <= 1)) return err_set(OCT_EINVAL, "--gpu-memory-utilization: %g must be in (0, 1]", d);
        eo->gpu_memory_utilization = d;
    } else if (!strcmp(f, "--host") || !strcmp(f, "--port") || !strcmp(f, "--served-model-name") ||
             !strcmp(f, "--api-key") || !strcmp(f, "--max-body-bytes") || !strcmp(f, "--max-num-seqs") ||
             !strcmp(f, "--kv-cache-memory") || !strcmp(f, "--num-kv-blocks") || !strcmp(f, "--shutdown-grace-ms") ||
             !strcmp(f, "--allowed-hosts") || !strcmp(f, "--timeout-keep-alive") || !strcmp(f, "--http-timeout") ||
             !strcmp(f, "--max-connections") || !strcmp(f, "--max-connections-per-ip")) {
        if (!(v = cli_value(argc, argv, i))) return OCT_EINVAL;
        if (!strcmp(f, "--host")) so->host = v;
        else if (!strcmp(f, "--allowed-hosts")) so->allowed_hosts = v;
        else if (!strcmp(f, "--timeout-keep-alive")) {
            TRY(cli_int(f, v, 1, 86400, &n));
            so->timeout_keep_alive_s = (int)n;
        } else if (!strcmp(f, "--http-timeout")) {
            TRY(cli_int(f, v, 1, 86400, &n));
            so->http_timeout_s = (int)n;
        } else if (!strcmp(f, "--max-connections")) {
            TRY(cli_int(f, v, 1, 1 << 20, &n));
            so->max_connections = (int)n;
        } else if (!strcmp(f, "--max-connections-per-ip")) {
            TRY(cli_int(f, v, 0, 1 << 20, &n));
            so->max_connections_per_ip = (int)n;
        }
        else if (!strcmp(f, "--served-model-name")) *name = v;
        else if (!strcmp(f, "--api-key")) so->api_key = v;
        else if (!strcmp(f, "--port")) {
            TRY(cli_int(f, v, 0, 65535, &n));
            so->port = (int)n;
        } else if (!strcmp(f, "--max-body-bytes")) {
            TRY(cli_int(f, v, 1, 1L << 40, &n));
            so->max_body_bytes = (size_t)n;
        } else if (!strcmp(f, "--shutdown-grace-ms")) {
            TRY(cli_int(f, v, 0, 1L << 30, &n));
            so->shutdown_grace_ms = (int)n;
        } else if (!strcmp(f, "--max-num-seqs")) {
            TRY(cli_int(f, v, 1, 1 << 20, &n));
            eo->max_num_seqs = (int)n;
        } else if (!strcmp(f, "--num-kv-blocks")) {
            TRY(cli_int(f, v, 1, 1L << 30, &n));
            eo->num_kv_blocks = (int)n;
        } else {
            TRY(cli_int(f, v, 1, 1L << 50, &n));
            eo->kv_cache_memory_bytes = n;
        }
    } else {
        return 0;
    }
    return 1;
}

// The server's own flags, for the "did you mean" of a misspelled one (cli_known adds the model flags).
static const char *const serve_flags[] = {"--allowed-hosts", "--api-key", "--async-scheduling",
    "--enable-chunked-prefill", "--enable-prefix-caching", "--gpu-memory-utilization", "--host", "--http-timeout",
    "--kv-cache-memory", "--kv-cache-memory-bytes", "--max-body-bytes", "--max-connections",
    "--max-connections-per-ip", "--max-num-seqs", "--no-async-scheduling", "--no-enable-chunked-prefill",
    "--no-enable-prefix-caching", "--num-kv-blocks", "--port", "--served-model-name", "--shutdown-grace-ms",
    "--reasoning-parser", "--special-tokens-in-content", "--timeout-keep-alive", "--enable-auto-tool-choice",
    "--tool-call-parser", NULL};

// argv[1..argc) into the flag structs; 1: --help was asked for; <0: a bad flag (err_msg says which).
// (chat: the chat flags' fields of the server's context)
static int parse_args(int argc, char **argv, struct cli_model_args *a, struct engine_options *eo,
                      struct server_options *so, const char **name, struct oai_context *chat) {
    bool auto_tool = false, parser = false;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) return 1;
        if (!strcmp(argv[i], "--special-tokens-in-content")) { chat->special_in_content = true; continue; }
        if (!strcmp(argv[i], "--enable-auto-tool-choice")) { auto_tool = true; continue; }
        if (!strncmp(argv[i], "--tool-call-parser", 18) && (argv[i][18] == 0 || argv[i][18] == '=')) {
            const char *v = argv[i][18] == '=' ? argv[i] + 19 : i + 1 < argc ? argv[++i] : "";
            if (strcmp(v, "hermes") && strcmp(v, "openai"))
                return err_set(OCT_EINVAL, "--tool-call-parser '%s': octet parses hermes (Qwen2.5 and Qwen3's "
                               "<tool_call> format) and openai (gpt-oss's harmony calls)", v);
            parser = true;
            chat->tool_parser_harmony = !strcmp(v, "openai");
            continue;
        }
        if (!strncmp(argv[i], "--reasoning-parser", 18) && (argv[i][18] == 0 || argv[i][18] == '=')) {
            const char *v = argv[i][18] == '=' ? argv[i] + 19 : i + 1 < argc ? argv[++i] : "";
            if (!strcmp(v, "qwen3")) chat->reasoning = OAI_REASONING_QWEN3;
            else if (!strcmp(v, "deepseek_r1")) chat->reasoning = OAI_REASONING_DEEPSEEK_R1;
            else return err_set(OCT_EINVAL, "--reasoning-parser '%s': one of qwen3, deepseek_r1", v);
            continue;
        }
        int rc = cli_parse_model_flag(a, argc, argv, &i);
        if (rc == 0) rc = parse_serve_flag(eo, so, name, argc, argv, &i);
        if (rc < 0) return rc;
        if (rc == 0) {  // "unknown flag" with a "did you mean"
            cli_known(argv[i], serve_flags);
            return OCT_EINVAL;
        }
    }
    if (auto_tool != parser)
        return err_set(OCT_EINVAL, "%s: tool calling takes --enable-auto-tool-choice and --tool-call-parser "
                       "together", auto_tool ? "--enable-auto-tool-choice" : "--tool-call-parser");
    chat->tool_parser = parser;
    return OCT_OK;
}

int serve_check_flags(char **words, int n) {
    char **argv = calloc((size_t)n + 2, sizeof *argv);
    if (!argv) return err_set(OCT_ENOMEM, "out of memory");
    argv[0] = "serve";
    for (int i = 0; i < n; i++) argv[i + 1] = words[i];
    struct cli_model_args a;
    cli_model_args_default(&a);
    struct engine_options eo;
    engine_options_default(&eo);
    struct server_options so;
    server_options_default(&so);
    const char *name = NULL;
    struct oai_context chat = {0};
    int rc = parse_args(n + 1, argv, &a, &eo, &so, &name, &chat);
    free(argv);
    return rc < 0 ? rc : OCT_OK;
}

// The chat template and reasoning parser the server runs with (c->tmpl picked, c->reasoning set), and the
// startup line that names them; <0 (err_msg says why) for a combination that cannot work. Harmony needs its
// special tokens: a checkpoint whose own template is harmony without them is refused, a gpt-oss shape without a
// template or those tokens (dummy:gpt-oss-20b's byte vocabulary) chats in ChatML.
static int chat_setup(struct oai_context *c, const struct model *m, const char *tmpl) {
    struct harmony hm;
    const bool no_harmony = c->tmpl == CHAT_TEMPLATE_HARMONY && harmony_init(&hm, m->tok) < 0;
    if (no_harmony && tmpl) {
        char why[256];
        snprintf(why, sizeof why, "%s", err_msg());  // (err_set writes the buffer err_msg reads)
        return err_set(OCT_EINVAL, "chat template harmony: %s", why);
    }
    if (no_harmony) c->tmpl = CHAT_TEMPLATE_CHATML;
    if (c->reasoning && c->tmpl == CHAT_TEMPLATE_HARMONY)
        return err_set(OCT_EINVAL, "--reasoning-parser: gpt-oss's harmony replies are split by their channels, "
                       "not a <think> block");
    if (c->reasoning && tokenizer_token_id(m->tok, "</think>", 8) < 0)
        return err_set(OCT_EINVAL, "--reasoning-parser: the vocabulary has no </think> token");
    const bool harmony = c->tmpl == CHAT_TEMPLATE_HARMONY;
    if (c->tool_parser && (!chat_template_has_tools(c->tmpl) || c->tool_parser_harmony != harmony))
        return err_set(OCT_EINVAL, "--tool-call-parser %s: the chat template (%s) has %s", c->tool_parser_harmony ?
                       "openai" : "hermes", chat_template_name(c->tmpl), !chat_template_has_tools(c->tmpl) ?
                       "no tool format" : harmony ? "gpt-oss's calls (--tool-call-parser openai)" :
                       "the hermes tool format (--tool-call-parser hermes)");
    static char dflt[512];  // (the server's one context holds it while it runs)
    const bool has_dflt = c->tmpl == CHAT_TEMPLATE_CHATML && tmpl && chat_template_default_system(tmpl, dflt, 512);
    c->default_system = has_dflt ? dflt : NULL;
    if (no_harmony)
        fprintf(stderr, "octet: chat template: chatml (the model has none, and the %s family's, harmony, needs "
                "special tokens the vocabulary lacks)\n", m->cfg.arch);
    else
        fprintf(stderr, "octet: chat template: %s%s%s%s%s%s%s\n", chat_template_name(c->tmpl),
                tmpl ? "" : " (the model has none: the ", tmpl ? "" : m->cfg.arch, tmpl ? "" : " family's)",
                !c->tool_parser ? "" : harmony ? "; tool calls: openai" : "; tool calls: hermes",
                c->default_system ? "; default system prompt: " : "", c->default_system ? c->default_system : "");
    return 0;
}

int cmd_serve(int argc, char **argv) {
    struct cli_model_args a;
    cli_model_args_default(&a);
    struct engine_options eo;
    engine_options_default(&eo);
    struct server_options so;
    server_options_default(&so);
    const char *name = NULL;
    struct oai_context chat = {0};
    const int prc = parse_args(argc, argv, &a, &eo, &so, &name, &chat);
    if (prc == 1) { usage(); return 0; }
    if (prc < 0) goto bad;
    if (!a.model) { err_set(OCT_EINVAL, "--model is required"); goto bad; }
    if (so.api_key && !*so.api_key) {
        err_set(OCT_EINVAL, "--api-key is empty (an empty key would let anyone in)");
        goto bad;
    }
    if (!so.api_key && !host_is_loopback(so.host))
        fprintf(stderr, "octet: warning: --host %s is reachable from other machines and there is no --api-key: "
                        "anyone who can connect can use the server\n", so.host);
    // the shared flags land in runner_options; the engine takes the same values
    eo.kv = a.ro.kv;
    eo.n_threads = a.ro.n_threads;
    memcpy(eo.device, a.ro.device, sizeof eo.device);
    eo.fp8_math = a.ro.fp8_math;
    eo.fp8_accum = a.ro.fp8_accum;
    eo.batch_invariant = a.ro.batch_invariant;
    eo.enforce_eager = a.ro.enforce_eager;
    if (a.ro.max_ctx > 0) eo.max_model_len = a.ro.max_ctx;
    for (int i = 1; i < argc; i++)  // runner_options has a default here; only an explicit flag overrides the engine's
        if (!strcmp(argv[i], "--max-num-batched-tokens")) eo.max_num_batched_tokens = a.ro.max_step_tokens;

    // Every thread created from here on inherits this mask; only sigwait below sees the signals.
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGINT);
    sigaddset(&sigs, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &sigs, NULL);
    signal(SIGPIPE, SIG_IGN);

    struct model *m = NULL;
    struct engine *e = NULL;
    struct server *s = NULL;
    if (cli_model_load(&m, &a) < 0) { fprintf(stderr, "octet: %s\n", err_msg()); return 1; }
    if (engine_create(&e, m, &eo) < 0) { fprintf(stderr, "octet: %s\n", err_msg()); model_free(m); return 1; }
    engine_memory_plan_log(e, stderr);
    cli_print_weights_load(stderr, m);
    struct engine_memory_plan plan;
    engine_memory_plan_get(e, &plan);
    const char *tmpl = tokenizer_chat_template(m->tok);
    // the default served name is the file's name, not its path (which /v1/models would disclose)
    const char *base = strrchr(a.model, '/');
    base = base && base[1] ? base + 1 : a.model;
    struct oai_context c = {.tok = m->tok, .served_name = name ? name : base, .model_path = a.model,
                            .max_model_len = plan.max_model_len, .tmpl = chat_template_pick(tmpl, m->cfg.arch)};
    c.special_in_content = chat.special_in_content;
    c.reasoning = chat.reasoning;
    c.tool_parser = chat.tool_parser;
    c.tool_parser_harmony = chat.tool_parser_harmony;
    if (chat_setup(&c, m, tmpl) < 0 || server_start(&s, e, &c, &so) < 0) {
        fprintf(stderr, "octet: %s\n", err_msg());
        engine_destroy(e);
        model_free(m);
        return 1;
    }
    printf("octet: serving %s on http://%s:%d\n", c.served_name, so.host, server_port(s));
    fflush(stdout);

    int sig = 0;
    sigwait(&sigs, &sig);
    fprintf(stderr, "octet: %s received, shutting down (send it again to exit at once)\n",
            sig == SIGINT ? "SIGINT" : "SIGTERM");
    pthread_t second;
    if (pthread_create(&second, NULL, second_signal, &sigs) == 0) pthread_detach(second);
    server_stop(s);
    engine_destroy(e);
    model_free(m);
    fprintf(stderr, "octet: stopped\n");
    return 0;
bad:
    return cli_usage_error();
}
