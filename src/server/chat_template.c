// chat_template.c — native renderers for the chat template families octet recognises.
// Each follows the reference Jinja of its family (HF tokenizer_config.json or chat_template.jinja)
// for the plain text-message case: system/user/assistant turns, optional generation prompt.
#include "chat_template.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../base/check.h"
#include "harmony_tools.h"
#include "pyjson.h"
#include "text_output.h"

enum chat_template_kind chat_template_detect(const char *j) {
    if (!j) return CHAT_TEMPLATE_CHATML;
    if (strstr(j, "<|start_header_id|>")) return CHAT_TEMPLATE_LLAMA3;
    if (strstr(j, "<|channel|>") || (strstr(j, "<|start|>") && strstr(j, "<|message|>"))) return CHAT_TEMPLATE_HARMONY;
    if (strstr(j, "<|im_start|>")) return strstr(j, "enable_thinking") ? CHAT_TEMPLATE_QWEN3 : CHAT_TEMPLATE_CHATML;
    if (strstr(j, "<start_of_turn>")) return CHAT_TEMPLATE_GEMMA;
    if (strstr(j, "[INST]")) return CHAT_TEMPLATE_LLAMA2;
    if (strstr(j, "<|user|>") && strstr(j, "<|end|>")) return CHAT_TEMPLATE_PHI3;
    return CHAT_TEMPLATE_CHATML;
}

enum chat_template_kind chat_template_for_arch(const char *arch) {
    if (!arch) return CHAT_TEMPLATE_CHATML;
    if (!strcmp(arch, "llama")) return CHAT_TEMPLATE_LLAMA3;
    if (!strcmp(arch, "mistral") || !strcmp(arch, "mixtral")) return CHAT_TEMPLATE_LLAMA2;
    if (!strcmp(arch, "gemma2") || !strcmp(arch, "gemma3")) return CHAT_TEMPLATE_GEMMA;
    if (!strcmp(arch, "phi3")) return CHAT_TEMPLATE_PHI3;
    if (!strcmp(arch, "gptoss")) return CHAT_TEMPLATE_HARMONY;
    return CHAT_TEMPLATE_CHATML;
}

enum chat_template_kind chat_template_pick(const char *jinja, const char *arch) {
    return jinja ? chat_template_detect(jinja) : chat_template_for_arch(arch);
}

const char *chat_template_name(enum chat_template_kind k) {
    switch (k) {
    case CHAT_TEMPLATE_LLAMA3: return "llama3";
    case CHAT_TEMPLATE_LLAMA2: return "llama2";
    case CHAT_TEMPLATE_GEMMA: return "gemma";
    case CHAT_TEMPLATE_PHI3: return "phi3";
    case CHAT_TEMPLATE_HARMONY: return "harmony";
    case CHAT_TEMPLATE_QWEN3: return "qwen3";
    default: return "chatml";
    }
}

const char *chat_template_end_of_turn(enum chat_template_kind k) {
    switch (k) {
    case CHAT_TEMPLATE_LLAMA3: return "<|eot_id|>";
    case CHAT_TEMPLATE_LLAMA2: return "</s>";
    case CHAT_TEMPLATE_GEMMA: return "<end_of_turn>";
    case CHAT_TEMPLATE_PHI3: return "<|end|>";
    case CHAT_TEMPLATE_HARMONY: return "<|return|>";
    default: return "<|im_end|>";
    }
}

int chat_template_stops(enum chat_template_kind k, const char *out[2]) {
    out[0] = chat_template_end_of_turn(k);
    if (k != CHAT_TEMPLATE_HARMONY) return 1;
    out[1] = "<|call|>";
    return 2;
}

bool chat_template_has_bos(enum chat_template_kind k) {
    return k != CHAT_TEMPLATE_CHATML && k != CHAT_TEMPLATE_QWEN3 && k != CHAT_TEMPLATE_PHI3 &&
           k != CHAT_TEMPLATE_HARMONY;
}

bool chat_template_has_tools(enum chat_template_kind k) {
    return k == CHAT_TEMPLATE_CHATML || k == CHAT_TEMPLATE_QWEN3 || k == CHAT_TEMPLATE_HARMONY;
}

