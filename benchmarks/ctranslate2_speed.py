"""CPU translation speed of a trained checkpoint: PyTorch against its CTranslate2 export
(``python -m nlp.export``) in float32 and int8, in sentences per second at beam 4 in batches of
32, with the BLEU and chrF of each contender's translations beside it.

All three translate the same test sentences with the checkpoint's decoding settings (length
penalty, length limit, n-gram blocking), PyTorch through :meth:`nlp.module.TranslationModule.translate`
and CTranslate2 through :class:`nlp.export.translator.CTranslate2Translator`, each on
``--threads`` intra-op threads. After one untimed batch each, the contenders translate the whole
set in turn (A B C A B C ...), ``--repeats`` times; the median pass gives sentences per second.
The test sentences are the gettext test split (``--tgt-lang``, as ``data=gettext`` splits it) or
a TSV file (``--test FILE``), the first ``--sentences`` of them.

    python -m benchmarks.ctranslate2_speed CKPT [--test FILE.tsv | --tgt-lang de] [--sentences 512]
        [--beam 4] [--batch 32] [--threads N] [--repeats 3] [--append results.jsonl] [--quick]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from sacrebleu.metrics import BLEU, CHRF

from benchmarks.common import environment, table_result
from nlp.analysis.corpus_scores import corpus_score
from nlp.data.corpora import read_corpus
from nlp.data.gettext import DEFAULT_LOCALE_DIR, read_gettext_corpus
from nlp.data.toy_corpus import TOY_PAIRS
from nlp.module import TranslationModule, load_translator

Pair = tuple[str, str]


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("checkpoint", nargs="?", help="a checkpoint written by python -m nlp.train (not with --quick)")
    parser.add_argument("--test", type=Path, default=None, help="TSV file of test pairs (default: the gettext test split)")
    parser.add_argument("--tgt-lang", default="de", help="gettext target language, English sources (default de)")
    parser.add_argument("--locale-dir", default=DEFAULT_LOCALE_DIR, help="where the gettext catalogs are")
    parser.add_argument("--sentences", type=int, default=512, help="test sentences translated per pass")
    parser.add_argument("--beam", type=int, default=4, help="beam size (default 4)")
    parser.add_argument("--batch", type=int, default=32, help="sentences per batch (default 32)")
    parser.add_argument("--threads", type=int, default=None, help="intra-op threads of both runtimes (default: torch's)")
    parser.add_argument("--repeats", type=int, default=3, help="timed passes per contender (the median is reported)")
    parser.add_argument("--append", type=Path, default=None, help="also append the result as one JSON line here")
    parser.add_argument("--quick", action="store_true", help="an untrained tiny model on the toy pairs: checks the script runs")
    args = parser.parse_args(argv)
    if not args.quick and args.checkpoint is None:
        parser.error("give a checkpoint (or --quick)")
    return args


def test_pairs(args: argparse.Namespace) -> list[Pair]:
    """The first ``--sentences`` test pairs."""
    if args.quick:
        return list(TOY_PAIRS)
    if args.test is not None:
        pairs = read_corpus(args.test, "src", "tgt")
    else:
        pairs = read_gettext_corpus(args.locale_dir, "en", args.tgt_lang)["test"]
    return pairs[: args.sentences]


def quick_checkpoint(directory: Path) -> Path:
    """An untrained tiny translation checkpoint on the toy corpus's tokenizer."""
    from nlp.data.tokenizer import train_tokenizer

    tokenizer = train_tokenizer((text for pair in TOY_PAIRS for text in pair), vocab_size=300, min_frequency=1)
    model = dict(dim=32, num_heads=4, encoder_depth=2, decoder_depth=2, ffn_dim=64, dropout=0.0, max_len=64)
    torch.manual_seed(0)
    module = TranslationModule(model=model, tokenizer=tokenizer.to_json())
    path = directory / "quick.ckpt"
    torch.save({"hyper_parameters": dict(module.hparams), "state_dict": module.state_dict()}, path)
    return path


