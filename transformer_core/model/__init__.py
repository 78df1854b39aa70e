"""The model: its configuration, presets and Table 3 rows (``config``), the post-norm
Transformer (``transformer``) with its attention kernels for CPUs (``cpu_attention``), dropout
(``dropout``) and incremental decoding state (``decoder_state``), and the checkpoint files that
rebuild it (``checkpoint``)."""
