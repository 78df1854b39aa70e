"""``SHARED_DATA`` (see ``bench/lib/shared_data.py``) under the name the test modules import:
``from shared_data import SHARED_DATA``. Tests that need the data skip with a reason when it is
absent.
"""

from bench.lib.shared_data import SHARED_DATA

__all__ = ["SHARED_DATA"]
