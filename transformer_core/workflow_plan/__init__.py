"""What the workflow runs for a configuration, as plain Python the tests call
(tests/unit/test_workflow_plan.py): the `.smk` files keep the rules, and their input and params
functions are thin calls into these objects, built once from the validated configuration
by workflow/rules/common.smk.

- ``runs``: run names and seeds, each run's ``train`` options, launcher and checkpoints,
  each language pair's search (``RunPlan``);
- ``data``: each pair's texts, shards and sentencepiece settings, the treebank (``DataPlan``);
- ``tables``: the inputs and arguments of the tables, figures and report, the default
  target (``TablePlan``).
"""

from transformer_core.workflow_plan.data import DataPlan
from transformer_core.workflow_plan.runs import RunPlan
from transformer_core.workflow_plan.tables import TablePlan

__all__ = ["DataPlan", "RunPlan", "TablePlan"]
