"""Training (paper section 5): the session that runs a run from start to finish (``session``),
its optimizer step (``step``) on the path ``auto`` picks and a resume keeps (``path``), with
the micro-batch a device gets (``micro_batch``), both resolved once with the precision
(``runtime``), the loss
(``loss``) and the schedule (``schedule``), torchrun's ranks (``distributed``), the run folder and its lock (``run_dir``, ``run_lock``),
divergence (``divergence``), checkpoint averaging (``average``), the training cost
(``flops``), and the CPU allocator setting that spares page faults (``host_memory``)."""