def in_batches(translate: Callable[[list[str], int], list[str]], sources: list[str], batch: int, beam: int) -> list[str]:
    """Translations of ``sources``, ``batch`` sentences at a time."""
    return [text for start in range(0, len(sources), batch) for text in translate(sources[start : start + batch], beam)]


def megabytes(path: Path) -> float:
    files = [path] if path.is_file() else [file for file in path.rglob("*") if file.is_file()]
    return round(sum(file.stat().st_size for file in files) / 1e6, 2)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    argv = sys.argv[1:] if argv is None else argv
    args = parse_args(argv)
    import ctranslate2

    from nlp.export.translator import CTranslate2Translator
    from nlp.export.writer import export_ctranslate2

    if args.threads is not None:
        torch.set_num_threads(args.threads)
    threads = torch.get_num_threads()
    pairs = test_pairs(args)
    sources, references = [source for source, _ in pairs], [target for _, target in pairs]
    with tempfile.TemporaryDirectory(prefix="ct2-speed-") as scratch:
        checkpoint = quick_checkpoint(Path(scratch)) if args.quick else Path(args.checkpoint)
        module = load_translator(checkpoint)
        contenders: dict[str, Callable[[list[str], int], list[str]]] = {"pytorch": module.translate}
        sizes = {"pytorch": megabytes(checkpoint)}
        for quantization in ("float32", "int8"):
            directory = Path(scratch) / quantization
            export_ctranslate2(module, directory, quantization, checkpoint=str(checkpoint))
            contenders[f"ctranslate2 {quantization}"] = CTranslate2Translator(directory, threads=threads).translate
            sizes[f"ctranslate2 {quantization}"] = megabytes(directory)
        for translate in contenders.values():  # untimed: first-call allocations and thread pools
            translate(sources[: args.batch], args.beam)
        seconds: dict[str, list[float]] = {name: [] for name in contenders}
        outputs: dict[str, list[str]] = {}
        for _ in range(args.repeats):
            for name, translate in contenders.items():
                start = time.perf_counter()
                outputs[name] = in_batches(translate, sources, args.batch, args.beam)
                seconds[name].append(time.perf_counter() - start)
    rows = []
    for name in contenders:
        median = statistics.median(seconds[name])
        rows.append({
            "contender": name,
            "sentences_per_s": round(len(sources) / median, 2),
            "median_s": round(median, 3),
            "samples_s": [round(value, 3) for value in seconds[name]],
            "bleu": round(corpus_score(BLEU(), outputs[name], references).score, 2),
            "chrf": round(corpus_score(CHRF(), outputs[name], references).score, 2),
            "same_as_pytorch": round(sum(a == b for a, b in zip(outputs[name], outputs["pytorch"])) / len(sources), 4),
            "size_mb": sizes[name],
        })
    base = rows[0]["sentences_per_s"]
    for row in rows:
        row["speedup"] = round(row["sentences_per_s"] / base, 2)
    lines = [
        "| runtime | sentences/s | speed-up | BLEU | chrF | same output as PyTorch | size MB |",
        "|---|---|---|---|---|---|---|",
    ]
    lines += [
        f"| {r['contender']} | {r['sentences_per_s']:.1f} | {r['speedup']:.2f}x | {r['bleu']:.1f} | {r['chrf']:.1f} "
        f"| {r['same_as_pytorch']:.1%} | {r['size_mb']:.1f} |"
        for r in rows
    ]
    env = environment(
        torch.device("cpu"), threads, " ".join(["python -m benchmarks.ctranslate2_speed", *argv]),
        ctranslate2=ctranslate2.__version__,
    )
    settings = {"sentences": len(sources), "beam": args.beam, "batch": args.batch, "checkpoint": str(args.checkpoint)}
    return table_result("ctranslate2_speed", env, rows, "\n".join(lines), args.append, settings=settings)


if __name__ == "__main__":
    main()
