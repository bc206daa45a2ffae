"""Data loading helpers in plain torch and NumPy, no Lightning: training batches that a run
resumed mid-epoch continues exactly (:mod:`~core.data.resumable`)."""
