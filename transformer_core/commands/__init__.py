"""One module per ``transformer-core`` subcommand.

Each module defines ``HELP`` (one line), ``add_arguments(parser)`` and
``run(args) -> int``. A command is a thin wrapper: it parses, calls pure
library functions, and writes outputs atomically. Heavy imports (torch) go
inside ``run`` so ``transformer-core --help`` stays fast.
"""
