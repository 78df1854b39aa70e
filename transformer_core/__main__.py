"""``python -m transformer_core`` is the same as the ``transformer-core`` command."""

from transformer_core.cli import main

raise SystemExit(main())
