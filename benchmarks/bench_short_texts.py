"""Issue 26 part 1: which near-duplicate rule is right at every length? Pure Python/numpy, no database.

Real texts (the English / Chinese paragraphs of ``bench_quality.py``: stdlib docstrings, licences,
``/usr/share/doc``, gettext catalogues, zh man pages; documents of ``corpus.py``) cut at sentence,
then word boundaries into four lengths: 12-30 words, 30-60 words, paragraphs (60-400 words) and
documents (~3,000 characters); Chinese: 20-60 Han characters, paragraphs of >= 60, documents of
~1,000 characters; mixed: a Chinese piece and an English one side by side.

Each base text gets one-edit copies. English: two letters swapped, one word replaced, one word
dropped, one word inserted, one word re-cased, one punctuation mark added or removed. Chinese: one
Han character replaced or dropped, one punctuation mark changed (half/full width or another mark).
Mixed: all of them, each on the part it applies to.

For every rule, by brute force (exact Jaccard of full shingle sets, all pairs of a pool of bases
and their copies):

* ``found``: share of (base, its copy) pairs at Jaccard >= the rule's threshold, per edit kind;
* ``wrong``: share of the pool's answers (pairs at >= threshold) that join two *different* texts:
  texts from different bases whose token edit distance (of the two bases) exceeds max(2, 10 % of
  the longer one).
  The corpus's own near-but-different texts (licence and docstring variants, catalogue messages
  that differ by a clause) are in the pools, so this is where they show;
* ``boiler``: share of pairs of unrelated bases of the same length, given the same opening and
  closing phrase (e.g. "Thanks for sharing!" ... "Best regards."), that the rule calls near-duplicates.

``--sketch`` also reruns the chosen rule's documents/paragraphs through bottom-k sketches of several
sizes (what a collection stores), to choose the stored size against storage.

    python benchmarks/bench_short_texts.py [--n 400] [--rules tok3,c5] [--sketch 128,192,256,384]
    python benchmarks/bench_short_texts.py --client-speed   # client CPU of loads, plain vs verified
    python benchmarks/bench_short_texts.py --candidates     # in-rule copies within K = 11 bits
    python benchmarks/bench_short_texts.py --model-rules    # what the host-table models find, per rule
"""

from __future__ import annotations

import argparse
import random
import re
import sys
import time
from collections import Counter
from pathlib import Path

import numpy as np
import xxhash

sys.path.insert(0, str(Path(__file__).parent))
import bench_quality as bq  # noqa: E402
import corpus  # noqa: E402

from simdb.core import sketch as S  # noqa: E402
from simdb.core import tokenize as T  # noqa: E402
from simdb.core.fingerprint import Fingerprinter  # noqa: E402
from simdb.core.sketch import features as VF  # noqa: E402
from simdb.core.sketch.bands import band_keys_many  # noqa: E402

_HAN = re.compile("[\u4e00-\u9fff]")
_CJK = re.compile(f"[{T.TOKEN_CJK_RANGES}]")
_TOK = re.compile(S.TOKEN_PATTERN)
_WORDISH = re.compile(r"[A-Za-z]{4,}")

BOILER_EN = [("Thanks for sharing this!", "Best regards."), ("Great post.", "Keep up the good work!"),
             ("Hi all,", "Thanks in advance for any help."), ("Quick question:", "Any ideas?")]
BOILER_ZH = [("感谢分享！", "此致敬礼。"), ("大家好，", "先谢谢了！"), ("请问一下：", "有人知道吗？"), ("好文章。", "支持一下！")]


# ------------------------------------------------------------------ rules (text -> set of hashed shingles)


def _h(grams) -> set[int]:
    return {xxhash.xxh64_intdigest(g.encode("utf-8")) >> 1 for g in grams}


def units(text: str, spaces: bool) -> list[str]:
    """The normalised character stream: NFKC + casefold, word characters only (punctuation and
    whitespace dropped; with ``spaces`` one space stands between two word runs)."""
    toks = T.mixed_tokens(T.normalize(text))
    if not spaces:
        return list("".join(toks))
    out: list[str] = []
    for t in toks:
        if out and not (_CJK.match(t) and _CJK.match(out[-1])):
            out.append(" ")
        out.extend(t)
    return out


