"""A real parallel corpus every Linux machine has offline: the gettext message catalogs.

``/usr/share/locale/<lang>/LC_MESSAGES/<domain>.mo`` pairs each English message of a program
(msgid) with its translation (msgstr). The compiled ``.mo`` format (GNU gettext manual, "The
Format of GNU MO Files") is read here with :mod:`struct`: the standard library's
``gettext.GNUTranslations`` refuses catalogs whose header charset it cannot parse, and some
installed catalogs are Latin-1.

How messages become sentence pairs:

- Fuzzy and untranslated entries never reach a ``.mo`` file (``msgfmt`` leaves them out), and
  the header entry (empty msgid) is skipped; empty translations are dropped all the same.
- Context (``msgctxt``, stored as ``context\\x04msgid``) is removed. Plural entries pair the
  singular msgid with ``msgstr[0]``, the form of the smallest numbers.
- Markup: Pango/HTML tags (``<b>``, ``<span ...>``) are removed and XML entities (``&amp;``)
  unescaped; ``<options>``-style usage placeholders are not markup and stay. Mnemonic
  underscores (``_File``, and ``(_F)`` after CJK labels) are removed.
- Format placeholders (``%s``, ``%(name)s``, ``%1$d``, ``{0}``) stay verbatim: a translation
  must carry them over, and the model learns to copy them. A pair whose English side has no word
  outside placeholders (``%s: %s``) is dropped.
- Whitespace runs (help texts wrap lines) become one space. Pairs longer than
  :data:`MAX_WORDS` words on a side (multi-paragraph help) are dropped, and so are pairs whose
  two sides are then identical (untranslated names, option lists).
- Each English message keeps its first translation (catalogs in name order), so one source has
  one reference.
- A catalog that cannot be read (not a ``.mo`` file, truncated, bytes that are not its declared
  charset, or an unfilled ``charset=CHARSET`` header) is skipped with a warning naming it: the
  catalogs are the system's, not the user's to mend.

Long sentences (``join_words``): after the split, the messages of each catalog are joined in
catalog order, both sides alike, until the English side holds at least ``join_words`` words (at
most :data:`MAX_WORDS` on a side); a catalog's last few messages join its previous segment. The
help texts and labels of one program then make sentences of 20 to 60 words with a real
translation, the length of the sentences of news or parliament corpora.

The split holds out whole catalogs, so test messages come from programs never seen in training:
catalogs are ordered by a hash of their domain name (the same order for every language) and
taken for test, then validation, until each holds its share of the pairs (:data:`HELD_OUT_SHARES`);
a catalog that would overfill a share by half stays in training. Held-out messages whose English
text also occurs in training (or, for validation, in the test split) are dropped from it.
"""

from __future__ import annotations

import logging
import re
import struct
import zlib
from pathlib import Path
from xml.sax.saxutils import unescape

from core.errors import InputError
from nlp.constraints import JOIN_WORDS, MAX_WORDS

Pair = tuple[str, str]

log = logging.getLogger(__name__)

DEFAULT_LOCALE_DIR = "/usr/share/locale"
HELD_OUT_SHARES = {"test": 0.04, "val": 0.015}  # of all pairs, taken in this order
MO_MAGIC = 0x950412DE

MARKUP = re.compile(
    r"</?(?:b|i|u|s|tt|big|small|span|a|sub|sup|br|p|em|strong|code|li|ul|ol)(?:\s[^<>]*)?/?>", re.IGNORECASE
)
MNEMONIC = re.compile(r"\(_[^\W_]\)|(?<![\w\\])_(?=[^\W_])")
PLACEHOLDER = re.compile(
    r"%(?:\d+\$)?(?:\([\w.-]+\))?[-+ #0']*(?:\d+|\*)?(?:\.(?:\d+|\*))?(?:hh|h|ll|l|L|q|j|z|t)?[diouxXeEfFgGaAcspnm%]"
    r"|%<\w+>|\{\w*\}"
)
WORD = re.compile(r"[^\W\d_]{2,}")


