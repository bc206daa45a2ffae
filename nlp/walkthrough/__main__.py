"""``python -m nlp.walkthrough``: see :mod:`nlp.walkthrough`."""

from nlp.walkthrough.cli import main

main()