size_t chat_template_default_system(const char *jinja, char *out, size_t cap) {
    static const char OPEN[] = "<|im_start|>system\\n", CLOSE[] = "<|im_end|>";
    for (const char *p = jinja; p && (p = strstr(p, OPEN)); p++) {
        const char *t = p + sizeof OPEN - 1, *e = strstr(t, CLOSE);
        size_t n = e ? (size_t)(e - t) : 0;
        if (n && n < cap && strcspn(t, "'\"{}+\\\n") >= n) {  // (a literal, not an expression's piece)
            memcpy(out, t, n);
            out[n] = 0;
            return n;
        }
    }
    return 0;
}

size_t chat_template_n_spans(const struct chat_msg *msgs, int n, const struct chat_opts *o) {
    size_t k = 2 * (size_t)n + (o ? (size_t)o->n_tools : 0);  // (a kept Qwen3 reasoning is a message's second)
    for (int i = 0; i < n; i++) k += 2 * (size_t)msgs[i].n_calls;
    return 2 * k;
}

// Role as the family spells it; NULL if the role is not a chat role.
static const char *norm_role(const char *r) {
    if (!strcmp(r, "system") || !strcmp(r, "developer")) return "system";
    if (!strcmp(r, "user")) return "user";
    if (!strcmp(r, "assistant")) return "assistant";
    if (!strcmp(r, "tool")) return "tool";
    return NULL;
}

// Appends a message's content (trimmed: Llama-3's {{ message['content'] | trim }}) and records
// where it went in spans[2 * *n_spans ..] (when spans is not NULL).
static int append_span(struct text_buf *b, const char *s, size_t n, size_t *spans, int *n_spans) {
    if (spans) spans[2 * *n_spans] = b->n, spans[2 * *n_spans + 1] = b->n + n, ++*n_spans;
    return text_buf_append(b, s, n);
}

static int append_content(struct text_buf *b, const char *s, bool trim, size_t *spans, int *n_spans) {
    size_t n = strlen(s);
    while (trim && n && strchr(" \t\r\n", *s)) s++, n--;
    while (trim && n && strchr(" \t\r\n", s[n - 1])) n--;
    return append_span(b, s, n, spans, n_spans);
}

// ChatML and Qwen3, with the hermes tool format of Qwen2.5 and Qwen3's templates.
static int render_hermes(struct text_buf *b, enum chat_template_kind k, const struct chat_msg *msgs, int n,
                         const struct chat_opts *o, size_t *spans, int *n_spans) {
#define HA(s) do { if (text_buf_append(b, (s), strlen(s)) < 0) return -1; } while (0)
#define HC(s) do { if (append_content(b, (s), false, spans, n_spans) < 0) return -1; } while (0)
    int i = 0, last_query = -1;
    for (int j = 0; j < n; j++)
        if (!strcmp(norm_role(msgs[j].role), "user")) last_query = j;
    const bool sys = n > 0 && !strcmp(norm_role(msgs[0].role), "system");
    const char *dflt = o && !sys ? o->default_system : NULL;  // (the template's own text: no span)
    if (o && o->n_tools) {  // the tools in the system message (the first message's text before them)
        HA("<|im_start|>system\n");
        if (sys) { HC(msgs[0].content); HA("\n\n"); i = 1; }
        if (dflt) { HA(dflt); HA("\n\n"); }
        HA("# Tools\n\nYou may call one or more functions to assist with the user query.\n\nYou are provided with "
           "function signatures within <tools></tools> XML tags:\n<tools>");
        for (int j = 0; j < o->n_tools; j++) { HA("\n"); HC(o->tools[j]); }
        HA("\n</tools>\n\nFor each function call, return a json object with function name and arguments within "
           "<tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": "
           "<args-json-object>}\n</tool_call><|im_end|>\n");
    } else if (dflt) {
        HA("<|im_start|>system\n"); HA(dflt); HA("<|im_end|>\n");
    }
    for (; i < n; i++) {
        const char *r = norm_role(msgs[i].role), *t = msgs[i].content, *end;
        if (!strcmp(r, "tool")) {  // consecutive results share one user turn
            if (i == 0 || strcmp(norm_role(msgs[i - 1].role), "tool")) HA("<|im_start|>user");
            HA("\n<tool_response>\n"); HC(t); HA("\n</tool_response>");
            if (i == n - 1 || strcmp(norm_role(msgs[i + 1].role), "tool")) HA("<|im_end|>\n");
            continue;
        }
        HA("<|im_start|>"); HA(r); HA("\n");
        if (k == CHAT_TEMPLATE_QWEN3 && !strcmp(r, "assistant")) {
            // Qwen3: the reply's text is what follows its last </think>; its reasoning what precedes the first,
            // after the last <think> there, newlines trimmed (or, where the message has its reasoning_content,
            // that, and the text whole). A reply of the current tool loop (after the last user message) keeps a
            // non-empty reasoning (the last message even an empty one), an earlier loses it
            const char *given = msgs[i].reasoning, *open;
            const char *close = given ? NULL : strstr(t, "</think>"), *rs = given ? given : t;
            const char *re = given ? given + strlen(given) : close ? close : t;
            for (; close && (end = strstr(t, "</think>")); t = end + 8) {}
            while (close && (open = strstr(rs, "<think>")) && open < re) rs = open + 7;
            while (rs < re && *rs == '\n') rs++;
            while (re > rs && re[-1] == '\n') re--;
            const bool keep = i > last_query && (i == n - 1 || re > rs);
            if (keep) {
                HA("<think>\n");
                if (append_span(b, rs, (size_t)(re - rs), spans, n_spans) < 0) return -1;
                HA("\n</think>\n\n");
            }
            if (close || keep) t += strspn(t, "\n");
        }
        HC(t);
        for (int j = 0; j < msgs[i].n_calls; j++) {
            if (j > 0 || *t) HA("\n");
            HA("<tool_call>\n{\"name\": \""); HC(msgs[i].calls[j].name); HA("\", \"arguments\": ");
            HC(msgs[i].calls[j].arguments); HA("}\n</tool_call>");
        }
        HA("<|im_end|>\n");
    }
    return 0;
#undef HA
#undef HC
}

