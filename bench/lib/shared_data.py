"""Where the shared real data lies (never copied into the repository), for benchmarks and tests.

``../shared/data`` beside the checkout, or ``$TRANSFORMER_CORE_SHARED_DATA`` (git worktrees,
other layouts). The tests read it through ``tests/shared_data.py`` (and skip with a reason when
it is absent); the benchmarks take their default data paths from it.
"""

import os
from pathlib import Path

SHARED_DATA = Path(
    os.environ.get(
        "TRANSFORMER_CORE_SHARED_DATA",
        Path(__file__).resolve().parents[2].parent / "shared" / "data",
    )
)
# newstest2014's English side (3,003 sentences): what the decoding benches decode on a GPU.
NEWSTEST2014 = SHARED_DATA / "wmt" / "newstest2014-deen-full.en"
