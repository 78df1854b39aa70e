"""The data stage's files and options: each language pair's texts, shards and sentencepiece
settings, and the treebank of the parsing runs (workflow/rules/data.smk, parsing.smk).

A language pair's training corpus runs as ``pairs.<pair>.shards`` shards (default: by the
corpus size in the registry, ``data.shards.default_count``), named ``0003-of-0008``. The count
is per pair, so the shard names are expanded here (Snakemake's scattergather has one count per
workflow). The parsing runs train on data folders with pair-like names
(``config_facts.PARSING_PAIRS``): their texts are the treebank's words (source) and
linearized trees (target), and every run is checked on the treebank's own dev and test.
"""

from __future__ import annotations

import os
from typing import Any

from transformer_core.data.binarized import split_files
from transformer_core.data.registry import load_registry
from transformer_core.data.shards import default_count, expected_pairs, parse_name
from transformer_core.data.shards import name as shard_name
from transformer_core.errors import ConfigError
from transformer_core.settings import (
    PrepareSettings,
    SentencePieceSettings,
    TreebankSettings,
    command_flags,
)
from transformer_core.workflow_plan.config_facts import PARSING_PAIRS, table4_unavailable

# A binarized split's files, its header first (the rules name a split by its header's path).
BINARIZED_SUFFIXES = (".json",) + tuple(
    str(path) for key, path in split_files("").items() if key != "json"
)


def languages(pair: str) -> list[str]:
    """``[src, tgt]`` of a pair name such as ``en_de``."""
    return pair.split("_")


def is_parsing(pair: str) -> bool:
    """Whether ``pair`` is the data folder of a Table 4 run (``parse_treebank``, ``parse_semi``)."""
    return pair in PARSING_PAIRS.values()


def require_table4(config: dict[str, Any]) -> None:
    """Stop, naming the key to set, when Table 4's data is asked for but not configured."""
    reason = table4_unavailable(config)
    if reason:
        raise ConfigError(reason)


def shard_args(shard: str) -> list[int | str]:
    """`prepare --shard I --shards N` of the shard named ``shard``."""
    index, count = parse_name(shard)
    return ["--shard", index, "--shards", count]


def split_prefixes(inputs: list[str], report: str) -> list[str]:
    """The shards' split prefixes, from their headers among the merge's ``inputs``."""
    return [path[: -len(".json")] for path in inputs if path.endswith(".json") and path != report]


