"""The human-readable report: how each number was made, the tables, learning curves, samples.

``results/report.md`` states the recipe behind every column (BLEU variants and
the sacreBLEU signature, decoding, averaging, perplexity, intervals and tests, training
cost), embeds the tables (the paper beside ours), links the learning curves, the
BLEU-against-steps plot, the Table 3 deltas chart and the paper's Figures 3-5 redrawn (all
drawn by ``figures``), and shows a few sample translations. ``snakemake --report`` wraps the
same files into HTML.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

from transformer_core import __version__
from transformer_core.files import atomic_write_text, read_lines

RECIPE = """\
## How each number was made

- **Model**: the post-norm Transformer of the paper (LayerNorm(x + Dropout(Sublayer(x))), shared
  source/target/softmax embedding scaled by sqrt(d_model), sinusoidal positions; learned ones for row E).
- **Training**: Adam(0.9, 0.98, 1e-9), lr = lr_scale * d_model^-0.5 * min(step^-0.5, step * warmup^-1.5),
  where a configuration sets `cooldown` K (not the paper's recipe) times a line falling from 1 to
  1/K over the run's last K steps; label smoothing eps_ls; about `tokens_per_step` target tokens per
  optimizer step over all devices (gradient accumulation keeps that fixed whatever the device count).
- **Checkpoints**: every `checkpoint_interval` steps; Table 2 averages the last 5 (base) / 20 (big),
  Table 3 uses the last checkpoint without averaging, as the paper did.
- **Decoding**: beam search with GNMT's length penalty ((5+|Y|)/6)^alpha, |Y| counting EOS, stopping
  once no live hypothesis can beat the best finished one; maximum output length = source length + 50
  at paper scale. The paper's beam 4 and alpha 0.6 were its choice on its dev set; where the
  configuration says `dev`, each model's are chosen the same way on its own dev split (the highest
  sacreBLEU over a grid; ties to the paper's value, then to the smaller alpha). Each table names
  the beam and alpha of its scores and where they came from (`decode_from`); the sweeps are below.
- **BLEU, three ways**: `bleu_paper_style` is how the paper's numbers were made (tensor2tensor's
  get_ende_bleu.sh: unicode punctuation replacement, Moses tokenization, hyphen compounds split as
  ##AT##-##AT##, case-sensitive multi-bleu.perl corpus BLEU); `sacrebleu` is sacreBLEU 13a on the
  detokenized output, with its signature below. The paper-style score runs 0.7-1.5 above sacreBLEU.
  `bleu_lowercased_tokenized` is the Multi30k literature's: output and reference lowercased,
  punctuation-normalized and Moses-tokenized (the multi30k dataset's task1-tokenize.sh), then
  multi-bleu.perl.
- **Perplexity** (Table 3): exp of the mean per-token negative log-likelihood on the dev set
  (newstest2013 at paper scale; the notes under each table name this run's sets) at the last
  training step, without label smoothing, per word piece of the run's own vocabulary (not
  comparable across vocabularies).
- **Training cost** (Table 2): `cost_flops_paper_method` = wall time x devices x the device's sustained
  single-precision FLOPS (the paper's method and table of devices); `flops_analytic` counts the model's
  own floating-point operations over the tokens actually trained on.
- **Intervals and significance**: every BLEU has sacreBLEU's 95% bootstrap confidence interval
  (`±` half-width, resampling the test sentences); each Table 3 row's delta against base has the
  p-value of sacreBLEU's paired bootstrap test against base's translations of the same dev set
  (bold: p < 0.05). With several seeds (`seeds`), values are means with their standard deviation.
- **Figures 3-5**: the encoder self-attention of the trained base model (layer 5 of 6, or the last
  layer of a shallower model) on the paper's two example sentences, heads chosen by a stated rule
  (the sharpest from the figure's word, or over the whole sentence).
- **Parameters** (Table 3): exact counts of the trained model (`params_m`) and of the same shape at the
  paper's 37000-token vocabulary (`params_m_at_37k`), beside the paper's column, never adjusted.
"""


def code_span(text: str) -> str:
    """``text`` as a Markdown code span: shown as typed, never as HTML, a link or an image
    (a sample translation is data, and may hold ``<script>`` or ``![](http://...)``). The
    fence is one backtick longer than the longest run inside, as CommonMark asks."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if text[:1] in ("`", " ") or text[-1:] in ("`", " ") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def samples_markdown(label: str, source: str, reference: str, hypothesis: str, n: int = 3) -> str:
    """The first ``n`` lines of a test set: source, reference and our translation."""
    rows = zip(
        *(read_lines(path, strip_cr=True, limit=n) for path in (source, reference, hypothesis)),
        strict=True,
    )
    text = f"### {label}\n\n"
    for i, (src, ref, hyp) in enumerate(rows, 1):
        src, ref, hyp = (code_span(line) for line in (src, ref, hyp))
        text += f"{i}. source: {src}\n   - reference: {ref}\n   - ours: {hyp}\n"
    return text + "\n"


def sweeps_markdown(choices: dict[str, str]) -> str:
    """Each model's decoding settings (``decode_choice`` files by label) and, where they were
    chosen on dev, the sweep: dev sacreBLEU (and length ratio) of every grid point, the chosen
    one in bold, the paper's alpha 0.6 marked."""
    from transformer_core.decoding.dev_choice import PAPER, read_settings
    from transformer_core.tables.translation import decode_origin

    if not choices:
        return ""
    records = {label: read_settings(path) for label, path in choices.items()}
    text = "## Decoding settings\n\n| model | beam | alpha | from |\n|---|---|---|---|\n"
    for label, record in records.items():
        text += f"| {label} | {record['beam']} | {record['alpha']:g} | {decode_origin(record)} |\n"
    swept = {label: record for label, record in records.items() if record.get("sweep")}
    if not swept:
        return text + "\n"
    points = sorted({(p["beam"], p["alpha"]) for r in swept.values() for p in r["sweep"]})
    text += (
        "\nDev sacreBLEU of every grid point (hypothesis/reference length in brackets); **bold**: "
        f"the point chosen; (paper): the paper's beam {PAPER.beam} and alpha {PAPER.alpha}.\n\n"
        "| beam | alpha | " + " | ".join(swept) + " |\n"
        "|---|---|" + "---|" * len(swept) + "\n"
    )
    for beam, alpha in points:
        paper = " (paper)" if (beam, alpha) == (PAPER.beam, PAPER.alpha) else ""
        cells = []
        for record in swept.values():
            found = [p for p in record["sweep"] if (p["beam"], p["alpha"]) == (beam, alpha)]
            if not found:
                cells.append("")
                continue
            point = found[0]
            cell = f"{point['sacrebleu']:.2f}"
            if point.get("length_ratio") is not None:
                cell += f" ({point['length_ratio']:.3f})"
            chosen = (record["beam"], record["alpha"]) == (beam, alpha)
            cells.append(f"**{cell}**" if chosen else cell)
        text += f"| {beam} | {alpha:g}{paper} | " + " | ".join(cells) + " |\n"
    for label, record in swept.items():
        for key in record.get("largest_of_grid") or []:
            text += (
                f"\n{label}: the chosen {key} is the grid's largest; a wider grid may score higher."
            )
    return text + "\n"


def write_report(
    out: str | os.PathLike,
    scale: str,
    tables: dict[str, str],
    scores: dict[str, str],
    samples: list[tuple[str, str, str, str]],
    figures: dict[str, str] | None = None,
    choices: dict[str, str] | None = None,
) -> None:
    """Assemble ``report.md`` from the table markdown files, score JSONs, figures (title -> PNG,
    in order: the learning curves first where there are some), samples and the models'
    decoding settings (label -> ``decode_choice`` JSON)."""
    text = f"# Reproduction report: Attention Is All You Need\n\nScale: {code_span(scale)}; transformer-core {__version__}.\n\n"
    text += RECIPE + "\n"
    signatures = sorted(
        {json.loads(Path(p).read_text())["sacrebleu_signature"] for p in scores.values()}
    )
    if signatures:
        text += "sacreBLEU signature(s): " + ", ".join(f"`{s}`" for s in signatures) + "\n\n"
    for title, path in tables.items():
        text += f"## {title}\n\n{Path(path).read_text(encoding='utf-8')}\n"
    text += sweeps_markdown(choices or {})
    for title, path in (figures or {}).items():
        text += f"## {title}\n\n![{title}]({os.path.relpath(path, Path(out).parent)})\n\n"
    if samples:
        text += "## Sample translations\n\n"
        text += "".join(samples_markdown(*sample) for sample in samples)
    atomic_write_text(out, text)
