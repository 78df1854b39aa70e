"""The data stage: download, text preparation, BPE, binarized corpora and batching.

Modules, in pipeline order:

- ``registry``   the datasets (URLs, archive members, checksums), read from ``datasets.yaml``
- ``fetch``      cache, mirror, resumable HTTP downloads, checksum checks, archive extraction
- ``sources``    a registry dataset assembled into ``{train,dev,test}.{src,tgt}`` + manifest
- ``smoke``      the seeded generator of the structured smoke corpus (``smoke_lexicon.yaml``)
- ``shards``     a training corpus as N line ranges (an index, no copies); their reports merged
- ``prepare``    normalization and the counted filters of training pairs, whole or per shard
- ``moses``      Moses tokenization and its inverse: the Multi30k literature's text and score
- ``bpe``        joint sentencepiece BPE: bounded-sample training, encode, decode
- ``binarized``  the memory-mapped corpus format, its streaming writer, ``binarize``,
                 ``concatenate`` (the streaming merge of shards)
- ``dataset``    ``ParallelDataset``: the reader of that format
- ``batching``   ``TokenBucketSampler``, ``padding_stats`` and ``collate``
- ``shapes``     ``FixedShapes``: the ladder of micro-batch shapes a compiled step meets
- ``token_counts`` ``TokenCounts``: the lengths of what a run trained on, for its training cost
- ``progress``   done / total, rate and ETA lines in the long stages' logs
- ``settings``   the settings of ``prepare``, ``spm train`` and ``treebank`` (their flags)
"""
