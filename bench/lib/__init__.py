"""What the benchmarks share, one concern a module (bench/README.md): where results go and
the machine they were measured on, the shared data, the model shapes, the runners of training,
decoding and CTranslate2, the learning check's criterion, host reads, profiles, the generated
shard corpus and the learning ablation's variants. No entry point is here: the benches
(``python -m bench.NAME``) import these modules, never one another."""
