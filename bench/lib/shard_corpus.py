"""A generated parallel corpus of WMT-like statistics (Zipf-distributed words of syllables,
log-normal lengths) of any size, for the sharded data stage's benchmark."""

from __future__ import annotations

from pathlib import Path

import numpy as np

# -- the generated corpus ------------------------------------------------------------------------

SYLLABLES = {
    "en": "th er on an re he in ed nd ha at en es of or nt ea ti to it st io le is ou ar as de rt ve"
    " ing tion ment ness ly al ch sh wh ow ai ee oo".split(),
    "fr": "le la de es en re on nt ou qu an er ai eu au oi ch é è ê à ç ô î ti té ment tion eur"
    " ais ait ons ez ée ir".split(),
}
PUNCTUATION = {
    "en": [",", ".", "?", "!", ":", ";", "(", ")", "\u201c", "\u201d", "\u2019s", "-", "\u2013"],
    "fr": [",", ".", "?", "!", " :", " ;", "(", ")", "\u00ab", "\u00bb", "\u2019", "-", "\u2013"],
}
WORD_TYPES = 60_000


def vocabulary(lang: str, rng: np.random.Generator) -> np.ndarray:
    """``WORD_TYPES`` made-up words of 1-4 syllables (some capitalized), numbers among them."""
    syllables = np.array(SYLLABLES[lang], dtype=object)
    counts = rng.choice([1, 2, 2, 3, 3, 4], size=WORD_TYPES)
    words = []
    for i, n in enumerate(counts):
        if i % 97 == 0:
            words.append(str(rng.integers(0, 10_000)))
            continue
        word = "".join(rng.choice(syllables, size=n))
        words.append(word.capitalize() if i % 11 == 0 else word)
    return np.array(words, dtype=object)


def zipf_cdf(size: int, exponent: float = 1.07) -> np.ndarray:
    weights = 1.0 / np.arange(1, size + 1) ** exponent
    return np.cumsum(weights / weights.sum())


def sentences(
    words: np.ndarray, lengths: np.ndarray, cdf: np.ndarray, lang: str, rng: np.random.Generator
) -> list[str]:
    """One sentence per length: Zipf-distributed words, punctuation, a capital, a final stop."""
    ids = np.searchsorted(cdf, rng.random(int(lengths.sum())))
    tokens = words[ids]
    punct = PUNCTUATION[lang]
    marks = rng.random(len(tokens)) < 0.08  # about one token in twelve is punctuation
    tokens[marks] = rng.choice(np.array(punct, dtype=object), size=int(marks.sum()))
    out, start = [], 0
    for n in lengths.tolist():
        if n == 0:
            out.append("")
            continue
        body = " ".join(tokens[start : start + n].tolist())
        start += n
        out.append(body[:1].upper() + body[1:] + " .")
    return out


def generate(folder: Path, pairs: int, seed: int = 2014, chunk: int = 100_000) -> tuple[Path, Path]:
    """train.en / train.fr: WMT14-like English-French pairs, written in chunks.

    Lengths: source words log-normal (median 20, mean about 24, a tail past 100, as
    newstest and Europarl), target/source ratio log-normal around 1.1; 2% of pairs
    mismatched (the ratio filter), 0.5% with an empty side, a few over 250 words
    (too_long). Characters: accented letters, typographic quotes and dashes, some
    non-breaking spaces and zero-width characters for the normalizer.
    """
    rng = np.random.default_rng(seed)
    words = {lang: vocabulary(lang, rng) for lang in ("en", "fr")}
    cdf = zipf_cdf(WORD_TYPES)
    paths = (folder / "train.en", folder / "train.fr")
    with open(paths[0], "w", encoding="utf-8") as src_out, open(paths[1], "w", encoding="utf-8") as tgt_out:  # fmt: skip
        for begin in range(0, pairs, chunk):
            n = min(chunk, pairs - begin)
            src_len = np.clip(np.rint(rng.lognormal(3.0, 0.65, n)), 1, 400).astype(int)
            src_len[rng.random(n) < 0.0003] = 260  # over the 250-token limit
            ratio = rng.lognormal(np.log(1.1), 0.15, n)
            odd = rng.random(n) < 0.02
            ratio[odd] = rng.uniform(0.2, 4.0, int(odd.sum()))
            tgt_len = np.clip(np.rint(src_len * ratio), 1, 400).astype(int)
            tgt_len[rng.random(n) < 0.005] = 0
            src = sentences(words["en"], src_len, cdf, "en", rng)
            tgt = sentences(words["fr"], tgt_len, cdf, "fr", rng)
            for i in np.flatnonzero(rng.random(n) < 0.01):  # normalizer work
                src[i] = src[i].replace(" ", "\u00a0 ", 1) + "\u200b"
            src_out.writelines(line + "\n" for line in src)
            tgt_out.writelines(line + "\n" for line in tgt)
    return paths


# -- running the stages --------------------------------------------------------------------------
