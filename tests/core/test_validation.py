"""Config validation on the real composed configs: every shipped preset passes, bad values are
refused naming the key and the fix, and the check runs before any data is prepared."""

from __future__ import annotations

from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from omegaconf import DictConfig

import core
from core.errors import InputError
from core.training.runner import train
from core.training.commands.config_check import validate_config
from nlp.data.datamodule import TranslationDataModule
from nlp.data.gettext import read_gettext_corpus
from nlp.data.tokenizer import train_tokenizer
from vision.model import VisionTransformer

CONF = Path(__file__).resolve().parents[2] / "conf"


def config(name: str, *overrides: str) -> DictConfig:
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        return compose(name, overrides=["paths.output_dir=/unused", *overrides])


def options(group: str) -> list[str]:
    return sorted(path.stem for path in (CONF / group).glob("*.yaml"))


@pytest.fixture(scope="module")
def local_data(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[str, ...]]:
    """Overrides that point the data presets (and experiments) needing local files at files that exist."""
    root = tmp_path_factory.mktemp("data")
    (root / "images" / "train").mkdir(parents=True)
    (root / "corpus.tsv").write_text("ein Haus\ta house\n")
    (root / "vit.pth").write_bytes(b"")
    return {
        "imagefolder": (f"data.root={root / 'images'}",),
        "files": (f"data.train={root / 'corpus.tsv'}", f"data.val={root / 'corpus.tsv'}"),
        "hf": ("data.dataset=some/corpus",),
        "finetune_timm": (f"pretrained={root / 'vit.pth'}",),  # the weights it starts from
    }


def test_every_shipped_preset_passes(local_data: dict[str, tuple[str, ...]]) -> None:
    """Each model, data, experiment and trainer option of each head (the others at their defaults)."""
    checked = {"vision": 0, "nlp": 0}
    for head, prefix in (("vision", "vit_"), ("nlp", "transformer_")):
        candidates = [config(head, f"data={data}", *local_data.get(data, ())) for data in options("data")]
        candidates += [config(head, f"experiment={experiment}", *local_data.get(experiment, ())) for experiment in options("experiment")]
        candidates += [config(head, f"model={model}") for model in options("model") if model.startswith(prefix)]
        candidates += [config(head, f"trainer={trainer}") for trainer in options("trainer")]
        for cfg in candidates:
            if cfg.data._target_.startswith(f"{head}.") and cfg.model._target_.startswith(f"{head}."):
                validate_config(cfg)
                checked[head] += 1
    assert checked["vision"] >= 14 and checked["nlp"] >= 14, checked


@pytest.mark.parametrize(
    ("head", "overrides", "message"),
    [
        ("vision", ["data.batch_size=0"], "data.batch_size must be a whole number of at least 1, or auto, got 0"),
        ("vision", ["data.batch_size=abc"], "data.batch_size must be a whole number of at least 1, or auto, got 'abc'"),
        ("vision", ["module.lr=0"], "module.lr must be a number above 0, got 0"),
        ("vision", ["model.img_size=30"], "model.img_size=30 is not a multiple of model.patch_size=4.*model.img_size=32"),
        ("vision", ["model.num_heads=5"], "model.dim=192 is not divisible by model.num_heads=5.*model.num_heads=4"),
        ("vision", ["model.dim=30", "model.num_heads=3"], "model.dim=30 is not a multiple of 4.*model.dim=24 or model.pos_embed=learned"),
        ("vision", ["model.pool=max"], "model.pool must be one of cls, mean, seq, got 'max'"),
        ("vision", ["data=synthetic", "data.num_classes=1"], "data.num_classes must be a whole number of at least 2, got 1"),
        ("vision", ["model.in_chans=1"], "model.in_chans=1, but the data gives RGB images.*model.in_chans=3"),
        ("vision", ["data.img_size=64"], "data.img_size=64 is not model.img_size=32.*model.dynamic_img_size=true"),
        ("vision", ["data.crop=center"], "data.crop must be one of pad, random_resized, auto, got 'center'"),
        ("vision", ["data.batch_size=33"], "data.batch_size=33 must be even.*data.batch_size=34"),
        ("vision", ["trainer.max_time=10min"], "trainer.max_time must be null or a duration"),
        ("vision", ["data=imagefolder"], "data=imagefolder needs data.root"),
        ("vision", ["data=imagefolder", "data.root=/no/such/dir"], "data.root=/no/such/dir is not a directory"),
        ("vision", ["ckpt_path=/no/such.ckpt"], "ckpt_path=/no/such.ckpt is missing"),
        ("vision", ["callbacks.periodic_checkpoint.every_n_train_steps=0"], "every_n_train_steps must be a whole number"),
        ("nlp", ["data=files"], "data=files needs data.train=PATH"),
        ("nlp", ["data=files", "data.train=/no.tsv", "data.val=/no.tsv"], "data.train=/no.tsv is neither a file nor a prefix"),
        ("nlp", ["data.max_tokens=-5"], "data.max_tokens must be a whole number of at least 1, or auto, got -5"),
        ("nlp", ["model.activation=tanh"], "model.activation must be one of relu, gelu"),
        ("nlp", ["model.word_dropout=1"], r"model.word_dropout must be a number in \[0, 1\), got 1"),
        ("nlp", ["model.activation_dropout=1"], r"model.activation_dropout must be a number in \[0, 1\) or null, got 1"),
        ("nlp", ["module.betas=[0.9,1.5]"], r"module.betas must be two numbers in \[0, 1\)"),
        ("nlp", ["data.corpus=web"], "data.corpus must be one of toy, files, hf"),
        ("nlp", ["model.max_len=1"], "model.max_len must be a whole number of at least 2"),
        ("nlp", ["data.vocab_size=100"], "data.vocab_size must be a whole number of at least 260, got 100"),
        ("nlp", ["module.warmup_steps=0"], "module.warmup_steps must be a whole number of at least 1, got 0"),
        ("nlp", ["module.max_len_a=-1"], "module.max_len_a must be a number of at least 0, got -1"),
        ("nlp", ["module.max_len_b=0"], "module.max_len_b must be a whole number of at least 1, got 0"),
        ("nlp", ["module.no_repeat_ngram_size=-1"], "module.no_repeat_ngram_size must be a whole number of at least 0"),
        ("nlp", ["model=transformer_mini", "module.max_decode_len=300"], "module.max_decode_len=300 is more than model.max_len=256"),
        ("nlp", ["optimized_metric=val/bleu", "module.bleu_every_n_epochs=2"], "optimized_metric=val/bleu needs BLEU at every validation.*bleu_every_n_epochs=1"),
        ("nlp", ["model=transformer_mini", "data.max_len=512"], "data.max_len=512 is more than model.max_len=256.*lower data.max_len"),
        ("nlp", ["data.max_tokens=lots"], "data.max_tokens must be a whole number of at least 1, or auto, got 'lots'"),
    ],
)
def test_bad_values_name_the_key_and_the_fix(head: str, overrides: list[str], message: str) -> None:
    with pytest.raises(InputError, match=message):
        validate_config(config(head, *overrides))


