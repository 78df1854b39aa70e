"""Decoding: beam and greedy search (``search``), translating a file (``translate``), the CPU
decoding copies with packed weights (``packed``) or int8 products (``quantize``), and export
to CTranslate2 (``export``)."""
