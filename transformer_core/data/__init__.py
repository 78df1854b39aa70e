"""The data stage: binarized corpora and token-bucket batching.

- ``binarized``  the memory-mapped corpus format and its streaming writer
- ``dataset``    ``ParallelDataset``: the reader of that format
- ``batching``   ``TokenBucketSampler``, ``padding_stats`` and ``collate``
"""