def refusal(build) -> str:
    with pytest.raises(ValueError) as caught:
        build()
    return str(caught.value)


@pytest.mark.parametrize(
    ("head", "overrides", "build", "names"),
    [
        ("vision", ["model.pool=max"], lambda: VisionTransformer(pool="max"), ["pool"]),
        ("vision", ["model.num_heads=5"], lambda: core.MultiHeadAttention(192, 5), ["dim", "num_heads"]),
        ("vision", ["model.img_size=30"], lambda: VisionTransformer(img_size=30), ["img_size", "patch_size"]),
        ("nlp", ["model.activation=tanh"], lambda: core.FeedForward(8, 16, activation="tanh"), ["activation"]),
        ("nlp", ["data.vocab_size=100"], lambda: train_tokenizer(["a"], vocab_size=100), ["vocab_size"]),
        ("nlp", ["data.corpus=web"], lambda: TranslationDataModule(corpus="web"), []),
        ("nlp", ["data=gettext", "data.join_words=65"], lambda: read_gettext_corpus("/no/locale", "en", "de", 65), []),
    ],
)
def test_a_constructor_and_the_config_check_refuse_in_the_same_words(head, overrides, build, names) -> None:
    """One source for each rule: the config check's message is the constructor's, with the config
    keys for the argument names (core.constraints, <head>.constraints)."""
    with pytest.raises(InputError) as caught:
        validate_config(config(head, *overrides))
    expected = refusal(build)
    section = overrides[0].split(".")[0]
    for name in names:
        expected = expected.replace(f"{name}=", f"{section}.{name}=").replace(f"{name} must", f"{section}.{name} must")
    assert str(caught.value).startswith(expected)


def test_a_config_naming_no_rules_gets_the_shared_rules_only() -> None:
    cfg = config("nlp", "data.vocab_size=100", "config_rules=null")
    validate_config(cfg)  # nlp's vocabulary rule is not applied
    cfg.module.lr = 0
    with pytest.raises(InputError, match="module.lr must be a number above 0"):
        validate_config(cfg)


def test_the_rules_are_the_ones_the_config_names_whatever_the_targets() -> None:
    cfg = config("nlp", "data.vocab_size=100")
    cfg.model._target_ = "mypackage.Model"
    cfg.data._target_ = "mypackage.Data"
    with pytest.raises(InputError, match="data.vocab_size must be a whole number of at least 260"):
        validate_config(cfg)
    for name, missing in (("nlp.no_rules", "nlp.no_rules"), ("mypackage.rules", "mypackage")):
        with pytest.raises(InputError, match=f"config_rules={name}: no module {missing}; name the module"):
            validate_config(config("nlp", f"config_rules={name}"))


def test_validation_comes_before_any_download(tmp_path: Path) -> None:
    cfg = config("vision", f"data.root={tmp_path / 'cifar'}", "data.batch_size=0", f"paths.output_dir={tmp_path / 'run'}")
    with pytest.raises(InputError, match="data.batch_size"):
        train(cfg)
    assert not (tmp_path / "cifar").exists() and not (tmp_path / "run").exists()


def test_lightning_refuses_a_precision_before_any_download(tmp_path: Path) -> None:
    """trainer.precision is Lightning's to check: the Trainer is built before the data."""
    cfg = config("vision", f"data.root={tmp_path / 'cifar'}", "trainer.precision=bf17", f"paths.output_dir={tmp_path / 'run'}")
    with pytest.raises(Exception, match="Precision 'bf17' is invalid") as caught:
        train(cfg)
    assert isinstance(caught.value.__cause__ or caught.value, ValueError)
    assert not (tmp_path / "cifar").exists()