def width_grams(chars: list[str], n: float, cjk_width: float) -> list[str]:
    """From each character, the shortest run whose width reaches ``n`` (a CJK character counts
    ``cjk_width``, any other 1); runs that reach the end without it: only the first (a short text)."""
    w = [cjk_width if _CJK.match(c) else 1.0 for c in chars]
    out = []
    for i in range(len(chars)):
        acc, j = 0.0, i
        while j < len(chars) and acc < n:
            acc += w[j]
            j += 1
        if acc < n and i > 0:
            break
        out.append("".join(chars[i:j]))
    return out


def rule_tok(n: int):
    def f(text: str) -> set[int]:
        return _h(T.word_ngrams(S.tokens(text), n))
    return f


def rule_chars(n: int, cjk_width: float, spaces: bool = False):
    def f(text: str) -> set[int]:
        return _h(width_grams(units(text, spaces), n, cjk_width))
    return f


RULES = {
    "tok3": (rule_tok(3), 0.8),  # today's default
    "tok2": (rule_tok(2), 0.8),
    "c3": (rule_chars(3, 1.5), 0.8),
    "c4": (rule_chars(4, 2.0), 0.8),
    "c5": (rule_chars(5, 2.5), 0.8),
    "c5-han1": (rule_chars(5, 1.0), 0.8),  # a Han character is one character, like a letter
    "c5-spaces": (rule_chars(5, 2.5, True), 0.8),
    "c6": (rule_chars(6, 3.0), 0.8),
    # the implementation of new collections' scheme (c4 above, hashed by simdb.core.sketch.chars)
    S.SCHEME: (lambda text: set(S.shingle_set(text).tolist()), 0.8),
}


# ------------------------------------------------------------------ texts of every length


def _cut(sentences: list[str], lo: int, hi: int, size) -> list[str]:
    """Consecutive sentences joined until their size reaches ``lo``; a piece over ``hi`` is cut at a word."""
    out, cur = [], []
    for s in sentences:
        cur.append(s)
        joined = " ".join(cur)
        if size(joined) >= lo:
            if size(joined) <= hi:
                out.append(joined)
            else:
                words = joined.split()
                if size(" ".join(words[:hi])) >= lo:
                    out.append(" ".join(words[:hi]))
            cur = []
    return out


def _cut_zh(sentences: list[str], lo: int, hi: int) -> list[str]:
    out, cur = [], ""
    for s in sentences:
        cur += s
        n = len(_HAN.findall(cur))
        if n >= lo:
            if n <= hi:
                out.append(cur.strip())
            cur = ""
    return out


def buckets(rng: random.Random, n: int, n_docs: int) -> dict[tuple[str, str], list[str]]:
    en = bq.dedupe(bq.english_paragraphs()[0])
    zh = bq.dedupe(bq.chinese_paragraphs()[0])
    words = lambda t: len(t.split())  # noqa: E731
    en_sent = [bq._sentences(" ".join(p.split()), False) for p in en]
    zh_sent = [bq._sentences("".join(p.split()), True) for p in zh]
    out: dict[tuple[str, str], list[str]] = {}
    out["en", "12-30w"] = [t for ss in en_sent for t in _cut(ss, 12, 30, words)]
    out["en", "30-60w"] = [t for ss in en_sent for t in _cut(ss, 30, 60, words)]
    out["en", "paragraph"] = [" ".join(p.split()) for p in en if 60 < words(p) <= 400]
    out["en", "document"] = corpus.english_docs(max_chars=None)
    out["zh", "20-60han"] = [t for ss in zh_sent for t in _cut_zh(ss, 20, 60)]
    out["zh", "paragraph"] = ["".join(p.split()) for p in zh if len(_HAN.findall(p)) > 60]
    out["zh", "document"] = corpus.chinese_docs(max_chars=None)
    zs = [t for ss in zh_sent for t in _cut_zh(ss, 8, 25)]
    es = [t for ss in en_sent for t in _cut(ss, 6, 14, words)]
    out["mixed", "short"] = [rng.choice(zs) + " " + rng.choice(es) for _ in range(3 * n)]
    lz = [p for p in out["zh", "paragraph"] if len(_HAN.findall(p)) >= 100]
    le = [p for p in out["en", "paragraph"] if words(p) >= 60]
    mixed = []
    for _ in range(n):
        a, b = bq._sentences(rng.choice(lz), True), bq._sentences(rng.choice(le), False)
        mixed.append(" ".join(x for pair in zip(a, b) for x in pair) + " ".join(a[len(b):] + b[len(a):]))
    out["mixed", "paragraph"] = mixed
    for key, texts in out.items():
        texts = bq.dedupe(texts)
        rng.shuffle(texts)
        out[key] = texts[: n_docs if key[1] == "document" else n]
    return out


