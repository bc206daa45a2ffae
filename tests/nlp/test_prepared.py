"""Data prepared once: the tokenizer trained and the splits encoded by one process, kept in a cache
keyed by the inputs, memory-mapped by every process and every later run."""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from lightning.fabric.plugins.environments.lightning import find_free_network_port

from nlp.data import datamodule as datamodule_module
from nlp.data import prepared
from nlp.data.datamodule import TranslationDataModule
from nlp.data.prepared import EncodedSplit, token_dtype
from tests.nlp.conftest import SUBPROCESS_ENV, reverse_pairs, write_lines

ROOT = Path(__file__).resolve().parents[2]


def corpus(tmp_path: Path, count: int = 60, seed: int = 0) -> Path:
    return write_lines(tmp_path / "train.tsv", [f"{s}\t{t}" for s, t in reverse_pairs(count, seed)])


def files_data(path: Path, cache: Path, **kwargs: object) -> TranslationDataModule:
    options = dict(vocab_size=300, min_frequency=1, max_tokens=64, max_len=16, cache_dir=str(cache))
    return TranslationDataModule(corpus="files", train=str(path), val=str(path), **{**options, **kwargs})


def test_a_second_run_reads_no_text_and_trains_no_tokenizer(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = corpus(tmp_path)
    first = files_data(path, tmp_path / "cache")
    first.setup("fit")

    def forbidden(*args: object, **kwargs: object) -> None:
        raise AssertionError("the prepared data was built again")

    monkeypatch.setattr(prepared, "train_tokenizer", forbidden)
    monkeypatch.setattr(datamodule_module, "iter_corpus", forbidden)
    second = files_data(path, tmp_path / "cache")
    second.setup("fit")
    assert second.module_kwargs() == first.module_kwargs()
    for split in ("train", "val"):
        assert len(second.examples[split]) == len(first.examples[split]) == 60
        for index in (0, 59):
            for a, b in zip(first.examples[split][index], second.examples[split][index]):
                assert np.array_equal(a, b)
    batch = next(iter(second.val_dataloader()))
    tokenizer = second.tokenizer
    assert tokenizer is not None
    row = batch["source"][0]
    assert row[row.ne(tokenizer.pad_id)][-1] == tokenizer.eos_id


def test_a_cache_that_cannot_be_written_and_a_corpus_that_cannot_be_read_are_one_clear_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, toy_tokenizer  # type: ignore[no-untyped-def]
) -> None:
    import errno

    from core.errors import InputError
    from nlp.data import corpora

    path = corpus(tmp_path)
    (tmp_path / "a-file").write_text("not a folder")
    with pytest.raises(InputError, match=r"cannot write .*a-file.*\(the data cache: data.cache_dir\)"):
        files_data(path, tmp_path / "a-file" / "cache").setup("fit")

    def unreadable(name: object) -> None:  # what a file without read permission gives (tests may run as root)
        raise PermissionError(errno.EACCES, "Permission denied", str(name))

    monkeypatch.setattr(corpora, "iter_lines", unreadable)
    toy_tokenizer.save(tmp_path / "tokenizer.json")  # the corpus is first read to encode it
    with pytest.raises(InputError, match=f"cannot read {path}: Permission denied; check the data settings' paths"):
        files_data(path, tmp_path / "cache", tokenizer_path=str(tmp_path / "tokenizer.json")).setup("fit")


def test_changed_inputs_prepare_anew(tmp_path: Path) -> None:
    path = corpus(tmp_path)
    data = files_data(path, tmp_path / "cache")
    data.setup("fit")
    directories = {p for p in (tmp_path / "cache" / "nlp").iterdir() if p.is_dir()}
    corpus(tmp_path, count=80, seed=1)  # the file changes: size and modification time
    changed = files_data(path, tmp_path / "cache")
    changed.setup("fit")
    assert len(changed.examples["train"]) == 80
    other_vocab = files_data(path, tmp_path / "cache", vocab_size=290)
    other_vocab.setup("fit")
    assert len({p for p in (tmp_path / "cache" / "nlp").iterdir() if p.is_dir()} - directories) == 2
    assert not list((tmp_path / "cache" / "nlp").glob(".*"))  # no staging directory left behind