def read_mo(path: Path) -> list[tuple[bytes, bytes]]:
    """The (msgid, msgstr) byte strings of a compiled catalog, header entry included."""
    data = path.read_bytes()
    if len(data) < 20:
        raise InputError(f"{path} is not a gettext .mo file (only {len(data)} bytes); remove it or fix data.locale_dir")
    for order in "<>":
        if struct.unpack(f"{order}I", data[:4])[0] == MO_MAGIC:
            break
    else:
        raise InputError(f"{path} is not a gettext .mo file (bad magic number); remove it or fix data.locale_dir")
    count, originals, translations = struct.unpack(f"{order}3I", data[8:20])

    def string(table: int, index: int) -> bytes:
        length, offset = struct.unpack(f"{order}2I", data[table + 8 * index : table + 8 * index + 8])
        return data[offset : offset + length]

    try:
        return [(string(originals, i), string(translations, i)) for i in range(count)]
    except struct.error:
        raise InputError(f"{path} is a truncated gettext .mo file; remove it or fix data.locale_dir") from None


def catalog_charset(entries: list[tuple[bytes, bytes]]) -> str:
    """The charset named in the header entry's ``Content-Type``, UTF-8 when there is none."""
    header = next((translation for original, translation in entries if original == b""), b"")
    match = re.search(rb"charset=([\w.:-]+)", header)
    return match.group(1).decode("ascii") if match else "utf-8"


def clean(message: str) -> str:
    """One line of plain text: markup and mnemonics removed, entities unescaped, spaces collapsed."""
    text = unescape(MARKUP.sub("", message), {"&quot;": '"', "&apos;": "'"})
    return " ".join(MNEMONIC.sub("", text).split())


def message_pair(original: str, translation: str) -> Pair | None:
    """The (English, translation) pair of one catalog entry, or None when it is no usable pair."""
    source = clean(original.split("\x04")[-1].split("\x00")[0])  # drop msgctxt; singular msgid
    target = clean(translation.split("\x00")[0])  # msgstr[0] of a plural entry
    if not source or not target or source == target:
        return None
    if max(len(source.split()), len(target.split())) > MAX_WORDS:
        return None
    if not WORD.search(PLACEHOLDER.sub(" ", source)):
        return None
    return source, target


def read_catalog(path: Path) -> list[Pair]:
    """The usable (English, translation) pairs of one ``.mo`` file."""
    entries = read_mo(path)
    charset = catalog_charset(entries)
    try:
        decoded = [(original.decode(charset), translation.decode(charset)) for original, translation in entries]
    except (LookupError, UnicodeDecodeError) as error:
        raise InputError(f"{path} does not decode as its declared charset {charset!r} ({error})") from None
    return [pair for original, translation in decoded if (pair := message_pair(original, translation))]  # the header: no pair


def languages_present(locale_dir: Path) -> list[str]:
    """The locale directories that hold at least one ``.mo`` catalog."""
    return sorted({path.parent.parent.name for path in locale_dir.glob("*/LC_MESSAGES/*.mo")})


def catalog_files(locale_dir: Path, lang: str) -> dict[str, Path]:
    """Domain name -> ``.mo`` file of ``lang``; symbolic links to another catalog are skipped."""
    files = sorted((locale_dir / lang / "LC_MESSAGES").glob("*.mo"))
    catalogs = {path.stem: path for path in files if not path.is_symlink()}
    if not catalogs:
        present = languages_present(locale_dir)
        raise InputError(
            f"no gettext catalogs for language {lang!r} under {locale_dir}/{lang}/LC_MESSAGES; languages "
            f"present: {', '.join(present) or 'none'}. Set data.tgt_lang to one of them (or data.locale_dir)"
        )
    return catalogs


def domain_order(domain: str) -> int:
    """A fixed pseudo-random rank of a catalog, the same on every machine and for every language."""
    return zlib.crc32(domain.encode("utf-8"))


def held_out_domains(sizes: dict[str, int]) -> dict[str, str]:
    """Domain -> ``test`` / ``val`` for the catalogs held out; the others train."""
    total = sum(sizes.values())
    assigned: dict[str, str] = {}
    order = sorted(sizes, key=lambda domain: (domain_order(domain), domain))
    for split, share in HELD_OUT_SHARES.items():
        wanted, taken = share * total, 0
        for domain in order:
            if taken >= wanted:
                break
            if domain not in assigned and taken + sizes[domain] <= 1.5 * wanted:
                assigned[domain] = split
                taken += sizes[domain]
    return assigned


