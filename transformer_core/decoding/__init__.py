"""Decoding: beam and greedy search (``search``), translating a file (``translate``), the CPU
decoding copies with packed weights (``packed``) or int8 products (``quantize``), the beam and
length penalty chosen on the dev set (``dev_choice``), and export to CTranslate2 and
transformers (``export_*``)."""
