"""Every setting a command takes, declared once: the settings dataclasses, whose fields carry
their default, flag, help, type, choices and bounds (``fields.option``).

- ``fields``: the field helper, the choices and constants, the checks of a value;
- ``runtime``: where and how a model runs (``RuntimeSettings``, ``InferenceSettings``);
- ``train``: the training recipe (``TrainSettings``); ``decode``: the search
  (``DecodeSettings``); ``data``: preparation, sentencepiece and treebank settings;
  ``evaluation``: the bootstrap of intervals and tests, the checkpoints of a BLEU curve;
- ``flags``: a dataclass as a command's options and back, and the workflow's configuration
  keys as the command's arguments (``command_flags``; each class's module names its own:
  ``train_flags``, ``decode_flags``, ``inference_flags``);
- ``schema``: a field as a key of the workflow's configuration schema
  (``workflow_plan.schema`` generates the schema's settings sections from these classes).

Apart from torch, so that ``transformer-core --help`` stays fast. The names below are the
package's face: importers take them from here.
"""

from transformer_core.settings.data import PrepareSettings, SentencePieceSettings, TreebankSettings
from transformer_core.settings.decode import (
    CHOSEN_FIELDS,
    PARSING_SEARCH,
    DecodeSettings,
    decode_fields,
    decode_flags,
)
from transformer_core.settings.evaluation import BootstrapSettings, CurveSettings
from transformer_core.settings.fields import (
    AUTO,
    BATCH_SHAPES,
    COMPILE_MODES,
    COMPUTE_WEIGHTS,
    DEV,
    DEVICES,
    EXPORT_FORMATS,
    EXPORT_QUANTIZATIONS,
    INFERENCE_MAX_TOKENS,
    PRECISIONS,
    QUANTIZE_MODES,
    SEEDS,
    SPM_SAMPLE_SIZE,
    config_fields,
    config_key,
    flagged_fields,
    option,
    parse_max_tokens,
    parse_seed,
    word_or_number,
)
from transformer_core.settings.flags import (
    add_option,
    add_options,
    command_flags,
    flag_values,
    settings_of,
)
from transformer_core.settings.runtime import InferenceSettings, RuntimeSettings, inference_flags
from transformer_core.settings.train import TrainSettings, train_flags

__all__ = [
    "AUTO", "BATCH_SHAPES", "CHOSEN_FIELDS", "COMPILE_MODES", "COMPUTE_WEIGHTS", "DEV", "DEVICES",
    "EXPORT_FORMATS", "EXPORT_QUANTIZATIONS", "INFERENCE_MAX_TOKENS", "PARSING_SEARCH",
    "PRECISIONS", "QUANTIZE_MODES", "SEEDS", "SPM_SAMPLE_SIZE", "BootstrapSettings",
    "CurveSettings", "DecodeSettings",
    "InferenceSettings", "PrepareSettings", "RuntimeSettings", "SentencePieceSettings",
    "TrainSettings", "TreebankSettings", "add_option", "add_options", "command_flags",
    "config_fields", "config_key", "decode_fields", "decode_flags", "flag_values", "flagged_fields",
    "inference_flags", "option", "parse_max_tokens", "parse_seed", "settings_of",
    "train_flags", "word_or_number",
]  # fmt: skip