// gpt-oss's harmony format as its chat template writes it: the system message is the model's own (identity,
// dates, reasoning effort, channels); the first system or developer message is the developer message's
// instructions, followed there by the tools (harmony_tools.c); an earlier reply is its final channel, a reply
// that made calls is its text or reasoning (the template's "thinking") in the analysis channel (unless a later
// reply answered) and each call a message to functions.NAME ending <|call|>; a call's result is a message from
// functions.NAME, its text as a JSON string. The template renders only a reply's first call: here every call
// is its own message, and a result is named by its tool_call_id's call (the reply's last call where it names
// none), which is the same text for one call a reply.
static int render_harmony(struct text_buf *b, const struct chat_msg *msgs, int n, bool add_generation_prompt,
                          const struct chat_opts *o, size_t *spans, int *n_spans) {
#define HA(s) do { if (text_buf_append(b, (s), strlen(s)) < 0) return OCT_ENOMEM; } while (0)
#define HC(s) do { if (append_content(b, (s), false, spans, n_spans) < 0) return OCT_ENOMEM; } while (0)
    char today[16];
    const char *date = o && o->date ? o->date : today;
    if (!(o && o->date)) {
        time_t now = time(NULL);
        struct tm tm;
        gmtime_r(&now, &tm);
        strftime(today, sizeof today, "%Y-%m-%d", &tm);
    }
    for (int i = 1; i < n; i++)
        if (!strcmp(norm_role(msgs[i].role), "system"))
            return err_set(OCT_EINVAL, "messages[%d]: a %s message must come first (gpt-oss's harmony format "
                           "has one developer message, before the conversation)", i, msgs[i].role);
    const bool tools = o && o->n_tools;
    HA("<|start|>system<|message|>You are ChatGPT, a large language model trained by OpenAI.\n"
       "Knowledge cutoff: 2024-06\nCurrent date: ");
    HA(date);
    HA("\n\nReasoning: ");
    HA(o && o->reasoning_effort ? o->reasoning_effort : "medium");
    HA("\n\n# Valid channels: analysis, commentary, final. Channel must be included for every message.");
    if (tools) HA("\nCalls to these tools must go to the commentary channel: 'functions'.");
    HA("<|end|>");
    int i = 0;
    const char *dev = n > 0 && !strcmp(norm_role(msgs[0].role), "system") ? (i = 1, msgs[0].content) : "";
    if (*dev || tools) {
        HA("<|start|>developer<|message|>");
        if (*dev) { HA("# Instructions\n\n"); HC(dev); HA("\n\n"); }
        if (tools) {  // (the whole section is the client's text: one span)
            HA("# Tools\n\n");
            size_t at = b->n;
            TRY(harmony_tools_render(o->tools, o->n_tools, b));
            if (spans) spans[2 * *n_spans] = at, spans[2 * *n_spans + 1] = b->n, ++*n_spans;
        }
        HA("<|end|>");
    }
    const struct chat_msg *caller = NULL;  // the last reply with calls, while no plain reply followed it
    for (; i < n; i++) {
        const struct chat_msg *m = &msgs[i];
        const char *r = norm_role(m->role);
        if (!strcmp(r, "user")) {
            HA("<|start|>user<|message|>"); HC(m->content); HA("<|end|>");
        } else if (!strcmp(r, "tool")) {
            if (!caller)
                return err_set(OCT_EINVAL, "messages[%d]: a tool message must follow an assistant message's "
                               "tool_calls (gpt-oss's format names the result by the call)", i);
            const struct chat_tool_call *c = &caller->calls[caller->n_calls - 1];
            for (int j = 0; m->tool_call_id && j < caller->n_calls; j++)
                if (caller->calls[j].id && !strcmp(caller->calls[j].id, m->tool_call_id)) c = &caller->calls[j];
            HA("<|start|>functions."); HC(c->name); HA(" to=assistant<|channel|>commentary<|message|>");
            struct text_buf q = {0};
            int rc = pyjson_string(m->content, strlen(m->content), &q);
            if (rc == 0) rc = append_span(b, q.p, q.n, spans, n_spans);
            text_buf_free(&q);
            if (rc < 0) return OCT_ENOMEM;
            HA("<|end|>");
        } else if (m->n_calls) {
            bool answered = false;  // (a later plain reply: the text was reasoning that led to it, dropped)
            for (int j = i + 1; j < n; j++)
                answered |= !strcmp(norm_role(msgs[j].role), "assistant") && !msgs[j].n_calls;
            if (*m->content && m->reasoning && *m->reasoning)
                return err_set(OCT_EINVAL, "messages[%d]: an assistant message with tool_calls has either content "
                               "or reasoning_content, not both (gpt-oss's template renders one analysis message)", i);
            const char *analysis = *m->content ? m->content : m->reasoning;
            if (analysis && *analysis && !answered) {
                HA("<|start|>assistant<|channel|>analysis<|message|>"); HC(analysis); HA("<|end|>");
            }
            for (int j = 0; j < m->n_calls; j++) {
                HA("<|start|>assistant to=functions."); HC(m->calls[j].name);
                HA("<|channel|>commentary json<|message|>"); HC(m->calls[j].arguments); HA("<|call|>");
            }
            caller = m;
        } else {  // (the reasoning of a reply only where it is the last message and no reply is asked for)
            const bool last = i == n - 1 && !add_generation_prompt;
            if (last && m->reasoning) {
                HA("<|start|>assistant<|channel|>analysis<|message|>"); HC(m->reasoning); HA("<|end|>");
            }
            HA("<|start|>assistant<|channel|>final<|message|>"); HC(m->content);
            HA(last ? "<|return|>" : "<|end|>");
            caller = NULL;
        }
    }
    if (add_generation_prompt) HA("<|start|>assistant");
    return 0;
#undef HA
#undef HC
}