def join_messages(pairs: list[Pair], join_words: int) -> list[Pair]:
    """Consecutive pairs joined (a space between messages, on both sides) until the English side
    of each holds at least ``join_words`` words and no side more than :data:`MAX_WORDS`; a short
    remainder joins the previous segment when that fits."""
    segments: list[list[Pair]] = []
    current: list[Pair] = []

    def words(group: list[Pair], side: int) -> int:
        return sum(len(pair[side].split()) for pair in group)

    for pair in pairs:
        if current and max(words(current + [pair], 0), words(current + [pair], 1)) > MAX_WORDS:
            segments.append(current)
            current = []
        current.append(pair)
        if words(current, 0) >= join_words:
            segments.append(current)
            current = []
    if current:
        last = segments[-1] + current if segments else current
        if segments and max(words(last, 0), words(last, 1)) <= MAX_WORDS:
            segments[-1] = last
        else:
            segments.append(current)
    return [(" ".join(s for s, _ in group), " ".join(t for _, t in group)) for group in segments]


def read_gettext_corpus(
    locale_dir: str | Path = DEFAULT_LOCALE_DIR, src_lang: str = "en", tgt_lang: str = "de", join_words: int = 0
) -> dict[str, list[Pair]]:
    """Train/val/test sentence pairs from the gettext catalogs of one language (see the module
    docstring for the cleaning, the split and the joining into long sentences, which
    ``join_words`` > 0 asks for). One of ``src_lang`` / ``tgt_lang`` must be ``en``: catalogs
    translate from English, and ``src_lang=de tgt_lang=en`` swaps the pairs."""
    if "en" not in (src_lang, tgt_lang) or src_lang == tgt_lang:
        raise InputError(
            f"gettext catalogs pair English with another language, got data.src_lang={src_lang!r} "
            f"data.tgt_lang={tgt_lang!r}; set data.src_lang=en and data.tgt_lang to the other language"
        )
    JOIN_WORDS.require(join_words, "data.join_words", InputError)
    locale_dir = Path(locale_dir)
    if not locale_dir.is_dir():
        raise InputError(f"gettext locale directory {locale_dir} does not exist; set data.locale_dir")
    lang = tgt_lang if src_lang == "en" else src_lang
    catalogs = {}
    for domain, path in catalog_files(locale_dir, lang).items():
        try:
            catalogs[domain] = read_catalog(path)
        except InputError as error:
            log.warning("skipped a catalog that cannot be read: %s", error)
    held_out = held_out_domains({domain: len(pairs) for domain, pairs in catalogs.items()})
    # Per split, each catalog's messages in order (an English message kept once, with its first translation).
    splits: dict[str, dict[str, dict[str, str]]] = {"train": {}, "val": {}, "test": {}}
    placed: dict[str, set[str]] = {"train": set(), "val": set(), "test": set()}
    for domain, pairs in catalogs.items():
        split = held_out.get(domain, "train")
        messages = splits[split].setdefault(domain, {})
        for source, target in pairs:
            if source not in placed[split]:
                placed[split].add(source)
                messages[source] = target
    seen = placed["train"]
    for split in HELD_OUT_SHARES:  # an English message lies in one split only: train, else test, else val
        for domain, messages in splits[split].items():
            splits[split][domain] = {source: target for source, target in messages.items() if source not in seen}
        seen = seen | placed[split]
    joined = {
        split: [
            pair
            for messages in domains.values()
            for pair in (join_messages(list(messages.items()), join_words) if join_words else messages.items())
        ]
        for split, domains in splits.items()
    }
    corpus = {split: [(s, t) if src_lang == "en" else (t, s) for s, t in pairs] for split, pairs in joined.items()}
    for split, pairs in corpus.items():
        if not pairs:
            raise InputError(
                f"the gettext catalogs of {lang!r} under {locale_dir} give no {split} pairs "
                f"({len(catalogs)} catalogs); choose a language with more catalogs (data.tgt_lang)"
            )
    log.info(
        "gettext %s: %d catalogs -> %s pairs (held out for test: %s; val: %s)",
        lang, len(catalogs), {split: len(pairs) for split, pairs in corpus.items()},
        sorted(d for d, s in held_out.items() if s == "test"), sorted(d for d, s in held_out.items() if s == "val"),
    )
    return corpus
