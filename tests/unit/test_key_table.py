"""config/README.md's key table, written from the rendered configuration schema: every key of
the schema has its row, rows of one meaning merge, and the committed table is the schema's."""

import re

import pytest
import yaml
from conftest import ROOT

from transformer_core.workflow_plan import schema
from transformer_core.workflow_plan.key_table import BEGIN, END, rows, table, with_table

SCHEMA = yaml.safe_load((ROOT / schema.SCHEMA).read_text(encoding="utf-8"))


def leaf_keys(node, key=""):
    """Every key a configuration can set, spelled as the table spells it."""
    if "additionalProperties" in node and "properties" not in node:
        yield from leaf_keys(node["additionalProperties"], f"{key}.<src>_<tgt>")
    elif "properties" in node:
        for name, spec in node["properties"].items():
            yield from leaf_keys(spec, f"{key}.{name}" if key else name)
    else:
        yield key


def test_every_key_of_the_schema_has_one_row():
    named = [k for keys, _, _ in rows(SCHEMA) for k in re.findall(r"`([^`]+)`", keys)]
    spelled = []
    for name in named:  # threads.{train,translate,...}: an object whose keys say nothing alone
        if match := re.fullmatch(r"(.+)\.\{(.+)\}", name):
            spelled += [f"{match[1]}.{part}" for part in match[2].split(",")]
        else:
            spelled.append(name)
    assert sorted(spelled) == sorted(leaf_keys(SCHEMA))
    assert len(spelled) == len(set(spelled))


def test_keys_of_one_meaning_share_a_row_and_required_keys_say_so():
    by_key = {keys: (description, default) for keys, description, default in rows(SCHEMA)}
    assert "`models.base.average_last`, `models.big.average_last`" in by_key
    assert by_key["`pairs.<src>_<tgt>.vocab_size`"][1] == "required"
    assert by_key["`train.lr_scale`"][1] == "`1.0`"
    assert "Paper: 1.0" in by_key["`train.lr_scale`"][0]  # the field's doc after its help


def test_a_cell_stays_one_cell():
    spec = {"properties": {"a": {"description": "x | y\n  z", "default": 1}}}
    assert table(spec).splitlines()[4] == "| `a` | `1` | x \\| y z |"


def test_the_table_goes_between_its_markers_and_nowhere_else():
    text = f"# head\n\n{BEGIN}\nold rows\n{END}\n\n## tail\n"
    out = with_table(text, {"properties": {"a": {"description": "d"}}}, "R.md")
    assert out.startswith("# head\n\n" + BEGIN) and out.endswith(END + "\n\n## tail\n")
    assert "old rows" not in out and "| `a` |  | d |" in out
    with pytest.raises(ValueError, match="R.md: no generated key table"):
        with_table("# head\n", {}, "R.md")


def test_the_committed_table_is_the_committed_schemas():
    readme = (ROOT / schema.README).read_text(encoding="utf-8")
    assert table(SCHEMA) in readme
