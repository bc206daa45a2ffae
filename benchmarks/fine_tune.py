"""Starting from trained weights (``pretrained=``) against training from scratch, each for the
same training minutes on the same new data, for both heads (docs/fine_tuning.md):

- ``vision``: a classifier trained on one proving ground (``--pretrained``, a checkpoint of
  ``python -m vision.train``; :mod:`benchmarks.proving_grounds`) is fine-tuned on a small image
  folder of other classes (``--data``): ``python -m vision.train data=imagefolder
  data.root=DATA pretrained=CKPT`` (and with each ``--layer-decay`` and each peak rate ``--lr``), against the same command
  without ``pretrained`` (the CPU model of :mod:`benchmarks.quality_vision`);
- ``nlp``: a translator trained on one corpus (``--pretrained``, e.g. ``python -m nlp.train
  data=gettext model=transformer_mini``: English -> German program messages) is continued on a
  new corpus of the same language pair with ``pretrained=CKPT``: the gettext catalogs' messages
  joined into passages of ``--join-words`` words or more (``nlp.data.gettext``), written as TSV
  files, the first ``--train-pairs`` of its training passages; against ``python -m nlp.train``
  on that corpus from scratch (its own tokenizer), and the translator as it is
  (``python -m nlp.evaluate``). The test passages come from catalogs no run trained on.

Every contender is the command a user runs, in a subprocess, one at a time; the table gives the
test accuracy (vision) or the test BLEU and chrF (nlp), the optimizer steps and the training
seconds.

    python -m benchmarks.fine_tune vision --pretrained CKPT --data DIR [--minutes 2] [--layer-decay 0.75] [--lr 5e-4]
    python -m benchmarks.fine_tune nlp --pretrained CKPT [--minutes 4] [--train-pairs 3000] [--join-words 24]
        [--locale-dir /usr/share/locale]
    common: [--threads 2] [--out-dir DIR] [--append results.jsonl]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import torch
from omegaconf import OmegaConf

from benchmarks import corpora, quality_nmt, quality_vision
from benchmarks.common import environment, run_training_cli, table_result
from benchmarks.report import table
from nlp.data.gettext import DEFAULT_LOCALE_DIR, read_gettext_corpus


def origin(checkpoint: Path) -> dict[str, Any]:
    """Where the weights come from: the checkpoint, the overrides of the run that wrote it and its
    test metrics (from its run directory, when beside it)."""
    run_dir = checkpoint.resolve().parents[1]
    overrides = run_dir / ".hydra" / "overrides.yaml"
    metrics = run_dir / "metrics.json"
    return {
        "checkpoint": str(checkpoint),
        "overrides": list(OmegaConf.load(overrides)) if overrides.is_file() else None,
        "test": {key: value for key, value in json.loads(metrics.read_text()).items() if key.startswith("test/")}
        if metrics.is_file() else None,
    }


def vision_rows(args: argparse.Namespace, out_dir: Path) -> list[dict[str, Any]]:
    """From scratch, fine-tuned, and fine-tuned with each layer decay, on ``args.data``."""
    contenders = [("from scratch", []), ("fine-tuned", [f"pretrained={args.pretrained}"])]
    contenders += [
        (f"fine-tuned, layer decay {decay:g}", [f"pretrained={args.pretrained}", f"module.layer_decay={decay}"])
        for decay in args.layer_decay
    ]
    contenders += [(f"fine-tuned, peak rate {lr:g}", [f"pretrained={args.pretrained}", f"module.lr={lr}"]) for lr in args.lr]
    rows = []
    for index, (name, extra) in enumerate(contenders):
        overrides = [*quality_vision.CPU_MODEL, *extra]
        result = quality_vision.run_cli(args.data, None, overrides, out_dir / f"vision_{index}", args.threads, args.minutes)
        rows.append({"head": "vision", "contender": name, "minutes": args.minutes, "overrides": extra, **result})
        print(f"{name}: test accuracy {result['test_acc']:.4f}", file=sys.stderr)
    return rows


def write_new_corpus(args: argparse.Namespace, directory: Path) -> dict[str, Path]:
    """The new corpus as TSV files: long passages of the language pair, the first
    ``args.train_pairs`` training passages, the whole val and test splits."""
    splits = read_gettext_corpus(args.locale_dir, args.src_lang, args.tgt_lang, args.join_words)
    splits["train"] = splits["train"][: args.train_pairs]
    return corpora.write_splits(directory, splits)


def nlp_rows(args: argparse.Namespace, out_dir: Path) -> list[dict[str, Any]]:
    """The translator as it is, continued on the new corpus, and trained on it from scratch."""
    paths = write_new_corpus(args, out_dir / "corpus")
    data = ["data=files", *(f"data.{split}={path}" for split, path in paths.items())]
    data += [f"data.src_lang={args.src_lang}", f"data.tgt_lang={args.tgt_lang}", "model=transformer_mini"]
    start = time.perf_counter()
    metrics, _ = run_training_cli("nlp.evaluate", [f"ckpt_path={args.pretrained}", *data[:4]], out_dir / "as_is", args.threads)
    rows = [{
        "head": "nlp", "contender": "as trained", "minutes": 0, "overrides": [], "bleu": metrics["test/bleu"],
        "chrf": metrics["test/chrf"], "steps": 0, "train_seconds": 0.0, "wall_seconds": time.perf_counter() - start,
    }]
    for index, (name, extra) in enumerate([("from scratch", []), ("continued", [f"pretrained={args.pretrained}"])]):
        result = quality_nmt.run_cli(60 * args.minutes, [*data, *extra], out_dir / f"nlp_{index}", "cpu", args.threads)
        rows.append({"head": "nlp", "contender": name, "minutes": args.minutes, "overrides": extra, **result})
        print(f"{name}: test BLEU {result['bleu']:.2f}", file=sys.stderr)
    return rows


def markdown(rows: list[dict[str, Any]]) -> str:
    """The table of one head's contenders."""
    if rows[0]["head"] == "vision":
        header = ("contender", "minutes", "test accuracy", "steps", "train seconds")
        cells = [(row["contender"], f"{row['minutes']:g}", f"{100 * row['test_acc']:.2f}%", row["steps"], f"{row['train_seconds']:.0f}") for row in rows]
    else:
        header = ("contender", "minutes", "test BLEU", "test chrF", "steps", "train seconds")
        cells = [
            (row["contender"], f"{row['minutes']:g}", f"{row['bleu']:.2f}", f"{row['chrf']:.2f}", row["steps"], f"{row['train_seconds']:.0f}")
            for row in rows
        ]
    return table(header, cells)


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("head", choices=("vision", "nlp"))
    parser.add_argument("--pretrained", type=Path, required=True, help="checkpoint of a run on another set or corpus")
    parser.add_argument("--data", type=Path, help="vision: the image folder to fine-tune on (train/val/test)")
    parser.add_argument("--layer-decay", type=float, nargs="*", default=[0.75], help="vision: layer decays to try")
    parser.add_argument("--lr", type=float, nargs="*", default=[], help="vision: peak rates to fine-tune at besides the default")
    parser.add_argument("--minutes", type=float, help="training minutes of each run (default: vision 2, nlp 4)")
    parser.add_argument("--locale-dir", default=DEFAULT_LOCALE_DIR, help="nlp: gettext catalogs")
    parser.add_argument("--src-lang", default="en")
    parser.add_argument("--tgt-lang", default="de")
    parser.add_argument("--join-words", type=int, default=24, help="nlp: words a passage of the new corpus reaches")
    parser.add_argument("--train-pairs", type=int, default=3000, help="nlp: training passages of the new corpus")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--out-dir", type=Path, help="run directories (default: a temporary directory)")
    parser.add_argument("--append", type=Path, help="add the result as one JSON line to this file")
    args = parser.parse_args(argv)
    if args.head == "vision" and args.data is None:
        parser.error("vision needs --data DIR (an image folder with train/, val/ and test/)")
    if args.minutes is None:
        args.minutes = 2.0 if args.head == "vision" else 4.0
    return args


def main(argv: list[str] | None = None) -> dict[str, Any]:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    torch.set_num_threads(args.threads)
    with tempfile.TemporaryDirectory() as scratch:
        out_dir = args.out_dir or Path(scratch)
        rows = vision_rows(args, out_dir) if args.head == "vision" else nlp_rows(args, out_dir)
        env = environment(torch.device("cpu"), args.threads, "python -m benchmarks.fine_tune " + " ".join(argv or sys.argv[1:]))
        extra = {"head": args.head, "pretrained": origin(args.pretrained), "data": str(args.data) if args.data else None}
        if args.head == "nlp":
            extra["corpus"] = {"join_words": args.join_words, "train_pairs": args.train_pairs, "languages": [args.src_lang, args.tgt_lang]}
        return table_result("fine_tune", env, rows, markdown(rows), args.append, **extra)


if __name__ == "__main__":
    main()
