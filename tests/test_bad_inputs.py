"""Bad input to the commands, as a user gives it: each case runs the command's ``main`` in this
process, with the command line it would get, and expects exit status 2 and one line
``error: ...`` on stderr that names the input (an exception other than ``SystemExit`` would be a
traceback). ``tests/test_commands.py`` runs every command once as a process."""

from __future__ import annotations

import importlib
import os
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch

from benchmarks.commands import HYDRA
from nlp.module import TranslationModule
from nlp.data.tokenizer import train_tokenizer
from nlp.data.toy_corpus import TOY_PAIRS
from tests.vision.vision_testdata import TINY_MODEL, write_classifier_checkpoint, write_image

ROOT = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
ENV.pop("HYDRA_FULL_ERROR", None)


@dataclass(frozen=True)
class Case:
    """``python -m command *args`` (``{files}`` in an argument is the folder of the files below)
    must fail naming ``names`` (also formatted with ``{files}``)."""

    command: str
    args: tuple[str, ...]
    names: str


VISION_TRAIN = ("data=synthetic", *TINY_MODEL, "trainer=cpu")
NLP_TRAIN = ("data=toy", "model=transformer_tiny", "trainer=cpu")

CASES = {
    # vision.train: config values, paths, choices, a resumed checkpoint.
    "vision.train batch size 0": Case("vision.train", ("data.batch_size=0",), "data.batch_size"),
    "vision.train image size off the patch grid": Case("vision.train", ("model.img_size=30",), "model.img_size=30"),
    "vision.train width not divisible by heads": Case("vision.train", ("model.num_heads=5",), "model.num_heads=5"),
    "vision.train unknown pooling": Case("vision.train", ("model.pool=max",), "model.pool"),
    "vision.train unknown stem": Case("vision.train", ("model.stem=resnet",), "model.stem"),
    "vision.train mistyped data class": Case(
        "vision.train", ("data=synthetic", "data._target_=vision.data.synthetic.SyntheticDataModul"),
        "data._target_=vision.data.synthetic.SyntheticDataModul",
    ),
    "vision.train label smoothing auto": Case("vision.train", ("module.label_smoothing=auto",), "module.label_smoothing"),  # translation's alone
    "vision.train stem without convolutions": Case("vision.train", ("model.stem_convs=0",), "model.stem_convs"),
    "vision.train negative learning rate": Case("vision.train", ("module.lr=-0.001",), "module.lr"),
    "vision.train odd batch with mixup": Case("vision.train", ("data.batch_size=33",), "data.batch_size=33"),
    "vision.train unknown augmentation place": Case("vision.train", ("data.augment_on=gpu",), "data.augment_on"),
    "vision.train random resized crop on the device": Case(
        "vision.train", ("data.augment_on=device", "data.crop=random_resized"), "data.crop=random_resized"
    ),
    "vision.train images held in memory under the random resized crop": Case(
        "vision.train", ("data=imagefolder", "data.root={files}", "data.in_memory=true", "data.crop=random_resized"), "data.in_memory=true"
    ),
    "vision.train unknown in-memory choice": Case(
        "vision.train", ("data=imagefolder", "data.root={files}", "data.in_memory=maybe"), "data.in_memory"
    ),
    "vision.train image folder missing": Case(
        "vision.train", ("data=imagefolder", "data.root={files}/no_such_folder"), "{files}/no_such_folder"
    ),
    "vision.train unknown precision": Case("vision.train", ("trainer.precision=bf17",), "Precision 'bf17' is invalid"),
    "vision.train unknown config key": Case("vision.train", ("trainer.max_epoch=3",), "trainer.max_epoch"),
    "vision.train max_time not a duration": Case("vision.train", ("trainer.max_time=10min",), "trainer.max_time"),
    "vision.train class pooling without a class token": Case(
        "vision.train", (*VISION_TRAIN, "model.class_token=false"), "needs class_token=True"
    ),
    "vision.train truncated checkpoint to resume": Case(
        "vision.train", (*VISION_TRAIN, "ckpt_path={files}/truncated.ckpt"), "{files}/truncated.ckpt"
    ),
    "vision.train resume into another width": Case(
        "vision.train", (*VISION_TRAIN, "model.dim=64", "ckpt_path={files}/classifier.ckpt"), "model.dim is 32 there and 64 here"
    ),
    "vision.train resume from weights that are not finite": Case(
        "vision.train", (*VISION_TRAIN, "ckpt_path={files}/nan_classifier.ckpt"), "{files}/nan_classifier.ckpt holds weights that are not finite"
    ),
    "vision.evaluate weights that are not finite": Case(
        "vision.evaluate", ("ckpt_path={files}/nan_classifier.ckpt", "data=synthetic"), "{files}/nan_classifier.ckpt holds weights that are not finite"
    ),
    # nlp.train
    "nlp.train corpus file missing": Case(
        "nlp.train", ("data=files", "data.train={files}/missing.tsv", "data.val={files}/missing.tsv"), "data.train"
    ),
    "nlp.train corpus without pairs": Case(
        "nlp.train",
        ("data=files", "data.train={files}/empty.tsv", "data.val={files}/empty.tsv", "model=transformer_tiny"),
        "{files}/empty.tsv",
    ),
    "nlp.train token budget 0": Case("nlp.train", (*NLP_TRAIN, "data.max_tokens=0"), "data.max_tokens"),
    "nlp.train heads do not divide width": Case("nlp.train", (*NLP_TRAIN, "model.num_heads=3"), "model.num_heads=3"),
    "nlp.train unknown activation": Case("nlp.train", (*NLP_TRAIN, "model.activation=tanh"), "model.activation"),
    "nlp.train label smoothing above 1": Case("nlp.train", (*NLP_TRAIN, "module.label_smoothing=1.5"), "module.label_smoothing"),
    "nlp.train tokenizer file missing": Case(
        "nlp.train",
        ("data=files", "data.train={files}/pairs.tsv", "data.val={files}/pairs.tsv", "data.tokenizer_path={files}/tok.json"),
        "{files}/tok.json",
    ),
    "nlp.train resume from a directory": Case("nlp.train", (*NLP_TRAIN, "ckpt_path={files}"), "ckpt_path={files}"),
    "nlp.train resume from the other head's checkpoint": Case(
        "nlp.train", (*NLP_TRAIN, "ckpt_path={files}/classifier.ckpt"), "was written by another kind of model"
    ),
    "nlp.evaluate weights that are not finite": Case(
        "nlp.evaluate", ("ckpt_path={files}/nan_translator.ckpt", "data=toy"), "{files}/nan_translator.ckpt holds weights that are not finite"
    ),
    # vision.predict: checkpoints and images.
    "vision.predict checkpoint missing": Case(
        "vision.predict", ("{files}/missing.ckpt", "{files}/image.png"), "{files}/missing.ckpt"
    ),
    "vision.predict truncated checkpoint": Case(
        "vision.predict", ("{files}/truncated.ckpt", "{files}/image.png"), "{files}/truncated.ckpt"
    ),
    "vision.predict garbage checkpoint": Case(
        "vision.predict", ("{files}/garbage.ckpt", "{files}/image.png"), "{files}/garbage.ckpt"
    ),
    "vision.predict empty checkpoint": Case("vision.predict", ("{files}/empty.ckpt", "{files}/image.png"), "{files}/empty.ckpt"),
    "vision.predict translation checkpoint": Case(
        "vision.predict", ("{files}/translator.ckpt", "{files}/image.png"), "{files}/translator.ckpt"
    ),
    "vision.predict weights that are not finite": Case(
        "vision.predict", ("{files}/nan_classifier.ckpt", "{files}/image.png"), "{files}/nan_classifier.ckpt holds weights that are not finite"
    ),
    "vision.predict corrupt png": Case("vision.predict", ("{files}/classifier.ckpt", "{files}/corrupt.png"), "{files}/corrupt.png"),
    "vision.predict text file as image": Case(
        "vision.predict", ("{files}/classifier.ckpt", "{files}/notes.png"), "{files}/notes.png"
    ),
    "vision.predict top-k 0": Case("vision.predict", ("{files}/classifier.ckpt", "{files}/image.png", "--top-k", "0"), "--top-k"),
    # vision.explain
    "vision.explain image missing": Case("vision.explain", ("{files}/classifier.ckpt", "{files}/missing.png"), "{files}/missing.png"),
    "vision.explain output not png": Case(
        "vision.explain", ("{files}/classifier.ckpt", "{files}/image.png", "--out", "{files}/map.jpg"), "--out"
    ),
    "vision.explain checkpoint is a directory": Case("vision.explain", ("{files}", "{files}/image.png"), "{files}"),
    # nlp.translate
    "nlp.translate vision checkpoint": Case("nlp.translate", ("{files}/classifier.ckpt", "--text", "ein Haus"), "{files}/classifier.ckpt"),
    "nlp.translate truncated checkpoint": Case("nlp.translate", ("{files}/truncated.ckpt", "--text", "ein Haus"), "{files}/truncated.ckpt"),
    "nlp.translate weights that are not finite": Case(
        "nlp.translate", ("{files}/nan_translator.ckpt", "--text", "ein Haus"), "{files}/nan_translator.ckpt holds weights that are not finite"
    ),
    "nlp.translate beam 0": Case("nlp.translate", ("{files}/translator.ckpt", "--beam", "0"), "--beam"),
    "nlp.translate max-len beyond the model": Case(
        "nlp.translate", ("{files}/translator.ckpt", "--max-len", "100000", "--text", "ein Haus"), "--max-len"
    ),
    # nlp.walkthrough
    "nlp.walkthrough width 1": Case("nlp.walkthrough", ("--dim", "1"), "--dim"),
    "nlp.walkthrough no heads": Case("nlp.walkthrough", ("--heads", "0"), "--heads"),
    "nlp.walkthrough json into a directory": Case("nlp.walkthrough", ("--json", "{files}"), "--json"),
    "nlp.walkthrough plots into a file": Case("nlp.walkthrough", ("--plots", "{files}/image.png"), "--plots"),
}


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The inputs the cases name: good and broken checkpoints of both heads, images, corpora."""
    folder = tmp_path_factory.mktemp("inputs")
    classifier = write_classifier_checkpoint(folder / "classifier.ckpt")
    tokenizer = train_tokenizer((s for pair in TOY_PAIRS for s in pair), vocab_size=400, min_frequency=1)
    translator = TranslationModule(
        model=dict(dim=32, num_heads=4, encoder_depth=1, decoder_depth=1, ffn_dim=64, max_len=64),
        tokenizer=tokenizer.to_json(),
    )
    torch.save({"hyper_parameters": dict(translator.hparams), "state_dict": translator.state_dict()}, folder / "translator.ckpt")
    for name in ("classifier", "translator"):  # as a run that diverged leaves them
        checkpoint = torch.load(folder / f"{name}.ckpt", weights_only=True)
        checkpoint["state_dict"][next(iter(checkpoint["state_dict"]))].view(-1)[0] = float("nan")
        torch.save(checkpoint, folder / f"nan_{name}.ckpt")
    whole = classifier.read_bytes()
    (folder / "truncated.ckpt").write_bytes(whole[: len(whole) // 2])
    (folder / "garbage.ckpt").write_bytes(os.urandom(4096))
    (folder / "empty.ckpt").write_bytes(b"")
    write_image(folder / "image.png")
    (folder / "corrupt.png").write_bytes((folder / "image.png").read_bytes()[:60] + os.urandom(200))
    (folder / "notes.png").write_text("not an image\n")
    (folder / "empty.tsv").write_text("\n\nno tab here\n")
    (folder / "pairs.tsv").write_text("".join(f"{source}\t{target}\n" for source, target in TOY_PAIRS))
    return folder


def run_command(command: str, args: list[str], monkeypatch: pytest.MonkeyPatch) -> int:
    """``python -m command args`` in this process: its exit status."""
    module = importlib.import_module(f"{command}.cli" if command == "nlp.walkthrough" else command)
    monkeypatch.delenv("HYDRA_FULL_ERROR", raising=False)
    with pytest.raises(SystemExit) as exited:
        if command in HYDRA:
            monkeypatch.setattr(sys, "argv", [f"{command.replace('.', '/')}.py", *args])
            module.main()
        else:
            module.main(args)
    return exited.value.code


@pytest.mark.parametrize("name", list(CASES))
def test_bad_input_ends_in_one_error_line(
    name: str, files: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    case = CASES[name]
    args = [arg.format(files=files) for arg in case.args]
    if case.command in HYDRA:
        args.append(f"hydra.run.dir={tmp_path / 'run'}")
    status = run_command(case.command, args, monkeypatch)
    stderr = capsys.readouterr().err
    assert status == 2, stderr[-3000:]
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), stderr[-3000:]
    assert case.names.format(files=files) in lines[0]


def test_the_model_class_of_the_vision_head_loads_on_first_use() -> None:
    import vision

    from vision.model.vision_transformer import VisionTransformer

    assert vision.VisionTransformer is VisionTransformer


@pytest.mark.skipif(torch.cuda.is_available(), reason="a machine with a GPU runs trainer=gpu")
def test_a_gpu_on_a_machine_without_one_is_one_error_line_with_lightnings_reason(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["data=synthetic", *TINY_MODEL, "trainer=gpu", f"hydra.run.dir={tmp_path}"]
    assert run_command("vision.train", args, monkeypatch) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ")
    reason, _, fix = lines[0].removeprefix("error: ").partition(" (config entry trainer)")
    assert "gpu" in reason.lower() and fix == "; fix it on the command line"  # Lightning's reason, then the entry


class BrokenCallback:
    """A callback whose constructor has a bug."""

    def __init__(self) -> None:
        raise RuntimeError("a bug in a constructor")


def test_a_bug_in_a_constructor_keeps_its_traceback(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Not bad input: the exception itself leaves the command (a traceback, status 1)."""
    monkeypatch.delenv("HYDRA_FULL_ERROR", raising=False)
    args = ["data=synthetic", *TINY_MODEL, "trainer=cpu", "+callbacks.broken._target_=tests.test_bad_inputs.BrokenCallback"]
    monkeypatch.setattr(sys, "argv", ["vision/train.py", *args, f"hydra.run.dir={tmp_path}"])
    with pytest.raises(RuntimeError, match="a bug in a constructor"):
        importlib.import_module("vision.train").main()


def test_a_process_the_command_started_keeps_the_one_line_convention(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A DDP worker runs the command again with the HYDRA_FULL_ERROR=1 its first process set for
    Hydra: the user did not ask for tracebacks, so bad input is still one line."""
    from core.training.commands.hydra_app import SET_BY_COMMAND

    monkeypatch.setenv("HYDRA_FULL_ERROR", "1")
    monkeypatch.setenv(SET_BY_COMMAND, "1")
    monkeypatch.setattr(sys, "argv", ["vision/train.py", "data.batch_size=0", f"hydra.run.dir={tmp_path}"])
    command = importlib.reload(importlib.import_module("vision.train"))  # imported anew, as in a new process
    with pytest.raises(SystemExit) as exited:
        command.main()
    assert exited.value.code == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "data.batch_size" in lines[0]
