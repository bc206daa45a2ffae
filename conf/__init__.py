"""Hydra configuration tree of both entry points (``vision.yaml``, ``nlp.yaml`` and their groups)."""
