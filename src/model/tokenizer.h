// tokenizer.h — text ↔ token ids (owns: vocabulary, merges/scores, special ids, the
// chat template string if the model has one; not: the model weights).
// Two algorithms behind one interface: SentencePiece-style (GGUF tokenizer.ggml.model =
// "llama": score-based merges, byte fallback <0xNN>, leading-space prefix, ▁ for space)
// and byte-level BPE (GGUF "gpt2", HF tokenizer.json model.type = "BPE": rank-ordered
// merges over GPT-2's byte→unicode map, pre-split with a PCRE2 regex, Llama-3's by default).
// Invariant: decoding yields raw bytes; detok_push never emits a partial UTF-8 sequence.
#ifndef OCTET_TOKENIZER_H
#define OCTET_TOKENIZER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct gguf;
struct tokenizer;

// From GGUF tokenizer.ggml.* keys (model, tokens, scores, token_type, merges,
// bos_token_id, eos_token_id, add_bos_token, add_space_prefix, pre, chat_template).
int tokenizer_from_gguf(struct tokenizer **out, const struct gguf *g);
// From a HF tokenizer.json (BPE with ByteLevel pre-tokenizer/decoder); reads
// tokenizer_config.json in the same directory, if present, for bos/eos/add_bos/chat_template.
int tokenizer_from_hf_json(struct tokenizer **out, const char *path);
// The stand-in for models without a vocabulary (dummy weights): ids 0..255 are bytes,
// then BOS and EOS; n_vocab may be larger (extra ids decode to nothing).
int tokenizer_bytes(struct tokenizer **out, int n_vocab);
void tokenizer_free(struct tokenizer *t);

int tokenizer_n_vocab(const struct tokenizer *t);
int tokenizer_bos(const struct tokenizer *t);     // -1 if none
int tokenizer_eos(const struct tokenizer *t);     // -1 if none
bool tokenizer_is_eog(const struct tokenizer *t, int id); // EOS, EOT, <|eot_id|>, <|end_of_text|>…
bool tokenizer_add_bos(const struct tokenizer *t); // the model's default for prompts
const char *tokenizer_chat_template(const struct tokenizer *t); // NULL if none
// True for SPM vocabularies that prepend ' ' (as ▁) to the first text fragment of a prompt
// (GGUF tokenizer.ggml.add_space_prefix, default true for "llama"); always false for BPE.
bool tokenizer_add_space_prefix(const struct tokenizer *t);
// The id of the token whose raw vocabulary text is exactly text[0..len) (as stored: "▁the",
// "Ġthe", "<|eot_id|>"), or -1. For stop strings, chat templates and tests.
int tokenizer_token_id(const struct tokenizer *t, const char *text, size_t len);

// Encodes `len` bytes of text. If add_bos, BOS is prepended (when the vocab has one).
// Special-token strings in the text (e.g. "<|eot_id|>") are matched only when
// parse_special is true. *ids is malloc'd; caller frees.
int tokenizer_encode(const struct tokenizer *t, const char *text, size_t len, bool add_bos,
                     bool parse_special, int32_t **ids, int *n_ids);
// tokenizer_encode with parse_special, except that no special token is matched that overlaps one
// of the n_literal byte ranges [literal[2k], literal[2k+1]) (ascending, disjoint): text there is
// read as plain text (chat message content inside a rendered template).
int tokenizer_encode_literal(const struct tokenizer *t, const char *text, size_t len, bool add_bos,
                             const size_t *literal, int n_literal, int32_t **ids, int *n_ids);

// The raw bytes a token stands for (▁ → ' ', <0x0A> → '\n', GPT-2 byte map undone;
// control tokens → "" unless render_special). Returns bytes written (may exceed cap:
// then nothing is written beyond cap).
// Pieces are raw: an SPM word token keeps its leading ' ' (▁the → " the").
size_t tokenizer_piece(const struct tokenizer *t, int id, bool render_special, char *buf, size_t cap);

// Whole-sequence decode, the inverse of tokenizer_encode: concatenated pieces, except that
// when tokenizer_add_space_prefix(t), one leading ' ' is removed from the first piece that
// yields any bytes (leading tokens that render to nothing, such as BOS, are skipped over), so
// decode(encode(x)) == x. Same return/cap contract as tokenizer_piece.
// (llama.cpp strips in the same way; its detokenize only differs when BOS is removed first.)
size_t tokenizer_decode(const struct tokenizer *t, const int32_t *ids, int n_ids, bool render_special,
                        char *buf, size_t cap);

// Incremental detokenizer: feed ids one at a time, get only complete UTF-8 text.
// Invalid sequences become U+FFFD once they can no longer complete (one U+FFFD per maximal
// invalid subpart, as WHATWG/Python). Start from `struct detok d = {0};`.
// It emits raw pieces (no leading-space strip, control tokens render as ""): it is meant for
// generated text, which continues a prompt; use tokenizer_decode for a whole sequence.
struct detok {
    char pending[8];
    int n_pending;
};
// Appends the text of `id` to out (cap bytes); returns bytes written. cap >= 64 suffices
// for any token of at most 56 bytes; longer pieces are truncated only if cap is too small.
size_t detok_push(const struct tokenizer *t, struct detok *d, int id, char *out, size_t cap);
// Flushes what is left at end of stream (incomplete sequence → U+FFFD).
size_t detok_flush(struct detok *d, char *out, size_t cap);

#endif
