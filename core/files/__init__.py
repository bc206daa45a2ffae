"""The files the toolkit reads and writes, torch at most: atomic writes
(:mod:`~core.files.atomic`), checkpoints loaded as data (:mod:`~core.files.checkpoints`) and the
cache of data prepared once (:mod:`~core.files.data_cache`)."""
