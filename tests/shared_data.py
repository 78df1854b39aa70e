"""Where the tests find the shared real data (never copied into the repository).

`../shared/data` beside the checkout, or `$TRANSFORMER_CORE_SHARED_DATA` (git worktrees,
other layouts). Tests that need it skip with a reason when it is absent.
"""

import os
from pathlib import Path

SHARED_DATA = Path(
    os.environ.get("TRANSFORMER_CORE_SHARED_DATA", Path(__file__).resolve().parents[1].parent / "shared" / "data")
)
