"""data.py — generated pass-key training data for the octet passkey model (numpy + stdlib).

Owns: the byte-level vocabulary (token id = byte value, BOS = 256, EOS = 257: exactly what
octet's GGUF "gpt2" tokenizer with 256 byte tokens and no merges produces), and the three
sample formats. Not here: the model, the optimiser, the GGUF writer.

Format "octet" reproduces `octet eval needle --level model` byte for byte
(src/tools/needle_model.c): BOS + intro, then the five filler sentences in cyclic order
(each with a leading space), the needle at a sentence boundary, the question, and here the
answer " 71432." + EOS. Format "varied" draws filler sentences at random from a larger pool;
"multi" hides 2..5 numbered keys and asks for the k-th.

Every token carries a kind: LM (ordinary text), KEY0 (first sight of a random key: not
predictable, weight 0), COPY (the key repeated inside the needle), ANS (the answer), PAD.
Invariant: a sample of format "octet" at length L has exactly the prompt that octet builds
for length L (same filler count, same insertion rule up to the depth that was drawn).
"""
import numpy as np

BOS, EOS, VOCAB = 256, 257, 258
LM, KEY0, COPY, ANS, PAD = 0, 1, 2, 3, 4

INTRO = ("There is an important info hidden inside a lot of irrelevant text. Find it and memorize it. "
         "I will quiz you about the important information there.")
FILLER = ["The grass is green.", "The sky is blue.", "The sun is yellow.", "Here we go.", "There and back again."]
QUESTION = " What is the pass key? The pass key is"

_NOUNS = ["grass", "sky", "sun", "sea", "road", "tree", "house", "river", "cat", "dog", "bird", "car",
          "book", "door", "cloud", "stone", "field", "hill", "lamp", "boat", "moon", "rain", "wind", "snow"]
_ADJS = ["green", "blue", "yellow", "red", "white", "black", "long", "short", "quiet", "warm", "cold",
         "old", "new", "tall", "small", "wide", "dark", "bright", "soft", "calm"]
_OTHER = ["Here we go.", "There and back again.", "Off we go.", "And so on.", "It is a fine day.",
          "We walk on.", "Time goes by.", "All is well.", "Look around.", "Keep going."]
_ORD = {1: "first", 2: "second", 3: "third", 4: "fourth", 5: "fifth"}


def enc(s):
    """Token ids of a str: its UTF-8 bytes (octet's byte-level tokenizer, no merges)."""
    return np.frombuffer(s.encode("utf-8"), dtype=np.uint8).astype(np.int32)


def _filler_pool(rng, n):
    out = []
    for _ in range(n):
        r = rng.random()
        if r < 0.7:
            out.append("The %s is %s." % (_NOUNS[rng.integers(len(_NOUNS))], _ADJS[rng.integers(len(_ADJS))]))
        else:
            out.append(_OTHER[rng.integers(len(_OTHER))])
    return out


def _key(rng, n_digits=5):
    lo = 10 ** (n_digits - 1)
    return str(int(rng.integers(lo, 10 * lo)))


def _needle_segs(key, label=None):
    if label is None:
        return [(" The pass key is ", LM), (key, KEY0), (". Remember it. ", LM), (key, COPY), (" is the pass key.", LM)]
    return [(" The %s pass key is " % label, LM), (key, KEY0), (". Remember it. ", LM), (key, COPY),
            (" is the %s pass key." % label, LM)]


def _fill(sentences_cycle, budget, rng, cyclic):
    """Whole filler sentences (with their leading space) fitting in `budget` tokens."""
    out, used, i = [], 0, 0
    while True:
        s = sentences_cycle[i % len(sentences_cycle)] if cyclic else sentences_cycle[rng.integers(len(sentences_cycle))]
        n = len(s) + 1
        if used + n > budget:
            return out, used
        out.append(" " + s)
        used += n
        i += 1