# ------------------------------------------------------------------ one-edit copies


def _word_spans(t: str) -> list[tuple[int, int]]:
    return [m.span() for m in re.finditer(r"[A-Za-z]+", t)]


def edits_en(t: str, rng: random.Random, vocab: list[str]) -> dict[str, str]:
    out = {}
    spans = _word_spans(t)
    long_ = [s for s in _WORDISH.finditer(t)]
    if long_:
        m = rng.choice(long_)
        i = rng.randrange(m.start(), m.end() - 1)
        out["swap2"] = t[:i] + t[i + 1] + t[i] + t[i + 2:]
    a, b = rng.choice(spans)
    out["replace"] = t[:a] + rng.choice(vocab) + t[b:]
    ws = t.split(" ")
    i = rng.randrange(len(ws))
    out["drop"] = " ".join(ws[:i] + ws[i + 1:])
    out["insert"] = " ".join(ws[:i] + [rng.choice(vocab)] + ws[i:])
    a, b = rng.choice(spans)
    w = t[a:b]
    out["recase"] = t[:a] + (w.upper() if rng.random() < 0.5 else w.swapcase()) + t[b:]
    p = [m.start() for m in re.finditer(r"[,.;:!?]", t)]
    if p and rng.random() < 0.5:
        i = rng.choice(p)
        out["repunct"] = t[:i] + t[i + 1:]
    else:
        a, b = rng.choice(spans)
        out["repunct"] = t[:b] + rng.choice([",", ";", " -", "!"]) + t[b:]
    return out


_PUNCT_SWAP = {"，": "、", "。": "！", "、": "，", "；": "，", "：": ":", "！": "。", "？": "?", ",": "，", ".": "。"}


def edits_zh(t: str, rng: random.Random, chars: list[str]) -> dict[str, str]:
    out = {}
    pos = [m.start() for m in _HAN.finditer(t)]
    i = rng.choice(pos)
    out["zh-replace"] = t[:i] + rng.choice(chars) + t[i + 1:]
    i = rng.choice(pos)
    out["zh-drop"] = t[:i] + t[i + 1:]
    p = [i for i, c in enumerate(t) if c in _PUNCT_SWAP]
    if p:
        i = rng.choice(p)
        out["zh-punct"] = t[:i] + _PUNCT_SWAP[t[i]] + t[i + 1:]
    else:
        i = rng.choice(pos)
        out["zh-punct"] = t[:i] + "，" + t[i:]
    return out


def copies(lang: str, t: str, rng: random.Random, vocab: list[str], chars: list[str]) -> dict[str, str]:
    if lang == "en":
        return edits_en(t, rng, vocab)
    if lang == "zh":
        return edits_zh(t, rng, chars)
    return {**edits_en(t, rng, vocab), **edits_zh(t, rng, chars)}


# ------------------------------------------------------------------ brute force


def _lev(a: list[str], b: list[str], cap: int) -> int:
    """Token edit distance, stopping early above ``cap``."""
    if abs(len(a) - len(b)) > cap:
        return cap + 1
    prev = list(range(len(b) + 1))
    for i, x in enumerate(a, 1):
        cur = [i] + [0] * len(b)
        for j, y in enumerate(b, 1):
            cur[j] = min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (x != y))
        if min(cur) > cap:
            return cap + 1
        prev = cur
    return prev[-1]