def test_a_preparation_killed_midway_leaves_nothing_behind_the_next_one(tmp_path: Path) -> None:
    """``kill -9`` in the middle of the encoding leaves the build's temporary directory; the next
    preparation of the same data removes it."""
    path, cache = corpus(tmp_path), tmp_path / "cache"
    script = (
        "import sys, time\n"
        "from pathlib import Path\n"
        "from nlp.data import prepared\n"
        "from tests.nlp.test_prepared import files_data\n"
        "def hang(*args, **kwargs):\n"
        "    print('encoding', flush=True)\n"
        "    time.sleep(600)\n"
        "prepared.write_split = hang\n"
        f"files_data(Path({str(path)!r}), Path({str(cache)!r})).setup('fit')\n"
    )
    process = subprocess.Popen([sys.executable, "-c", script], cwd=ROOT, env=SUBPROCESS_ENV, stdout=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None and process.stdout.readline() == "encoding\n"
    finally:
        process.kill()
        process.wait()
    assert len(list((cache / "nlp").glob(".*"))) == 1  # the killed build's temporary directory
    data = files_data(path, cache)
    data.setup("fit")
    assert len(data.examples["train"]) == 60
    assert not list((cache / "nlp").glob(".*"))


def test_splits_are_uint16_memory_maps_that_pickle_as_a_path(tmp_path: Path) -> None:
    data = files_data(corpus(tmp_path), tmp_path / "cache")
    data.setup("fit")
    split = data.examples["train"]
    source, target = split[3]
    assert isinstance(source, np.memmap) and source.dtype == np.uint16 and target.dtype == np.uint16
    assert token_dtype(70_000) == np.int32
    assert len(pickle.dumps(split)) < 1_000  # a worker or a spawned rank maps the files itself
    assert len(list(split)) == 60  # iterates as a sequence: item 60 is an IndexError
    clone: EncodedSplit = pickle.loads(pickle.dumps(split))
    assert clone.tokens is None and np.array_equal(clone[3][0], source)
    directory = Path(split.directory)
    meta = json.loads((directory / "meta.json").read_text())
    assert meta["dtype"] == "uint16" and meta["splits"]["train"] == {"pairs": 60, "truncated": 0}
    tokens = (directory / "train.src.bin").stat().st_size // 2
    assert tokens == int(np.load(directory / "train.idx.npy")[-1, 0])


def test_the_encoding_equals_the_translation_rule(tmp_path: Path, toy_tokenizer) -> None:  # type: ignore[no-untyped-def]
    from nlp.data.encoding import encode_sources, encode_targets
    from nlp.data.toy_corpus import TOY_PAIRS

    tokenizer_path = tmp_path / "tokenizer.json"
    toy_tokenizer.save(tokenizer_path)
    path = write_lines(tmp_path / "toy.tsv", [f"{s}\t{t}" for s, t in TOY_PAIRS])
    data = files_data(path, tmp_path / "cache", tokenizer_path=str(tokenizer_path), max_len=6)
    data.setup("fit")
    sources, _ = encode_sources(toy_tokenizer, [s for s, _ in TOY_PAIRS], 6)
    targets, _ = encode_targets(toy_tokenizer, [t for _, t in TOY_PAIRS], 6)
    for index, (source, target) in enumerate(zip(sources, targets)):
        assert data.examples["val"][index][0].tolist() == source
        assert data.examples["val"][index][1].tolist() == target


@pytest.mark.parametrize("content", ["not json", '{"version": "1.0", "model": {"type": "WordLevel", "vocab": {"a": 0}, "unk_token": "a"}}'])
def test_a_file_that_is_no_usable_tokenizer_is_refused_naming_the_setting(tmp_path: Path, content: str) -> None:
    from core.errors import InputError

    (tmp_path / "tokenizer.json").write_text(content)
    data = files_data(corpus(tmp_path), tmp_path / "cache", tokenizer_path=str(tmp_path / "tokenizer.json"))
    with pytest.raises(InputError, match=f"data.tokenizer_path={tmp_path / 'tokenizer.json'} is not a usable tokenizer"):
        data.prepare_data()
    assert not any((tmp_path / "cache").rglob("meta.json"))  # nothing half-prepared left as done


@pytest.mark.slow
def test_two_ddp_processes_share_one_prepared_tokenizer(tmp_path: Path) -> None:
    path = corpus(tmp_path, count=200)
    run_dir = tmp_path / "run"
    port = find_free_network_port()  # a fixed port can be taken by another test's processes
    command = [
        sys.executable, "-m", "torch.distributed.run", "--nproc_per_node=2", f"--master_port={port}", "-m", "nlp.train",
        "data=files", f"data.train={path}", f"data.val={path}", f"data.cache_dir={tmp_path / 'cache'}",
        "data.vocab_size=300", "model=transformer_tiny", "trainer=ddp", "trainer.accelerator=cpu",
        "trainer.max_epochs=-1", "trainer.max_steps=2", "trainer.num_sanity_val_steps=0", "module.beam_size=1",
        "trainer.limit_val_batches=1", "trainer.limit_test_batches=1", "logger=csv", f"hydra.run.dir={run_dir}",
    ]
    result = subprocess.run(
        command, cwd=ROOT, env={**SUBPROCESS_ENV, "PYTHONUNBUFFERED": "1"}, capture_output=True, text=True, timeout=600
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-3000:]
    assert output.count("training the BPE tokenizer") == 1  # one process trained it
    prepared_lines = [line.split("prepared data ")[1].split(":")[0] for line in output.splitlines() if "prepared data " in line]
    assert len(prepared_lines) == 2 and len(set(prepared_lines)) == 1  # both ranks mapped the same directory
    shared = Path(prepared_lines[0]) / "tokenizer.json"
    assert (run_dir / "checkpoints" / "tokenizer.json").read_bytes() == shared.read_bytes()
    assert os.path.isfile(run_dir / "metrics.json")


def shapes_of_an_epoch(tmp_path: Path, multiple: int | str) -> list[tuple[tuple[int, ...], tuple[int, ...]]]:
    rng = np.random.default_rng(0)
    lines = []
    for _ in range(3000):
        length = int(rng.integers(1, 60))
        lines.append(" ".join(rng.choice(list("abcdefgh"), length)) + "\t" + " ".join(rng.choice(list("abcdefgh"), length)))
    path = write_lines(tmp_path / f"random{multiple}.tsv", lines)
    data = files_data(path, tmp_path / "cache", max_tokens=1024, max_len=64, pad_to_multiple=multiple)
    data.setup("fit")
    return [(tuple(b["source"].shape), tuple(b["target"].shape)) for b in data.train_dataloader()]


def test_batches_are_padded_to_multiples_of_8_in_few_shapes_on_any_device(tmp_path: Path) -> None:
    import torch

    # No trainer attached, as on a CPU: auto pads to 8 all the same.
    padded, plain = shapes_of_an_epoch(tmp_path, "auto"), shapes_of_an_epoch(tmp_path, 1)
    assert all(source[1] % 8 == 0 and (target[1] - 1) % 8 == 0 for source, target in padded)
    assert all(source[0] * source[1] <= 1024 for source, _ in padded)  # the budget counts the padding
    assert len(set(padded)) <= 40 < len(set(plain))
    # A step compiled for static shapes (as CUDA graphs need) compiles once per shape, no more.
    from torch._dynamo.utils import counters

    torch._dynamo.reset()
    counters.clear()
    embed = torch.nn.Embedding(300, 8)
    step = torch.compile(lambda s, t: embed(s).sum() + embed(t[:, :-1]).sum(), backend="eager", dynamic=False)
    generator = torch.Generator().manual_seed(0)
    with torch._dynamo.config.patch(cache_size_limit=64):
        for source_shape, target_shape in padded:
            source = torch.randint(0, 300, source_shape, generator=generator)
            step(source, torch.randint(0, 300, target_shape, generator=generator))
    assert counters["stats"]["unique_graphs"] == len(set(padded))
    torch._dynamo.reset()
