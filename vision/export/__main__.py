"""``python -m vision.export``: :func:`vision.export.command.main`."""

from vision.export.command import main

main()