class DataPlan:
    """The data files and options of one validated configuration (a dict, the schema's
    defaults in)."""

    def __init__(self, config: dict[str, Any]):
        self.config = config
        self.table4 = config.get("table4") or {}

    # --- language pairs ----------------------------------------------------------------------

    def dataset(self, pair: str) -> str:
        return self.config["pairs"][pair]["dataset"]

    def mirror_args(self) -> list[str]:
        """`download --mirror URL` when the configuration names a mirror."""
        mirror = self.config.get("mirror")
        return ["--mirror", mirror] if mirror else []

    def treebank_file(self, pair: str, split: str, ext: str) -> str:
        """A parsing run's text: the semi-supervised run trains on the treebank plus its
        corpus, and every run is checked on the treebank's own dev and test sections."""
        folder = pair if split == "train" else PARSING_PAIRS["wsj_only"]
        return f"data/{folder}/treebank/{split}.{ext}"

    def parallel_text(self, pair: str, split: str) -> tuple[str, str]:
        """(source, target) text of a split: prepared sentences, or words and linearized trees."""
        if is_parsing(pair):
            return self.treebank_file(pair, split, "words"), self.treebank_file(pair, split, "tree")
        return f"data/{pair}/prepared/{split}.src", f"data/{pair}/prepared/{split}.tgt"

    def prepare_options(self, pair: str) -> list[str]:
        """`prepare` options beyond the languages, one per PrepareSettings field the pair's
        configuration sets (``settings.command_flags``): lowercase, tokenize, filter."""
        return command_flags(PrepareSettings, self.config["pairs"][pair])

    def detokenize_args(self, pair: str) -> list[str]:
        """`translate --detokenize TGT` where the pair's text is Moses-tokenized
        (pairs.<pair>.tokenize): its decodes are written, and scored, as running text."""
        if not self.config["pairs"].get(pair, {}).get("tokenize"):
            return []
        return ["--detokenize", languages(pair)[1]]

    def binarize_inputs(self, pair: str, split: str) -> dict[str, str]:
        src, tgt = self.parallel_text(pair, split)
        return {"spm": f"data/{pair}/spm.model", "src": src, "tgt": tgt}

    def reference(self, pair: str, split: str) -> str:
        """The raw target side of a split, as sacreBLEU scores against it."""
        return f"data/{pair}/raw/{split}.{languages(pair)[1]}"

    # --- sentencepiece -----------------------------------------------------------------------

    def spm_inputs(self, pair: str) -> list[str]:
        """The BPE model's text: the treebank's training text, or a pair's prepared shards."""
        if is_parsing(pair):
            return list(self.parallel_text(pair, "train"))
        return self.shard_texts(pair)

    def vocab_size(self, pair: str) -> int:
        if pair == PARSING_PAIRS["semi_supervised"]:
            return self.table4["semi_supervised_vocab_size"]
        if is_parsing(pair):
            return self.table4["vocab_size"]
        return self.config["pairs"][pair]["vocab_size"]

    def spm_options(self, pair: str) -> list[str]:
        """`spm train` options beyond the vocabulary size, one per SentencePieceSettings field
        the configuration sets (``settings.command_flags``): the pair's spm_sample_size, and
        table4.split_by_unicode_script for the parsing runs."""
        settings = (
            {"split_by_unicode_script": self.table4["split_by_unicode_script"]}
            if is_parsing(pair)
            else self.config["pairs"][pair]
        )
        return command_flags(SentencePieceSettings, settings)

    # --- shards ------------------------------------------------------------------------------

    def shard_count(self, pair: str) -> int:
        """pairs.<pair>.shards, else the default for the dataset's size in the registry."""
        settings = self.config["pairs"][pair]
        if "shards" in settings:
            return settings["shards"]
        return default_count(expected_pairs(load_registry().dataset(settings["dataset"])))

    def shard_names(self, pair: str) -> list[str]:
        count = self.shard_count(pair)
        return [shard_name(i, count) for i in range(count)]

    def shard_reports(self, pair: str) -> list[str]:
        return [f"data/{pair}/shards/prepared/{s}.report.json" for s in self.shard_names(pair)]

    def shard_texts(self, pair: str) -> list[str]:
        """Every shard's source text, then every shard's target text: in this order
        sentencepiece's sample is the one it draws from the whole corpus, whatever the number
        of shards."""
        names = self.shard_names(pair)
        return [f"data/{pair}/shards/prepared/{s}.{side}" for side in ("src", "tgt") for s in names]

    def merge_inputs(self, pair: str) -> dict[str, str]:
        """Every file of every shard's binarized split (the arrays too, or Snakemake would
        delete them, temp, as soon as they were written) and the merged prepare report, whose
        pairs the merge checks against them (and which thus belongs to every run)."""
        files = {
            f"{s}{suffix}": f"data/{pair}/shards/bin/{s}{suffix}"
            for s in self.shard_names(pair)
            for suffix in BINARIZED_SUFFIXES
        }
        return {**files, "report": f"data/{pair}/prepared/train.report.json"}

    # --- the treebank ------------------------------------------------------------------------

    def linearization_args(self) -> list[str]:
        """`--linearization` of the `treebank` actions: the leaf tokens of the trees
        (``settings.command_flags`` of TreebankSettings)."""
        return command_flags(TreebankSettings, self.table4)

    def treebank_source(self) -> list[str]:
        """The NLTK archive is a file Snakemake can watch; the WSJ folder is checked by
        ``config_checks.check_table4``."""
        require_table4(self.config)
        return [self.table4["treebank_zip"]] if self.table4["treebank"] == "nltk" else []

    def treebank_action(self) -> list[Any]:
        """`transformer-core treebank` action and options of the configured treebank."""
        table4, kind = self.table4, self.table4["treebank"]
        if kind == "wsj":
            action = ["wsj", "--dir", table4["treebank_dir"]]
        elif kind == "nltk":
            action = ["nltk", "--zip", table4["treebank_zip"],
                      "--test-files", table4["held_out_files"]]  # fmt: skip
        else:
            sizes = table4["smoke"]
            action = ["smoke", "--train", sizes["train"], "--dev", sizes["dev"],
                      "--test", sizes["test"], "--seed", sizes["seed"]]  # fmt: skip
        return action + self.linearization_args()

    def semi_supervised_file(self, ext: str) -> str:
        """``train.ext`` of the parsed corpus in table4.semi_supervised_dir."""
        return os.path.join(self.table4["semi_supervised_dir"], f"train.{ext}")
