"""``python -m nlp.export``: :func:`nlp.export.command.main`."""

from nlp.export.command import main

main()