def different(a: str, b: str) -> bool:
    ta, tb = S.tokens(a), S.tokens(b)
    cap = max(2, len(max(ta, tb, key=len)) // 10)
    return _lev(ta, tb, cap) > cap


def pool_pairs(sets: list[set[int]], t: float) -> dict[tuple[int, int], float]:
    """Every pair of the pool at exact Jaccard >= ``t`` -> its Jaccard."""
    ex = bq.exact_pairs([sorted(s) for s in sets], min_j=t - 1e-9)
    n = len(sets)
    return {(k // n, k % n): v for k, v in ex.items()}


def bottomk(s: set[int], k: int) -> list[int]:
    return sorted(s)[:k]


THRESHOLDS = (0.7, 0.75, 0.8, 0.85, 0.9)


def evaluate(rule: str, pools, boiler, log, sketch_size: int | None = None) -> dict:
    """Per pool and threshold: found / wrong / boiler (see the module docstring)."""
    fn, _ = RULES[rule]
    res: dict = {}
    for key, (texts, fam, kinds) in pools.items():
        t0 = time.perf_counter()
        sets = [fn(x) for x in texts]
        if sketch_size:  # what a collection stores: the bottom-k sketch; Jaccard estimated from it
            sk = [bottomk(s, sketch_size) for s in sets]
            sim = lambda i, j: S.sketch_jaccard(sk[i], sk[j], sketch_size) or 0.0  # noqa: E731
            pairs = {ij: sim(*ij) for ij in pool_pairs(sets, min(THRESHOLDS) - 0.1)}
        else:
            sim = lambda i, j: len(sets[i] & sets[j]) / max(1, len(sets[i] | sets[j]))  # noqa: E731
            pairs = pool_pairs(sets, min(THRESHOLDS))
        # judged on the two bases (their copies are one edit from them): one edit distance per pair of bases
        bases_differ: dict[tuple[int, int], bool] = {}
        cross = {}
        for (i, j), v in pairs.items():
            if v >= min(THRESHOLDS) and fam[i] != fam[j]:
                fij = (min(fam[i], fam[j]), max(fam[i], fam[j]))
                if fij not in bases_differ:
                    bases_differ[fij] = different(texts[fij[0]], texts[fij[1]])
                cross[i, j] = bases_differ[fij]
        copy_j = [(kinds[i], sim(fam[i], i)) for i in range(len(texts)) if kinds[i] != "base"]
        bj = [len(a & b) / max(1, len(a | b)) for a, b in ((fn(x), fn(y)) for x, y in boiler[key])]
        res[key] = {}
        for t in THRESHOLDS:
            answers = sum(1 for v in pairs.values() if v >= t)
            wrong = sum(1 for ij, d in cross.items() if d and pairs[ij] >= t)
            per_kind: dict[str, list[bool]] = {}
            for k, j in copy_j:
                per_kind.setdefault(k, []).append(j >= t)
            res[key][t] = r = {
                "found": float(np.mean([j >= t for _, j in copy_j])), "wrong": wrong / max(1, answers),
                "answers": answers, "wrong_n": wrong, "boiler": float(np.mean([j >= t for j in bj])),
                "kinds": {k: float(np.mean(v)) for k, v in per_kind.items()}}
            log(f"{rule:10s} {'/'.join(key):18s} J>={t:.2f} found {r['found']:.3f}  wrong {r['wrong']:.4f} "
                f"({wrong}/{answers})  boiler {r['boiler']:.3f}  " + " ".join(f"{k}={v:.2f}" for k, v in r["kinds"].items()))
        log(f"{rule:10s} {'/'.join(key):18s} shingles {np.mean([len(s) for s in sets]):.0f}, {time.perf_counter() - t0:.1f} s")
    return res


def build_pools(rng: random.Random, n: int, n_docs: int):
    bk = buckets(rng, n, n_docs)
    vocab = [w for ts in bk.values() for x in ts[:200] for w in re.findall(r"[a-z]{3,}", x)]
    chars = [c for ts in bk.values() for x in ts[:200] for c in _HAN.findall(x)]
    pools, boiler = {}, {}
    for (lang, size), bases in bk.items():
        texts, fam, kinds = list(bases), list(range(len(bases))), ["base"] * len(bases)
        for b, x in enumerate(bases):
            for kind, c in copies(lang, x, rng, vocab, chars).items():
                if c != x:
                    texts.append(c)
                    fam.append(b)
                    kinds.append(kind)
        pools[lang, size] = (texts, fam, kinds)
        phrases = BOILER_ZH if lang == "zh" else BOILER_EN
        pairs = []
        for _ in range(len(bases)):
            a, b = rng.sample(bases, 2)
            o, c = rng.choice(phrases)
            sep = "" if lang == "zh" else " "
            pairs.append((o + sep + a + sep + c, o + sep + b + sep + c))
        boiler[lang, size] = pairs
    return pools, boiler


def table(all_res: dict, t: float, out=sys.stdout) -> None:
    keys = list(next(iter(all_res.values())))
    print(f"\n| J >= {t} | " + " | ".join("/".join(k) for k in keys) + " |", file=out)
    print("|---|" + "---:|" * len(keys), file=out)
    for rule, res in all_res.items():
        cells = [f"{res[k][t]['found']:.3f} / {res[k][t]['wrong']:.3f} / {res[k][t]['boiler']:.2f}" for k in keys]
        print(f"| {rule} | " + " | ".join(cells) + " |", file=out)
    print("(cells: found one-edit copies / wrong share of answers / boilerplate pairs called near-duplicates)", file=out)


def client_speed(log, n: int = 20_000, rounds: int = 3) -> None:
    """Client CPU per text of a load, no database: the plain collection's fingerprints
    (``Fingerprinter().many``) against a verified collection's fingerprints + sketches
    (``fingerprints_and_sketches``) with the default scheme; interleaved rounds, best kept (other load on the machine only slows a round down)."""
    rng = random.Random(7)
    en = bq.dedupe(bq.english_paragraphs()[0])
    short = [t for p in en for t in _cut(bq._sentences(" ".join(p.split()), False), 12, 30, lambda x: len(x.split()))]
    plain, cand = Fingerprinter(), VF.candidate_fingerprinter()
    ways = {
        "plain (Fingerprinter().many)": lambda ts: plain.many(ts),
        f"verified {S.SCHEME}, {S.SKETCH_SIZE}": lambda ts: VF.fingerprints_and_sketches(ts, cand, S.Verifier()),
    }
    for name, pool in (("paragraphs", en), ("12-30-word texts", short)):
        texts = [rng.choice(pool) + f" {i}" for i in range(n)]
        best = {w: float("inf") for w in ways}
        for _ in range(rounds):
            for w, f in ways.items():
                t0 = time.perf_counter()
                for s in range(0, n, 5000):
                    f(texts[s : s + 5000])
                best[w] = min(best[w], time.perf_counter() - t0)
        base = best[next(iter(ways))]
        for w, t in best.items():
            log(f"client {name:17s} {w:34s} {t / n * 1e6:7.1f} us/text  {base / t:5.2f}x plain")


def candidate_reach(pools, log, k: int = 11) -> None:
    """Of the one-edit copies within the default rule, the share each candidate stage reaches: the
    candidate fingerprint (``Fingerprinter.preset("verified")``) within ``k`` bits of their base's (the
    Hamming candidate stage of issue 13), and the band keys (:mod:`simdb.core.sketch.bands`) shared
    with their base: at least one (scheme ``oph-b14r5-v2``) and at least two (``oph-b14r5-m2-v3``)."""
    f = VF.candidate_fingerprinter()
    for key, (texts, fam, kinds) in pools.items():
        fps = [f.fingerprint(t, empty=0) for t in texts]
        arrays = [S.shingle_set(t) for t in texts]
        keys = band_keys_many(arrays)
        sets = [set(a.tolist()) for a in arrays]
        inrule = within = 0
        shared = Counter()
        for i, kind in enumerate(kinds):
            a, b = sets[fam[i]], sets[i]
            if kind != "base" and len(a & b) / max(1, len(a | b)) >= 0.8:
                inrule += 1
                within += bin(fps[i] ^ fps[fam[i]]).count("1") <= k
                same = 0 if keys[i] is None or keys[fam[i]] is None else int((keys[i] == keys[fam[i]]).sum())
                shared[min(same, 2)] += 1
        n = max(1, inrule)
        log(f"candidates {'/'.join(key):18s} copies in the rule {inrule:5d}, within {k} bits {within / n:.3f}, "
            f"sharing >= 1 band key {(shared[1] + shared[2]) / n:.3f}, >= 2 {shared[2] / n:.3f}")


def model_rules(pools, boiler, log) -> None:
    """What the model helpers on a host table (:mod:`simdb.core.model_verifier`) answer, per rule: a
    copy is found when it is a candidate of its base (fingerprint within ``K`` bits; under rule 2 also
    sharing at least ``MODEL_MIN_SHARED`` of the 14 band keys) and the sketch Jaccard under the rule is
    >= 0.8 (its verification); ``boiler``: share of unrelated bases sharing an opening and closing
    phrase that the model would call near-duplicates. Rule 2 is also shown with K alone (before the
    band keys), to show what the keys add."""
    from simdb.core.model_verifier import MODEL_MIN_SHARED, MODEL_RULES, model_band_keys, model_fingerprinter

    f = model_fingerprinter()
    hd = lambda a, b: bin(a ^ b).count("1")  # noqa: E731

    def shared(a, b):
        return 0 if a is None or b is None else sum(x == y for x, y in zip(a, b))

    for number, rule, bands in ((1, MODEL_RULES[1], False), (2, MODEL_RULES[2], False), (2, MODEL_RULES[2], True)):
        v = rule.verifier()
        label = f"model rule {number} ({rule.scheme}, {rule.size}{', K or 2 band keys' if bands else ', K alone'})"
        for key, (texts, fam, kinds) in pools.items():
            fps = [f.fingerprint(t, empty=0) for t in texts]
            sks = [v.sketch(t) for t in texts]
            keys = [model_band_keys(t) for t in texts] if bands else [None] * len(texts)
            copies = found = 0
            for i, kind in enumerate(kinds):
                if kind != "base":
                    copies += 1
                    j = v.similarity(sks[i], sks[fam[i]])
                    cand = hd(fps[i], fps[fam[i]]) <= v.k or shared(keys[i], keys[fam[i]]) >= MODEL_MIN_SHARED
                    found += cand and j is not None and j >= v.min_jaccard
            pairs = boiler[key]
            wrong = 0
            for a, b in pairs:
                cand = hd(f.fingerprint(a, empty=0), f.fingerprint(b, empty=0)) <= v.k or (
                    bands and shared(model_band_keys(a), model_band_keys(b)) >= MODEL_MIN_SHARED)
                wrong += cand and (v.similarity(v.sketch(a), v.sketch(b)) or 0) >= v.min_jaccard
            log(f"{label} {'/'.join(key):18s} one-edit copies found "
                f"{found / max(1, copies):.3f} of {copies}, boilerplate pairs called near {wrong / max(1, len(pairs)):.3f}")


def main(argv=None) -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=400, help="base texts per language and length")
    ap.add_argument("--docs", type=int, default=150, help="base documents per language")
    ap.add_argument("--rules", default=",".join(RULES))
    ap.add_argument("--sketch", default="", help="sketch sizes to rerun the first rule with (e.g. 128,256,384)")
    ap.add_argument("--client-speed", action="store_true", help="only: client CPU per text of plain / verified loads")
    ap.add_argument("--candidates", action="store_true", help="only: share of in-rule copies each candidate stage reaches")
    ap.add_argument("--model-rules", action="store_true", help="only: what the model helpers find under each model rule")
    a = ap.parse_args(argv)
    log = lambda s: print(s, flush=True)  # noqa: E731
    if a.client_speed:
        client_speed(log)
        return
    pools, boiler = build_pools(random.Random(26), a.n, a.docs)
    if a.candidates:
        candidate_reach(pools, log)
        return
    if a.model_rules:
        model_rules(pools, boiler, log)
        return
    for key, (texts, _, kinds) in pools.items():
        log(f"pool {'/'.join(key)}: {kinds.count('base')} bases, {len(texts)} texts")
    rules = a.rules.split(",")
    all_res = {r: evaluate(r, pools, boiler, log) for r in rules}
    for size in [int(s) for s in a.sketch.split(",") if s]:
        all_res[f"{rules[0]}@{size}"] = evaluate(rules[0], pools, boiler, log, sketch_size=size)
    for t in THRESHOLDS:
        table(all_res, t)


if __name__ == "__main__":
    main()