def sample(rng, length, fmt, early=0.0, first=0.0):
    """One training sample of about `length` prompt tokens: (ids int32 [n], kinds uint8 [n]).
    early: probability that a single needle goes into the first tenth of the filler (so the
    longest distances between needle and question, the hardest case, are not rare).
    first: probability that a single needle goes right after the intro, where `eval needle`
    puts depth 0 % (drawn only when first > 0, so the streams of older recipes are unchanged)."""
    segs = [(None, LM), (INTRO, LM)]  # None = BOS
    if fmt == "multi":
        n_keys = int(rng.integers(2, 6))
        keys = [_key(rng) for _ in range(n_keys)]
        while len(set(keys)) < n_keys:
            keys = [_key(rng) for _ in range(n_keys)]
        ask = int(rng.integers(1, n_keys + 1))
        needles = [_needle_segs(k, _ORD[j + 1]) for j, k in enumerate(keys)]
        question = " What is the %s pass key? The %s pass key is" % (_ORD[ask], _ORD[ask])
        answer = " %s." % keys[ask - 1]
    else:
        n_digits = 5 if fmt == "octet" or rng.random() < 0.8 else int(rng.integers(3, 9))
        key = _key(rng, n_digits)
        needles = [_needle_segs(key)]
        question, answer = QUESTION, " %s." % key
    n_needles = sum(len(s) for nd in needles for s, _ in nd)
    budget = length - 1 - len(INTRO) - n_needles - len(question)
    if fmt == "octet":
        sents, _ = _fill(FILLER, budget, rng, True)
    else:
        sents, _ = _fill(_filler_pool(rng, 64), budget, rng, False)
    n_sent = len(sents)
    # needle positions: sentence boundaries 0..n_sent (distinct and in order for "multi")
    if len(needles) == 1:
        if first > 0 and rng.random() < first:
            at = [0]
        else:
            hi = n_sent // 10 + 1 if early > 0 and rng.random() < early else n_sent + 1
            at = [int(rng.integers(0, hi))]
    else:
        at = sorted(rng.choice(n_sent + 1, size=len(needles), replace=n_sent + 1 < len(needles)).tolist())
    j = 0
    for s in range(n_sent + 1):
        while j < len(needles) and at[j] == s:
            segs += needles[j]
            j += 1
        if s < n_sent:
            segs.append((sents[s], LM))
    segs.append((question, LM))
    segs.append((answer, ANS))
    ids, kinds = [], []
    for text, kind in segs:
        t = np.array([BOS], np.int32) if text is None else enc(text)
        ids.append(t)
        kinds.append(np.full(len(t), kind, np.uint8))
    ids.append(np.array([EOS], np.int32))
    kinds.append(np.array([ANS], np.uint8))
    return np.concatenate(ids), np.concatenate(kinds)


def octet_prompt(length, depth_pct, key):
    """The prompt `octet eval needle --level model` builds (needle_model.c), as token ids."""
    intro = np.concatenate([[BOS], enc(INTRO)]).astype(np.int32)
    needle = enc(" The pass key is %s. Remember it. %s is the pass key." % (key, key))
    question = enc(QUESTION)
    fill = [enc(" " + s) for s in FILLER]
    budget = length - len(intro) - len(needle) - len(question)
    n_sent, ft = 0, 0
    while ft + len(fill[n_sent % 5]) <= budget:
        ft += len(fill[n_sent % 5])
        n_sent += 1
    target = depth_pct / 100.0 * ft
    insert_after, best, cum = 0, 1 << 30, 0
    for s in range(n_sent + 1):
        d = abs(cum - int(target + 0.5))
        if d < best:
            best, insert_after = d, s
        if s < n_sent:
            cum += len(fill[s % 5])
    parts = [intro]
    for s in range(n_sent + 1):
        if s == insert_after:
            parts.append(needle)
        if s < n_sent:
            parts.append(fill[s % 5])
    parts.append(question)
    return np.concatenate(parts).astype(np.int32)


def batch(rng, length, n_seq, mix=(0.6, 0.25, 0.15), early=0.0, first=0.0):
    """n_seq samples of prompt length `length`, right-padded with EOS.
    Returns ids int32 [n_seq, T] and target kinds uint8 [n_seq, T-1] (kind of the token predicted)."""
    fmts = rng.choice(3, size=n_seq, p=np.asarray(mix) / sum(mix))
    samples = [sample(rng, length, ("octet", "varied", "multi")[f], early, first) for f in fmts]
    T = max(len(s[0]) for s in samples)
    ids = np.full((n_seq, T), EOS, np.int32)
    kinds = np.full((n_seq, T), PAD, np.uint8)
    for i, (a, k) in enumerate(samples):
        ids[i, :len(a)] = a
        kinds[i, :len(k)] = k
    return ids, kinds[:, 1:]


def decode(ids):
    return bytes(int(i) for i in ids if i < 256).decode("utf-8", "replace")


if __name__ == "__main__":
    r = np.random.default_rng(0)
    for f in ("octet", "varied", "multi"):
        a, k = sample(r, 400, f)
        print(f, len(a), repr(decode(a)))
        print("  ans:", repr(decode(a[k == ANS])), "copy:", repr(decode(a[k == COPY])), "key0:", repr(decode(a[k == KEY0])))
    p = octet_prompt(1024, 50, "12345")
    print("octet_prompt 1024/50:", len(p))
