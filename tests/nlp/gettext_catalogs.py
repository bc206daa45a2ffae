"""Fake gettext locale trees for tests: ``.mo`` files written in the GNU format (as CPython's
``Tools/i18n/msgfmt.py`` writes them), since ``msgfmt`` may not be installed."""

from __future__ import annotations

import struct
from pathlib import Path

MO_MAGIC = 0x950412DE


def write_mo(
    path: Path, messages: dict[str, str], charset: str = "UTF-8", byte_order: str = "<", header: bool = True
) -> Path:
    """A compiled catalog of ``messages`` (msgid -> msgstr; ``ctx\\x04id`` for a context,
    ``singular\\x00plural`` -> ``form0\\x00form1`` for plurals) with a header naming ``charset``
    (none with ``header=False``: the format does not require one)."""
    entries = {"": f"Content-Type: text/plain; charset={charset}\n", **messages} if header else dict(messages)
    keys = sorted(entries)  # the format keeps originals sorted, for binary search
    originals = [key.encode(charset) for key in keys]
    translations = [entries[key].encode(charset) for key in keys]
    header_size = 7 * 4
    tables_end = header_size + 16 * len(keys)
    ids_start = tables_end
    strs_start = ids_start + sum(len(b) + 1 for b in originals)
    original_table, translation_table = [], []
    offset = ids_start
    for data in originals:
        original_table += [len(data), offset]
        offset += len(data) + 1
    offset = strs_start
    for data in translations:
        translation_table += [len(data), offset]
        offset += len(data) + 1
    header = struct.pack(
        f"{byte_order}7I", MO_MAGIC, 0, len(keys), header_size, header_size + 8 * len(keys), 0, tables_end
    )
    tables = struct.pack(f"{byte_order}{4 * len(keys)}I", *original_table, *translation_table)
    body = b"".join(data + b"\0" for data in originals) + b"".join(data + b"\0" for data in translations)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(header + tables + body)
    return path


GERMAN_WORDS = {
    "open": "öffnen", "the": "die", "file": "Datei", "save": "speichern", "close": "schließen",
    "window": "Fenster", "new": "neue", "delete": "löschen", "copy": "kopieren", "folder": "Ordner",
}


def numbered_messages(domain: str, count: int) -> dict[str, str]:
    """``count`` distinct English -> German-like messages of one program."""
    words = list(GERMAN_WORDS)
    messages = {}
    for i in range(count):
        english = [words[(i + k) % len(words)] for k in range(2 + i % 4)]
        source = f"{' '.join(english)} {domain} {i}"
        messages[source] = f"{' '.join(GERMAN_WORDS[w] for w in english)} {domain} {i}"
    return messages


def fake_locale_tree(root: Path, languages: tuple[str, ...] = ("de", "fr"), big: int = 120, small: int = 2) -> Path:
    """A locale directory with, per language, one large catalog and twelve small ones (enough
    whole catalogs to hold out for validation and test)."""
    for lang in languages:
        catalogs = {"bigtool": big, **{f"tool{i:02d}": small for i in range(12)}}
        for domain, count in catalogs.items():
            write_mo(root / lang / "LC_MESSAGES" / f"{domain}.mo", numbered_messages(domain, count))
    return root
