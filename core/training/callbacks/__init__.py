"""The Lightning callbacks of every run: atomic checkpoints and ``last.ckpt`` during epochs
(:mod:`~core.training.callbacks.checkpoints`), runs that diverge
(:mod:`~core.training.callbacks.divergence`), preemption and failed processes
(:mod:`~core.training.callbacks.faults`), progress lines (:mod:`~core.training.callbacks.progress`),
throughput (:mod:`~core.training.callbacks.throughput`) and a seed per data-parallel process
(:mod:`~core.training.callbacks.rank_seed`)."""