#define A(s) do { if (text_buf_append(&b, (s), strlen(s)) < 0) goto oom; } while (0)
#define C(s, trim) do { if (append_content(&b, (s), (trim), spans, &n_spans) < 0) goto oom; } while (0)

int chat_template_render(enum chat_template_kind k, const struct chat_msg *msgs, int n,
                         bool add_generation_prompt, const char *bos_text, char **out) {
    return chat_template_render_spans(k, msgs, n, add_generation_prompt, bos_text, out, NULL);
}

int chat_template_render_spans(enum chat_template_kind k, const struct chat_msg *msgs, int n,
                               bool add_generation_prompt, const char *bos_text, char **out, size_t *spans) {
    return chat_template_render_opts(k, msgs, n, add_generation_prompt, bos_text, NULL, out, spans);
}

int chat_template_render_opts(enum chat_template_kind k, const struct chat_msg *msgs, int n,
                              bool add_generation_prompt, const char *bos_text, const struct chat_opts *o,
                              char **out, size_t *spans) {
    struct text_buf b = {0};
    int n_spans = 0;
    const char *bos = bos_text ? bos_text : "";
    *out = NULL;
    const bool tools = chat_template_has_tools(k);
    for (int i = 0; i < n; i++) {
        const char *r = msgs[i].role ? norm_role(msgs[i].role) : NULL;
        if (!r || (!tools && !strcmp(r, "tool"))) {
            text_buf_free(&b);
            return err_set(OCT_EINVAL, "messages[%d].role: '%s' is not one of system, developer, user, assistant%s",
                           i, msgs[i].role ? msgs[i].role : "(null)", tools ? ", tool" : "");
        }
        if (msgs[i].n_calls && (!tools || strcmp(r, "assistant"))) {
            text_buf_free(&b);
            return err_set(OCT_EINVAL, "messages[%d].tool_calls: %s", i, tools ? "only an assistant message makes "
                           "tool calls" : "the chat template has no tool calls");
        }
    }
    if ((o && o->n_tools) && !tools) {
        text_buf_free(&b);
        return err_set(OCT_EINVAL, "tools: the chat template (%s) has no tool format", chat_template_name(k));
    }
    switch (k) {
    case CHAT_TEMPLATE_CHATML:
    case CHAT_TEMPLATE_QWEN3:
        if (render_hermes(&b, k, msgs, n, o, spans, &n_spans) < 0) goto oom;
        if (add_generation_prompt) A("<|im_start|>assistant\n");
        if (add_generation_prompt && k == CHAT_TEMPLATE_QWEN3 && o && o->no_thinking)
            A("<think>\n\n</think>\n\n");
        break;
    case CHAT_TEMPLATE_LLAMA3:
        A(bos);
        for (int i = 0; i < n; i++) {
            A("<|start_header_id|>"); A(norm_role(msgs[i].role)); A("<|end_header_id|>\n\n");
            C(msgs[i].content, true);
            A("<|eot_id|>");
        }
        if (add_generation_prompt) A("<|start_header_id|>assistant<|end_header_id|>\n\n");
        break;
    case CHAT_TEMPLATE_LLAMA2: {
        // The system prompt goes inside the first [INST] block; each user turn opens with BOS.
        const char *sys = NULL;
        int i = 0;
        if (n > 0 && !strcmp(norm_role(msgs[0].role), "system")) sys = msgs[0].content, i = 1;
        for (; i < n; i++) {
            const char *r = norm_role(msgs[i].role);
            if (!strcmp(r, "user")) {
                A(bos); A("[INST] ");
                if (sys) { A("<<SYS>>\n"); C(sys, false); A("\n<</SYS>>\n\n"); sys = NULL; }
                C(msgs[i].content, true);
                A(" [/INST]");
            } else if (!strcmp(r, "assistant")) {
                A(" "); C(msgs[i].content, true); A(" </s>");
            } else {
                A(bos); A("[INST] <<SYS>>\n"); C(msgs[i].content, false); A("\n<</SYS>>\n\n [/INST]");
            }
        }
        break;
    }
    case CHAT_TEMPLATE_GEMMA: {
        // Gemma has no system role: the system text prefixes the first user turn.
        const char *sys = NULL;
        A(bos);
        for (int i = 0; i < n; i++) {
            const char *r = norm_role(msgs[i].role);
            if (!strcmp(r, "system")) { sys = msgs[i].content; continue; }
            A("<start_of_turn>"); A(!strcmp(r, "assistant") ? "model" : "user"); A("\n");
            if (sys && !strcmp(r, "user")) { C(sys, false); A("\n\n"); sys = NULL; }
            C(msgs[i].content, true);
            A("<end_of_turn>\n");
        }
        if (add_generation_prompt) A("<start_of_turn>model\n");
        break;
    }
    case CHAT_TEMPLATE_PHI3:
        for (int i = 0; i < n; i++) {
            A("<|"); A(norm_role(msgs[i].role)); A("|>\n"); C(msgs[i].content, false); A("<|end|>\n");
        }
        if (add_generation_prompt) A("<|assistant|>\n");
        break;
    case CHAT_TEMPLATE_HARMONY: {
        int rc = render_harmony(&b, msgs, n, add_generation_prompt, o, spans, &n_spans);
        if (rc == OCT_ENOMEM) goto oom;
        if (rc < 0) { text_buf_free(&b); return rc; }
        break;
    }
    }
    if (!b.p && text_buf_append(&b, "", 0) < 0) goto oom;
    *out = b.p;
    return OCT_OK;
oom:
    text_buf_free(&b);
    return err_set(OCT_ENOMEM, "out of memory rendering the chat template");
}
