"""Figures the commands of both heads draw (matplotlib, imported by the modules that draw):
labelled heatmaps (:mod:`~core.figures.heatmap`)."""
