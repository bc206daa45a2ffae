"""What a trained classifier shows when looked at: the confusion matrix and per-class accuracy of
``vision.evaluate`` (:mod:`~vision.analysis.confusion`), and attention rollout
(:mod:`~vision.analysis.rollout`) with its figure (:mod:`~vision.analysis.rollout_figure`) for
``vision.explain``."""
