"""Decoding: beam and greedy search (``search``), translating a file (``translate``), the copy
of a model a search decodes with and the runtime it decodes on, resolved once from a command's
settings (``inference``: bf16 matrices, packed weights, int8 products, a compiled step), the
decoder of few shapes a compiled step runs on (``fixed_step``), the CPU decoding copies with
packed weights (``packed``) or int8 products (``quantize``), and the beam and length penalty
chosen on the dev set (``dev_choice``)."""
