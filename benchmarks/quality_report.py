"""The quality and speed tables and figures of the docs, regenerated from the result files.

    python -m benchmarks.quality_report                     # writes docs/results.md and docs/figures/*.png
    python -m benchmarks.quality_report --check             # exit 1 if docs/results.md is out of date

Reads every ``quality_vision*.jsonl`` and ``quality_nmt*.jsonl`` of ``--results`` (the lines the
quality scripts append with ``--append``; the tuning logs, which have another form, are skipped).
For each run (data set or corpus, budget, seed, contender) the latest line wins, so a re-run
replaces its earlier figure and the history stays in the files. The plain loop's figure at a budget
is its best peak rate there ("best of the rates tried"); figures are means over seeds with their
range, and a lead over the loop is taken on the seeds both ran (which it names where either side
ran others). Translation lines from a CPU that computes no bfloat16 (``cpu_bf16`` false in their
``env``), where the defaults train in float32, make a table of their own. The CLI's rows of each
head are named by the recipe they trained with: the value of each default that changed, as one
table per head holds them (:data:`VISION_SETTINGS`,
:data:`NMT_SETTINGS`; oldest change first, named newest first). Vision: the patch embedding (the
convolutional stem is the default since it was measured on four sets; rows recorded before carry
``stem: patch`` or ``+ model.stem=conv``), the warmup cap (``budget.max_warmup_fraction``,
recorded in each row since the cap of ``conf/vision.yaml`` moved from 0.1 to 0.3; rows without it
ran with 0.1), Adam's beta2 (``module.betas``, recorded since it moved from 0.999 to 0.99; rows
without it ran with 0.999 unless their overrides set it) and the stem's convolutions per stage
(``model.stem_convs``, recorded since it exists; rows without it ran with 1 unless their overrides
set it). Translation: the precision (a row that recorded none trained in float32), the dropout (a
row that recorded none ran with 0.1, before ``model.dropout: auto``; an ``auto`` one that recorded
no ``min_dropout`` switched its dropout on at any planned rate), the epoch bound that cut a time
budget short, the label smoothing and the width (a row that recorded none ran with 0.1, and 256
with a feed-forward of 1,024), and the multiple a batch's lengths were padded to (a row that
recorded none, on a CPU, padded to its longest sentence only). A recipe other than
today's defaults is either an earlier default (the history) or
a lever (an override under test); each is set against the defaults it changes, on the seeds both
have, and told in words under the one table of today's defaults against the loop. Its latest run is
set against the run of those defaults nearest to it in time (the one of its session, where the
defaults ran there too), not their latest: at a budget in minutes the machine's pace of the day
enters both runs.
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import textwrap
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from functools import cached_property
from pathlib import Path
from typing import Any

from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from benchmarks.common import CONF
from benchmarks.proving_grounds import DEFAULT_COUNTS, SETS
from benchmarks.report import budget_label, length_of, machine_name, results_of, table
from core.constraints import AUTO
from core.files.atomic import atomic_path
from nlp.constraints import pad_multiple

RESULTS = Path(__file__).parent / "results"
DOCS = Path(__file__).parent.parent / "docs"
PAGE = "results.md"
FIGURES = "figures"
FLOAT32_FIGURE = "translation_quality_float32.png"  # the defaults and the loop on CPUs without bfloat16

LOOP = "plain timm loop (best rate)"
DEFAULTS = "vision.train defaults"
PATCH = "vision.train defaults, linear patch embedding"
NMT_LOOP = "plain nn.Transformer loop"
NMT_DEFAULTS = "nlp.train defaults"
PRECISION = "trainer.precision="
FLOAT32 = "32-true"  # the precision of a row that did not record its own (before trainer.precision=auto)
DROPOUT = "model.dropout="
LEGACY_DROPOUT = 0.1  # the translation presets' dropout when a row did not record its own
AUTO_FROM_START = "auto from 3 passes"  # an auto dropout recorded without its min_dropout: on at any planned rate
TORCH_MASKS = "auto with F.dropout"  # an auto dropout whose masks PyTorch's sampler drew (a row's dropout_masks)
EPOCH_BOUND = "trainer.max_epochs="
LEGACY_EPOCH_BOUND = 10  # trainer.max_epochs before it was null: a time budget stopped there (a row's epoch_bound)
SMOOTHING = "module.label_smoothing="
LEGACY_SMOOTHING = 0.1  # conf/nlp.yaml's label smoothing when a row did not record its own
SMOOTHING_SINCE = "2026-12-05T10:35:00+00:00"  # when transformer_mini's label smoothing became auto
PAD = "data.pad_to_multiple="
WIDTH = ("dim", "ffn_dim")  # the model settings of a translation model's width, as its rows record them
WIDTH_OVERRIDES = tuple(f"model.{key}=" for key in WIDTH)
LEGACY_WIDTH = (256, 1024)  # transformer_mini's width and feed-forward when a row did not record its own
BETAS = "module.betas="
BETA1 = 0.9  # the first moment's decay of every vision recipe; rows record only their beta2
OTHER_MACHINE = "†"  # marks a lead whose two runs ran on different machines
ON_ANOTHER_MACHINE = ", on another machine"  # follows a difference, in words, whose two runs ran on different machines
SESSION = timedelta(hours=3)  # runs closer than this on one machine ran in one session (its pace)
# The budgets a user gives, in the tables and figures against the loop. A run bounded by optimizer
# steps (quality_nmt --steps) is one side of a pair at equal steps: a lever's, in words only.
USER_BUDGETS = ("epochs", "minutes")

# What each override measured with ``--cli-extra`` changes, in words; an override not named here
# is shown as it is.
LEVER_NAMES = {
    "model.stem=patch": "The linear patch embedding of the ViT paper instead of the convolutional stem",
    "budget.max_warmup_fraction=0.1": "The warmup capped at a tenth of the planned steps",
    "+callbacks.ema._target_=lightning.pytorch.callbacks.EMAWeightAveraging + +callbacks.ema.decay=0.99":
        "An exponential moving average of the weights, decay 0.99",
    "data.augment_on=loader": "Augmentation in the loader workers instead of on the whole batch",
    "data.batch_size=64": "A fixed batch of 64 instead of the batch from the budget",
    "model.layer_scale=1e-4": "LayerScale (Touvron et al. 2021), initialized at 1e-4",
    "model.patch_size=8": "Patches of 8 pixels instead of 4 (a 4 by 4 grid of tokens at 32 px)",
    "module.label_smoothing=0": "Hard targets: no label smoothing",
    "model.word_dropout=0.1": "Word dropout 0.1 on source and target (Gal and Ghahramani 2016) instead of none",
    "model.activation_dropout=0": "No dropout after the feed-forward activation (Section 5.4, fairseq), only on its output",
    f"{SMOOTHING}{LEGACY_SMOOTHING:g}": "Label smoothing 0.1 (Section 5.4) at every budget instead of sized to the planned passes",
    "module.lr=4e-3": "The peak rate scaled with the batch (4e-3 instead of 2e-3)",
    "model.weight_init=mimetic": "Mimetic initialization of the attention weights",
    f"{BETAS}[{BETA1:g},0.999]": "Adam's second-moment decay at 0.999 (AdamW's own) instead of 0.99",
    "trainer.precision=32-true": "Float32 instead of bf16 autocast",
    "model.dropout=0.1": "Dropout 0.1 at every budget instead of sized to the planned passes",
    "model.dropout=0.2": "Dropout 0.2 at every budget instead of sized to the planned passes (0.1 from 10)",
    f"model.dropout={AUTO_FROM_START}": "The auto dropout on at any rate the plan asks for, instead of from half its full rate",
    f"model.dropout={TORCH_MASKS}": "Dropout masks drawn by PyTorch's F.dropout instead of core.dropout's bulk integer draws",
    f"{EPOCH_BOUND}{LEGACY_EPOCH_BOUND}": "The time budget cut short at 10 epochs (the default epoch bound before trainer.max_epochs: null)",
    "data.vocab_size=4000": "A vocabulary of 4,000 subwords instead of 8,000",
    "module.cooldown_fraction=0.5": "The linear fall to zero over the last half of the budget instead of the last fifth",
    "model.pool=mean": "Global average pooling of the patch tokens instead of the class token",
    "module.min_lr_ratio=0": "The cosine schedule ending at zero at the last step instead of at 1% of the peak",
    "model.stem_convs=2": "A deeper convolutional stem: a stride-1 3x3 convolution after each stride-2 one",
    "model.stem_convs=1": "The convolutional stem of Xiao et al.: its stride-2 convolutions alone, no stride-1 one",
    "model.locality=true": "Locality Self-Attention (Lee et al. 2021): a learned temperature, each token's own key masked",
    "model.pool=seq + model.class_token=false":
        "Sequence pooling (CCT, Hassani et al. 2021): the patch tokens weighted by a learned softmax, no class token",
    f"{PAD}1": "Batches padded to their longest sentence only, instead of to a multiple of 8 tokens",
    "model.dim=256 + model.ffn_dim=1024": "The wider model: width 256 and feed-forward 1,024 instead of 192 and 768",
    "model.encoder_depth=4 + model.decoder_depth=2": "A deeper encoder and a shallower decoder: 4 + 2 layers instead of 3 + 3",
    "module.lr=3e-3": "A peak rate of 3e-3 instead of 2e-3",
    f"{SMOOTHING}{AUTO}": "Label smoothing sized to the planned passes (none up to 3, 0.1 from 10) instead of 0.1 at every budget",
    "+callbacks.ema._target_=lightning.pytorch.callbacks.EMAWeightAveraging":
        "An exponential moving average of the weights (decay 0.999) for validation, testing and the checkpoints",
}


def width_override(width: tuple[int, int]) -> str:
    """The overrides that set a translation model's width and feed-forward: ``model.dim=D + model.ffn_dim=F``."""
    return " + ".join(f"{override}{size}" for override, size in zip(WIDTH_OVERRIDES, width))


def betas_override(beta2: float) -> str:
    """The override that sets a vision recipe's Adam betas: ``module.betas=[0.9,B]``."""
    return f"{BETAS}[{BETA1:g},{beta2:g}]"


def beta2_of(override: str) -> float | None:
    """The beta2 that a ``module.betas=[0.9,B]`` override sets; None for any other override (a
    first moment other than 0.9 is a lever)."""
    if not override.startswith(BETAS):
        return None
    betas = OmegaConf.from_dotlist([override]).module.betas
    return float(betas[1]) if len(betas) == 2 and float(betas[0]) == BETA1 else None


def prefixed(prefix: str, parse: Callable[[str], Any]) -> Callable[[str], Any]:
    """The value an override ``<prefix><value>`` sets, parsed; None for any other override."""
    return lambda override: parse(override[len(prefix) :]) if override.startswith(prefix) else None


def moment(time: str) -> datetime:
    """An ISO time of a result line (a time without a zone is UTC, as the scripts write)."""
    parsed = datetime.fromisoformat(time)
    return parsed.replace(tzinfo=timezone.utc) if parsed.tzinfo is None else parsed


@dataclass(frozen=True)
class Setting:
    """A default of a head's recipe that changed: what a row of the defaults trained with, how an
    override sets it, its value before the change (``legacy``, of rows that recorded none), how the
    name of a recipe with another value says it (``words``), where today's value lives in the
    composed config (``config_path``) and the change in words (``change``). ``only_with``: the
    setting exists only where another has that value (the stem's convolutions, with the
    convolutional stem). ``recorded``: the value a row records, None where it records none
    (default: the row's ``key``, of the legacy value's type). ``earlier``: earlier defaults besides
    the legacy value. ``strict``: a value that the row's own overrides set, neither today's nor the
    legacy one, is a lever under test, not an earlier recipe. ``since``: when today's default took
    effect (ISO time); a lever of a strict setting run before it was set against the default of its
    time, the last earlier one."""

    key: str
    legacy: Any
    config_path: str
    parse: Callable[[str], Any]
    override: Callable[[Any], str]
    words: Callable[[Any], str]
    change: str
    only_with: tuple[str, Any] | None = None
    recorded: Callable[[Mapping[str, Any]], Any] | None = None
    earlier: tuple[Any, ...] = ()
    strict: bool = False
    since: str | None = None

    def value(self, row: Mapping[str, Any], extras: list[str], settings: Mapping[str, Any]) -> Any:
        """The row's value: recorded in the row, else set by its last override, else recorded in
        the run's model settings, else the legacy one."""
        if self.recorded is not None:
            if (own := self.recorded(row)) is not None:
                return own
        elif self.key in row:
            return type(self.legacy)(row[self.key])
        set_by = [value for extra in extras if (value := self.parse(extra)) is not None]
        if set_by:
            return set_by[-1]
        return settings.get("model", {}).get(self.key, self.legacy)

    def today(self, config: Any) -> Any:
        """Today's value in the composed config."""
        return OmegaConf.select(config, self.config_path)

    def sets(self, override: str) -> bool:
        """Whether ``override`` sets this setting."""
        return self.parse(override) is not None

    def differs(self, values: Mapping[str, Any], today: Mapping[str, Any]) -> bool:
        """Whether a recipe's ``values`` hold another value of this setting than ``today``'s (a
        setting that does not exist in the recipe does not differ)."""
        exists = self.only_with is None or values[self.only_with[0]] == self.only_with[1]
        return exists and values[self.key] != today[self.key]

    def changed(self, today: Mapping[str, Any]) -> bool:
        """Whether today's default is not the first one."""
        return today[self.key] != self.legacy or bool(self.earlier)

    def default_at(self, time: str | None, today: Any) -> Any:
        """The default when a row was written at ``time`` (None: now): today's, or before
        :attr:`since` the last earlier one."""
        if time is None or self.since is None or moment(time) >= moment(self.since):
            return today
        return (self.legacy, *self.earlier)[-1]

    def history(self) -> list[str]:
        """The overrides that restore each earlier default."""
        return [self.override(value) for value in (self.legacy, *self.earlier) if value is not None]


@dataclass(frozen=True)
class Width(Setting):
    """A translation model's width and feed-forward (``model.dim``, ``model.ffn_dim``), one setting
    of two values: each recorded in the row (``dim``, ``ffn_dim``), else set by an override, else
    the legacy one."""

    def value(self, row: Mapping[str, Any], extras: list[str], settings: Mapping[str, Any]) -> tuple[int, int]:
        sized = {
            key: int(extra[len(prefix) :]) for extra in extras for key, prefix in zip(WIDTH, WIDTH_OVERRIDES) if extra.startswith(prefix)
        }
        return tuple(int(row.get(key, sized.get(key, legacy))) for key, legacy in zip(WIDTH, self.legacy))  # type: ignore[return-value]

    def today(self, config: Any) -> tuple[int, int]:
        """Both values in the composed config's ``config_path`` section."""
        return tuple(int(OmegaConf.select(config, f"{self.config_path}.{key}")) for key in WIDTH)  # type: ignore[return-value]


@dataclass(frozen=True)
class PadMultiple(Setting):
    """The multiple a translation batch's lengths are padded to: the config's ``auto`` as the
    datamodule resolves it (:func:`nlp.constraints.pad_multiple`)."""

    def today(self, config: Any) -> int:
        return pad_multiple(OmegaConf.select(config, self.config_path))


def rate_or_auto(value: Any) -> float | str:
    """A rate as a float, or ``auto`` (sized to the run's plan) as it is."""
    return value if value == AUTO else float(value)


def rate_text(rate: float | str) -> str:
    """A rate as the overrides write it (``0.1``, ``0``), or ``auto``."""
    return rate if isinstance(rate, str) else f"{rate:g}"


def recorded_precision(row: Mapping[str, Any]) -> str:
    """A translation row's precision setting: ``auto`` where it recorded that setting (whatever
    the hardware resolved it to); else float32 where it recorded that precision or none (before
    ``trainer.precision=auto``), else what ``auto`` chose."""
    if row.get("precision_setting") == AUTO:
        return AUTO
    return FLOAT32 if row.get("precision", FLOAT32) == FLOAT32 else AUTO


def recorded_dropout(row: Mapping[str, Any]) -> float | str:
    """A translation row's dropout: 0.1 where it recorded none; an ``auto`` one without its
    ``min_dropout`` switched on at any planned rate, one with ``dropout_masks: F.dropout`` drew its
    masks with PyTorch's sampler."""
    dropout = row.get("dropout", LEGACY_DROPOUT)
    if dropout == AUTO and "min_dropout" not in row:
        return AUTO_FROM_START
    if dropout == AUTO and row.get("dropout_masks") == "F.dropout":
        return TORCH_MASKS
    return dropout


# The vision recipe's changed defaults, oldest change first.
VISION_SETTINGS = (
    Setting(
        "stem", "patch", "model.stem", prefixed("model.stem=", str), lambda stem: f"model.stem={stem}",
        lambda stem: "linear patch embedding" if stem == "patch" else f"stem {stem}",
        "the convolutional stem replaced the linear patch embedding",
    ),
    Setting(
        "max_warmup_fraction", 0.1, "budget.max_warmup_fraction", prefixed("budget.max_warmup_fraction=", float),
        lambda cap: f"budget.max_warmup_fraction={cap:g}", lambda cap: f"warmup cap {cap:g}",
        "the warmup cap (`budget.max_warmup_fraction`) was raised",
    ),
    Setting(
        "beta2", 0.999, "module.betas.1", beta2_of, betas_override, lambda beta2: f"beta2 {beta2:g}",
        "Adam's beta2 (`module.betas`) was lowered",
    ),
    Setting(
        "stem_convs", 1, "model.stem_convs", prefixed("model.stem_convs=", int), lambda convs: f"model.stem_convs={convs}",
        lambda convs: f"{convs} stem convolution{'s' if convs > 1 else ''} per stage",
        "the stem gained a stride-1 convolution after each stride-2 one (`model.stem_convs`)", only_with=("stem", "conv"),
    ),
)
LEGACY_VISION = {setting.key: setting.legacy for setting in VISION_SETTINGS}

# The translation recipe's changed defaults, oldest change first.
NMT_SETTINGS = (
    Setting(
        "precision", FLOAT32, "trainer.precision", prefixed(PRECISION, str), lambda precision: f"{PRECISION}{precision}",
        lambda precision: "float32" if precision == FLOAT32 else f"precision {precision}",
        "training moved from float32 to bf16 autocast where the hardware computes bfloat16 (`trainer.precision=auto`)",
        recorded=recorded_precision,
    ),
    Setting(
        "dropout", LEGACY_DROPOUT, "model.dropout", prefixed(DROPOUT, str), lambda dropout: f"{DROPOUT}{dropout}",
        lambda dropout: f"dropout {dropout}",
        "`transformer_mini`'s dropout, 0.1 at every budget, became sized to the planned passes over the corpus "
        "(`model.dropout: auto`), then switched on from half its full rate, with masks from `core.dropout`'s bulk draws",
        recorded=recorded_dropout, earlier=(AUTO_FROM_START, TORCH_MASKS),
    ),
    Setting(
        "epoch_bound", None, "trainer.max_epochs", lambda override: None, lambda bound: f"{EPOCH_BOUND}{bound}",
        lambda bound: f"at most {bound} epochs",
        "a time budget is no longer cut short at 10 epochs (`trainer.max_epochs: null`)",
        recorded=lambda row: row.get("epoch_bound"), earlier=(LEGACY_EPOCH_BOUND,),
    ),
    Width(
        "width", LEGACY_WIDTH, "model", lambda override: override if override.startswith(WIDTH_OVERRIDES) else None,
        width_override, lambda width: f"width {width[0]}",
        "`transformer_mini` narrowed from 256 wide with a feed-forward of 1,024 to 192 and 768 (the plain loop takes the same sizes)",
        strict=True,
    ),
    Setting(
        "label_smoothing", LEGACY_SMOOTHING, "module.label_smoothing", prefixed(SMOOTHING, rate_or_auto),
        lambda smoothing: f"{SMOOTHING}{rate_text(smoothing)}", lambda smoothing: f"label smoothing {rate_text(smoothing)}",
        "`transformer_mini`'s label smoothing, 0.1 at every budget, became sized to the planned passes over the corpus "
        "(`module.label_smoothing: auto`)",
        recorded=lambda row: rate_or_auto(row["label_smoothing"]) if "label_smoothing" in row else None, strict=True,
        since=SMOOTHING_SINCE,
    ),
    PadMultiple(
        "pad_to_multiple", 1, "data.pad_to_multiple", prefixed(PAD, pad_multiple), lambda multiple: f"{PAD}{multiple}",
        lambda multiple: "padding to the longest sentence" if multiple == 1 else f"padding to multiples of {multiple}",
        "a CPU's batches, padded to their longest sentence, are padded to multiples of 8 tokens as a GPU's "
        "(`data.pad_to_multiple: auto`)",
    ),
)
LEGACY_NMT = {setting.key: setting.legacy for setting in NMT_SETTINGS}


def defaults_of(config_name: str, overrides: list[str], table: tuple[Setting, ...]) -> dict[str, Any]:
    """Today's value of each setting of ``table`` in the config that Hydra composes from
    ``config_name`` and ``overrides``."""
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        config = compose(config_name, overrides=overrides)
    return {setting.key: setting.today(config) for setting in table}


def vision_defaults() -> dict[str, Any]:
    """Today's value of each :data:`VISION_SETTINGS` in the config that ``python -m vision.train
    data=imagefolder`` composes, as ``benchmarks.quality_vision`` runs it."""
    return defaults_of("vision", ["data=imagefolder", "data.root=unused"], VISION_SETTINGS)


def nmt_defaults() -> dict[str, Any]:
    """Today's value of each :data:`NMT_SETTINGS` in the config that ``python -m nlp.train
    data=files model=transformer_mini trainer=cpu`` composes, as ``benchmarks.quality_nmt`` runs it."""
    return defaults_of("nlp", ["data=files", "model=transformer_mini", "trainer=cpu"], NMT_SETTINGS)


def without_bf16(env: Mapping[str, Any]) -> bool:
    """Whether a result ran on a CPU that its line says computes no bfloat16, where
    ``trainer.precision=auto`` trains in float32 (lines from before it was recorded ran on CPUs
    with AVX512-BF16)."""
    return env.get("device") == "cpu" and env.get("cpu_bf16") is False


@dataclass(frozen=True)
class Run:
    """One training run's figures: ``budget`` is ``("epochs", E)``, ``("minutes", M)`` or
    ``("steps", N)``."""

    data: str
    budget: tuple[str, float]
    seed: int
    contender: str
    score: float
    speed: float | None
    batch: int | None
    time: str
    rate: float | None = None
    base: str | None = None
    lever: str | None = None
    machine: str = ""
    precision: str = FLOAT32
    validation: float | None = None  # the validation split's figure, where the line recorded one


@dataclass(frozen=True)
class Contender:
    """A row's line in the tables; a recipe other than today's defaults also names the defaults
    it changes (``base``) and how (``lever``)."""

    name: str
    base: str | None = None
    lever: str | None = None


def read_lines(paths: Iterable[Path], benchmark: str) -> list[dict[str, Any]]:
    """The result objects of ``benchmark`` in the files, oldest first (by their ``env.time``)."""
    return [result for _, result in results_of(paths, benchmark)]


def recipe(values: Mapping[str, Any], today: Mapping[str, Any], table: tuple[Setting, ...], defaults: str) -> str:
    """The defaults named by each setting of ``table`` whose value is not today's, newest change
    first (so a recipe's name begins with the name of the recipe it is set against)."""
    changes = [setting.words(values[setting.key]) for setting in reversed(table) if setting.differs(values, today)]
    return ", ".join([defaults, *changes])


def recipe_contender(
    row: Mapping[str, Any], settings: Mapping[str, Any], today: Mapping[str, Any], table: tuple[Setting, ...], defaults: str,
    time: str | None = None,
) -> Contender:
    """A row of a head's CLI (its ``contender``, the overrides after `` + ``) by its recipe, the value of each
    setting of ``table`` (``today``: today's values; ``settings``: the run's), or a lever under
    test (any other override, or another value of a ``strict`` setting set by the overrides, set
    against the defaults of the row's ``time``) as ``<those defaults> + <overrides>``. An earlier
    recipe is set against the one that differs from it in its oldest differing setting alone: the
    recipe that followed it."""
    extras = [part.strip() for part in row["contender"].split(" + ")[1:]]
    values = {setting.key: setting.value(row, extras, settings) for setting in table}
    # Another value of a strict setting, set by the row's own overrides: a lever, named by them.
    tried = {
        setting.key for setting in table
        if setting.strict and values[setting.key] not in (today[setting.key], setting.legacy)
        and any(setting.sets(extra) for extra in extras)
    }
    values.update({setting.key: setting.default_at(time, today[setting.key]) for setting in table if setting.key in tried})
    own = recipe(values, today, table, defaults)
    levers = [extra for extra in extras if not any(setting.sets(extra) and setting.key not in tried for setting in table)]
    if levers:
        return Contender(" + ".join([own, *levers]), own, " + ".join(levers))
    for setting in table:
        if setting.differs(values, today):
            base = recipe({**values, setting.key: today[setting.key]}, today, table, defaults)
            return Contender(own, base, setting.override(values[setting.key]))
    return Contender(defaults)


def vision_contender(
    row: Mapping[str, Any], settings: Mapping[str, Any], today: Mapping[str, Any], time: str | None = None
) -> Contender:
    """The row's line in the tables: the loop, or the defaults by their recipe of
    :data:`VISION_SETTINGS` (:func:`recipe_contender`; ``time``: when the row was written)."""
    if row["contender"].startswith("plain timm loop"):
        return Contender(LOOP)
    return recipe_contender(row, settings, today, VISION_SETTINGS, DEFAULTS, time)


def nmt_contender(row: Mapping[str, Any], today: Mapping[str, Any], time: str | None = None) -> Contender:
    """The row's line in the tables: the loop, or the defaults by their recipe of
    :data:`NMT_SETTINGS` (:func:`recipe_contender`; ``time``: when the row was written)."""
    if row["contender"] == NMT_LOOP:
        return Contender(NMT_LOOP)
    return recipe_contender(row, {}, today, NMT_SETTINGS, NMT_DEFAULTS, time)


def is_history(lever: str) -> bool:
    """An earlier default of either head (:data:`VISION_SETTINGS`, :data:`NMT_SETTINGS`), not an
    override under test."""
    return any(lever in setting.history() for setting in (*VISION_SETTINGS, *NMT_SETTINGS))


def vision_data(row: Mapping[str, Any], settings: Mapping[str, Any]) -> str:
    """The row's data set; a proving ground built with other than its default training images
    (``--ground-counts``) is another set, named with its count: ``cluttered-digits (50,000)``."""
    name = row["data"]
    train = settings.get("images", {}).get(name, {}).get("train")
    if name in SETS and train is not None and train != DEFAULT_COUNTS["train"]:
        return f"{name} ({train:,})"
    return name


def speed_of(env: Mapping[str, Any], speed: float | None) -> float | None:
    """A run's training speed, None where its line says it shared the machine (no figure)."""
    return None if env.get("shared_machine") else speed


def vision_runs(results: Iterable[Mapping[str, Any]], today: Mapping[str, Any]) -> list[Run]:
    """Every run of the lines, oldest first (:func:`latest` keeps each one's last)."""
    runs = []
    for result in results:
        settings = result.get("settings", {})
        for row in result["rows"]:
            contender = vision_contender(row, settings, today, result["env"]["time"])
            rate = row.get("lr", settings.get("plain_loop", {}).get("lr")) if contender.name == LOOP else None
            run = Run(
                vision_data(row, settings), length_of(row), int(row.get("seed", 0)), contender.name, 100 * row["test_acc"],
                speed_of(result["env"], row.get("images_per_second")),
                row.get("batch"), result["env"]["time"], rate, contender.base, contender.lever, machine_name(result["env"]),
                row.get("precision", FLOAT32),
            )
            runs.append(run)
    return runs


def nmt_runs(results: Iterable[Mapping[str, Any]], today: Mapping[str, Any]) -> list[Run]:
    """Every run of the lines, oldest first; lines from before corpora were named are skipped."""
    runs = []
    for result in results:
        for row in result["rows"]:
            if "corpus" not in row:
                continue
            contender = nmt_contender(row, today, result["env"]["time"])
            run = Run(
                row["corpus"], length_of(row), int(row.get("seed", 0)), contender.name, row["bleu"],
                speed_of(result["env"], row.get("train_tokens_per_second")), None, result["env"]["time"],
                base=contender.base, lever=contender.lever, machine=machine_name(result["env"]),
                validation=row.get("val_bleu"),
            )
            runs.append(run)
    return runs


def latest(runs: Iterable[Run]) -> list[Run]:
    """The last of the runs (oldest first) of each (data, budget, seed, contender, loop rate)."""
    last = {(run.data, run.budget, run.seed, run.contender, run.rate): run for run in runs}
    return list(last.values())


def when(run: Run) -> datetime:
    """When the run's line was written."""
    return moment(run.time)


def nearest(runs: Iterable[Run], to: Run) -> Run:
    """The run nearest in time to ``to``."""
    return min(runs, key=lambda run: abs((when(run) - when(to)).total_seconds()))


def best_rate(runs: Iterable[Run]) -> list[Run]:
    """Per (data, budget, seed, contender), the run of the best score over the loop's rates."""
    best: dict[tuple, Run] = {}
    for run in runs:
        key = (run.data, run.budget, run.seed, run.contender)
        if key not in best or run.score > best[key].score:
            best[key] = run
    return list(best.values())


@dataclass(frozen=True)
class Cell:
    """A contender's figure at one budget, from the runs it is made of (one per seed): mean, range
    and count over seeds, and the machine when every seed ran on the same one."""

    runs: tuple[Run, ...]

    @property
    def mean(self) -> float:
        return statistics.mean(run.score for run in self.runs)

    @property
    def low(self) -> float:
        return min(run.score for run in self.runs)

    @property
    def high(self) -> float:
        return max(run.score for run in self.runs)

    @property
    def seeds(self) -> int:
        return len(self.runs)

    @property
    def validation(self) -> float | None:
        """The mean validation figure over seeds, None unless every seed recorded one."""
        values = [run.validation for run in self.runs]
        return None if None in values else statistics.mean(values)

    @property
    def machine(self) -> str | None:
        """The machine of its runs when every seed ran on the same one."""
        machines = {run.machine for run in self.runs}
        return machines.pop() if len(machines) == 1 else None

    def __str__(self) -> str:
        spread = f" ({self.low:.1f}-{self.high:.1f}, {self.seeds} seeds)" if self.seeds > 1 else ""
        return f"{self.mean:.1f}{spread}"


def cells(runs: Iterable[Run]) -> dict[tuple[str, tuple[str, float], str], Cell]:
    """(data, budget, contender) -> the figure over its seeds."""
    groups: dict[tuple, list[Run]] = defaultdict(list)
    for run in runs:
        groups[(run.data, run.budget, run.contender)].append(run)
    return {key: Cell(tuple(group)) for key, group in groups.items()}


def budget_words(budget: tuple[str, float]) -> str:
    unit, length = budget
    return f"{length:g} {unit[:-1] if length == 1 else unit}"


def same_machine(ours: Cell, theirs: Cell) -> bool:
    return ours.machine is not None and ours.machine == theirs.machine


def one_session(ours: Run, theirs: Run) -> bool:
    """Both runs on one machine within :data:`SESSION` of each other: the machine's pace of one
    session (it varies by a quarter from day to day)."""
    return ours.machine == theirs.machine and abs(when(ours) - when(theirs)) < SESSION


def speed_ratio(ours: Cell | None, theirs: Cell | None) -> float | None:
    """The defaults' speed over the loop's: the median ratio of their runs that trained at an equal
    batch in one session (a smaller batch costs speed by design: more optimizer steps)."""
    if ours is None or theirs is None:
        return None
    ratios = [
        mine.speed / other.speed for mine in ours.runs for other in theirs.runs
        if mine.speed and other.speed and mine.batch == other.batch and one_session(mine, other)
    ]
    return statistics.median(ratios) if ratios else None


def ratio(ours: Cell | None, theirs: Cell | None) -> str | None:
    value = speed_ratio(ours, theirs)
    return None if value is None else f"{value:.2f}x"


def on_shared_seeds(ours: Cell, theirs: Cell) -> tuple[Cell, Cell, str]:
    """Both cells cut to the seeds both ran, and those seeds in words when either cell ran others
    (empty when they ran the same ones, or none in common: the cells are compared whole)."""
    mine, other = {run.seed for run in ours.runs}, {run.seed for run in theirs.runs}
    common = mine & other
    if not common or mine == other:
        return ours, theirs, ""

    def cut(cell: Cell) -> Cell:
        return Cell(tuple(run for run in cell.runs if run.seed in common))

    words = f" (seed{'s' if len(common) > 1 else ''} {', '.join(map(str, sorted(common)))})"
    return cut(ours), cut(theirs), words


def lead(ours: Cell | None, theirs: Cell | None) -> str | None:
    """The difference of the means, on the seeds both ran where they ran different ones (which
    it then names, as ``+12.7 (seed 0)``)."""
    if ours is None or theirs is None:
        return None
    mine, other, seeds = on_shared_seeds(ours, theirs)
    return f"{mine.mean - other.mean:+.1f}{seeds}"


def apart(ours: Cell, theirs: Cell) -> bool:
    """Whether the runs a :func:`lead` is taken on (those of the seeds both ran) ran on two machines."""
    return not same_machine(*on_shared_seeds(ours, theirs)[:2])


def oldest_first(recipes: Iterable[str], runs: Iterable[Run]) -> list[str]:
    """The recipes in the order of their first run."""
    first: dict[str, datetime] = {}
    for run in runs:
        if run.contender in recipes:
            first[run.contender] = min(first.get(run.contender, when(run)), when(run))
    return sorted(first, key=lambda name: (first[name], name))


@dataclass(frozen=True)
class Quality:
    """Everything the results page shows: the vision runs (the latest of each, the loop at its best
    rate), the figures of each contender, the same of translation, every run of each head (the
    runs a lever is paired with), and the translation runs and figures of CPUs without bfloat16
    (``nmt_float32_runs``, the latest of each of ``nmt_float32_every``, and ``nmt_float32``,
    apart from the others: there the defaults train in float32)."""

    vision_runs: list[Run]
    vision: dict[tuple, Cell]
    nmt_runs: list[Run]
    nmt: dict[tuple, Cell]
    vision_every: list[Run]
    nmt_every: list[Run]
    nmt_float32_runs: list[Run]
    nmt_float32_every: list[Run]

    @cached_property
    def nmt_float32(self) -> dict[tuple, Cell]:
        return cells(self.nmt_float32_runs)

    @cached_property
    def vision_effects(self) -> dict[str, list[Effect]]:
        return effects(self.vision_runs, self.vision_every)

    @cached_property
    def nmt_effects(self) -> dict[str, list[Effect]]:
        return effects(self.nmt_runs, self.nmt_every)

    @cached_property
    def nmt_float32_effects(self) -> dict[str, list[Effect]]:
        """The translation levers measured on CPUs without bfloat16, against the defaults there."""
        return effects(self.nmt_float32_runs, self.nmt_float32_every)

    @property
    def vision_order(self) -> tuple[str, ...]:
        """The figure's lines: the loop, each recipe of the defaults other than today's (without
        levers), oldest first, today's defaults."""
        others = {name for _, _, name in self.vision if name not in (LOOP, DEFAULTS) and " + " not in name}
        return (LOOP, *oldest_first(others, self.vision_every), DEFAULTS)

    @property
    def nmt_order(self) -> tuple[str, ...]:
        """The figure's lines: the loop, each recipe of the defaults other than today's (without
        levers), today's defaults (each where it has a figure)."""
        present = {name for _, _, name in self.nmt}
        others = {name for name in present if name not in (NMT_LOOP, NMT_DEFAULTS) and " + " not in name}
        return tuple(name for name in (NMT_LOOP, *oldest_first(others, self.nmt_every), NMT_DEFAULTS) if name in present)


def measure(
    results_dir: Path, vision: Mapping[str, Any] | None = None, translation: Mapping[str, Any] | None = None
) -> Quality:
    """The figures of the quality result files in ``results_dir``; ``vision`` and ``translation``:
    today's value of each of :data:`VISION_SETTINGS` and :data:`NMT_SETTINGS` (default:
    :func:`vision_defaults`, :func:`nmt_defaults`)."""
    lines = read_lines(sorted(results_dir.glob("quality_vision*.jsonl")), "quality_vision")
    vision_every = vision_runs(lines, vision_defaults() if vision is None else vision)
    vision_best = best_rate(latest(vision_every))
    nmt_lines = read_lines(sorted(results_dir.glob("quality_nmt*.jsonl")), "quality_nmt")
    nmt_today = nmt_defaults() if translation is None else translation
    by_bf16: dict[bool, list[dict[str, Any]]] = {True: [], False: []}
    for line in nmt_lines:
        by_bf16[not without_bf16(line["env"])].append(line)
    nmt_every = nmt_runs(by_bf16[True], nmt_today)
    nmt_latest = latest(nmt_every)
    float32_every = nmt_runs(by_bf16[False], nmt_today)
    return Quality(
        vision_best, cells(vision_best), nmt_latest, cells(nmt_latest), vision_every, nmt_every, latest(float32_every), float32_every
    )


def defaults_table(
    figures: Mapping[tuple, Cell], ours: str, loop: str, data: Iterable[str] | None = None, what: str = "data"
) -> str:
    """One row per (data, budget) where ``ours`` has a figure: the loop's, ours, the lead of ours
    and the speed ratio; ``data``: only those sets (``what`` names them in the header). A lead
    between runs of two machines (on the seeds it is taken on) is marked."""
    keys = sorted({
        (d, budget) for d, budget, name in figures
        if name == ours and (data is None or d in data) and budget[0] in USER_BUDGETS
    })
    rows, marked = [], False
    for d, budget in keys:
        mine, theirs = figures[(d, budget, ours)], figures.get((d, budget, loop))
        mark = OTHER_MACHINE if theirs is not None and apart(mine, theirs) else ""
        marked = marked or bool(mark)
        rows.append([d, budget_words(budget), theirs, mine, f"{lead(mine, theirs) or '-'}{mark}", ratio(mine, theirs)])
    text = table([what, "budget", "plain loop", "defaults", "lead", "speed"], rows)
    if marked:
        text += f"\n\n{OTHER_MACHINE} the loop's run and the defaults' ran on different machines."
    return text


def times(multiple: float) -> str:
    """A multiple as the lead as budget writes it: cut, never rounded up, to two decimals (30 / 8
    is 3.75, 10 / 3 is 3.33, 4 is 4)."""
    return f"{math.floor(round(multiple * 100, 9)) / 100:g}"  # rounded first: 2.3 * 100 is 229.99999999999997


def budget_multiples(figures: Mapping[tuple, Cell], ours: str, loop: str) -> str:
    """The lead as budget, one line per data set where it shows: the largest multiple ``L / D`` of
    a budget ``D`` of ``ours`` whose figure the loop stays under at a larger budget ``L`` of the
    same unit (so the loop needs more than ``L / D`` times the budget for it)."""
    found: dict[str, tuple[float, tuple, tuple]] = {}
    for (data, budget, name), mine in figures.items():
        if name != ours or budget[0] not in USER_BUDGETS:
            continue
        for (other_data, longer, other), theirs in figures.items():
            if other != loop or other_data != data or longer[0] != budget[0] or longer[1] <= budget[1]:
                continue
            multiple = longer[1] / budget[1]
            if theirs.mean < mine.mean and (data not in found or multiple > found[data][0]):
                found[data] = (multiple, budget, longer)
    lines = []
    for data, (multiple, budget, longer) in sorted(found.items()):
        mine, theirs = figures[(data, budget, ours)], figures[(data, longer, loop)]
        other = "" if same_machine(mine, theirs) else ON_ANOTHER_MACHINE
        lines.append(
            f"- {data}: the loop at {budget_words(longer)}, {theirs.mean:.1f}, under the defaults at "
            f"{budget_words(budget)}, {mine.mean:.1f}: more than {times(multiple)} times the {budget[0]}{other}"
        )
    return "\n".join(lines) or "(no data set has the loop at a larger budget under the defaults)"


@dataclass(frozen=True)
class Effect:
    """A lever against the defaults it changes (``against``) at one data set and budget, on the
    seeds both have."""

    data: str
    budget: tuple[str, float]
    against: str
    base: Cell
    lever: Cell

    def words(self, gain: bool = False, named: bool = False, validation: bool = False) -> str:
        """``glyphs, 3 epochs: LEVER against BASE (LEVER - BASE)``: the lever's figure first, then
        the defaults' it changes; with ``gain``, the other way round. A pair whose runs did not all
        run on one machine says so (``, on another machine`` after the difference); ``named``
        names defaults that are not today's (``, the earlier defaults (...)``); ``validation`` adds
        the validation split's figures where both sides recorded them (``; validation A against B``)."""
        first, second = (self.base, self.lever) if gain else (self.lever, self.base)
        seeds = f", {self.base.seeds} seeds" if self.base.seeds > 1 else ""
        other = "" if same_machine(first, second) else ON_ANOTHER_MACHINE
        recipe = f", {recipe_words(self.against)}" if named and self.against not in (DEFAULTS, NMT_DEFAULTS) else ""
        checked = ""
        if validation and first.validation is not None and second.validation is not None:
            checked = f"; validation {first.validation:.1f} against {second.validation:.1f}"
        difference = f"{first.mean - second.mean:+.1f}"  # on the seeds both have: effects() pairs them
        return (
            f"{self.data}, {budget_words(self.budget)}{seeds}: {first.mean:.1f} against {second.mean:.1f} "
            f"({difference}{other}{recipe}{checked})"
        )


def effects(runs: Iterable[Run], every: Iterable[Run]) -> dict[str, list[Effect]]:
    """Each lever's effects against the defaults it changes, at the same data, budget and seeds:
    its run in ``runs`` (the latest of each) against the run of those defaults nearest to it in
    time among ``every``, their run of the same session where they had one."""
    runs = list(runs)
    by_key = {(run.data, run.budget, run.contender, run.seed): run for run in runs}
    repeats: dict[tuple, list[Run]] = defaultdict(list)
    for run in every:
        repeats[(run.data, run.budget, run.contender, run.seed)].append(run)
    levers = {(run.data, run.budget, run.contender): (run.base, run.lever) for run in runs if run.lever is not None}
    out: dict[str, list[Effect]] = defaultdict(list)
    for (data, budget, name), (base, lever) in sorted(levers.items()):
        mine = [run for (d, b, n, _), run in by_key.items() if (d, b, n) == (data, budget, name)]
        pairs = [(run, nearest(repeats[(data, budget, base, run.seed)], run)) for run in mine if repeats[(data, budget, base, run.seed)]]
        if pairs:
            both = cells([run for pair in pairs for run in pair])
            out[lever].append(Effect(data, budget, base, both[(data, budget, base)], both[(data, budget, name)]))
    for found in out.values():
        found.sort(key=lambda effect: (effect.data, effect.budget))
    return dict(out)


def recipe_words(name: str) -> str:
    """A recipe of the defaults in words: today's, or the earlier defaults and what differed."""
    if name in (DEFAULTS, NMT_DEFAULTS):
        return "today's defaults"
    return f"the earlier defaults ({name.split(', ', 1)[1]})"


def lever_name(lever: str) -> str:
    return LEVER_NAMES.get(lever, f"`{lever}`")


def lever_words(lever: str, found: list[Effect]) -> str:
    """One lever as a list item: its name, the overrides that set it, the defaults it was set
    against, and a nested item per effect (the lever's figure against theirs)."""
    overrides = " ".join(f"`{part}`" for part in lever.split(" + "))
    against = " and ".join(sorted({recipe_words(effect.against) for effect in found}))
    items = "".join(f"\n    - {effect.words(validation=True)}" for effect in found)  # a nested list: four spaces for MkDocs
    return f"- **{lever_name(lever)}** ({overrides}), against {against}:{items}"


def earlier_only(figures: Mapping[tuple, Cell], order: tuple[str, ...], loop: str, defaults: str) -> list[str]:
    """Budgets measured only with an earlier recipe (``order`` lists the recipes, oldest first,
    between the loop and today's ``defaults``): its figure against the loop's, as list items."""
    today = {(data, budget) for data, budget, name in figures if name == defaults}
    earlier = [name for name in order if name not in (loop, defaults)]
    items = []
    for data, budget in sorted({(d, b) for d, b, name in figures if name != loop} - today):
        recipes = [name for name in earlier if (data, budget, name) in figures]
        if recipes:
            mine, theirs = figures[(data, budget, recipes[-1])], figures.get((data, budget, loop))
            other = ON_ANOTHER_MACHINE if theirs is not None and apart(mine, theirs) else ""
            against = f" against the loop's {theirs} ({lead(mine, theirs)}{other})" if theirs is not None else ""
            items.append(f"- {data}, {budget_words(budget)}: {mine} with {recipe_words(recipes[-1])}{against}.")
    return items


def history_and_levers(found: Mapping[str, list[Effect]], earlier: list[str]) -> tuple[str, str]:
    """The earlier defaults and the levers of one head (its :func:`effects`), each as a list in
    words; ``earlier``: the budgets measured only before today's defaults (:func:`earlier_only`)."""
    history = [lever_words(lever, found[lever]) for lever in sorted(found) if is_history(lever)]
    levers = [lever_words(lever, found[lever]) for lever in sorted(found, key=lever_name) if not is_history(lever)]
    if earlier:
        history += ["", "Budgets measured only before today's defaults:", "", *earlier]
    return "\n".join(history), "\n".join(levers)


MARKERS = ("o", "s", "^", "D")  # a contender's marker in the quality figures, one per ten contenders


def plot_quality(figures: Mapping[tuple, Cell], order: tuple[str, ...], ylabel: str, path: Path) -> None:
    """:func:`quality_figure`, written to ``path``."""
    fig = quality_figure(figures, order, ylabel)
    import matplotlib.pyplot as plt  # after quality_figure chose the backend
    with atomic_path(path) as tmp:
        fig.savefig(tmp, dpi=110, metadata={"Software": None})
    plt.close(fig)


def quality_figure(figures: Mapping[tuple, Cell], order: tuple[str, ...], ylabel: str) -> Any:
    """One panel per data set and budget unit a user gives (:data:`USER_BUDGETS`): each contender's
    mean (line) and seed range (bar) against the budget; the legend above the panels."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import NullLocator

    panels = sorted({(data, budget[0]) for data, budget, _ in figures if budget[0] in USER_BUDGETS})
    # A grid of at most three panels a row, legible at the width of the documentation's page.
    columns = min(3, len(panels))
    rows = -(-len(panels) // columns)
    fig, grid = plt.subplots(rows, columns, figsize=(3.6 * columns, 2.9 * rows + 0.7), squeeze=False)
    axes = grid.flatten()
    for ax in axes[len(panels):]:
        ax.set_visible(False)
    for ax, (data, unit) in zip(axes, panels):
        for index, name in enumerate(order):
            points = sorted(
                (budget[1], cell) for (d, budget, n), cell in figures.items() if (d, budget[0], n) == (data, unit, name)
            )
            if not points:
                continue
            x = [length for length, _ in points]
            y = [cell.mean for _, cell in points]
            errors = [[cell.mean - cell.low for _, cell in points], [cell.high - cell.mean for _, cell in points]]
            # A contender's colour and marker are its place in ``order``, the same in every panel,
            # so the shared legend holds where a panel lacks some contenders; past the ten colours
            # of the cycle, the marker tells contenders of one colour apart.
            ax.errorbar(x, y, yerr=errors, marker=MARKERS[index // 10 % len(MARKERS)], capsize=3, label=name,
                        color=f"C{index % 10}")
        lengths = sorted({budget[1] for d, budget, _ in figures if (d, budget[0]) == (data, unit)})
        ax.set_xscale("log")
        ax.set_xticks(lengths, [f"{length:g}" for length in lengths])
        ax.xaxis.set_minor_locator(NullLocator())
        ax.set_xlim(lengths[0] / 1.5, lengths[-1] * 1.5)
        ax.set_title(data)
        ax.set_xlabel(unit)
        ax.set_ylabel(ylabel)
        ax.grid(alpha=0.3)
    handles: dict[str, Any] = {}  # one legend entry per contender, from whichever panel has it
    for ax in axes[: len(panels)]:
        for handle, label in zip(*ax.get_legend_handles_labels()):
            handles.setdefault(label, handle)
    legend_inches = place_legend(fig, handles) + 0.1
    fig.set_figheight(2.9 * rows + legend_inches)  # grown to hold the legend
    fig.tight_layout(rect=(0, 0, 1, 1 - legend_inches / fig.get_figheight()))
    return fig


def place_legend(fig: Any, handles: Mapping[str, Any]) -> float:
    """A legend of ``handles`` (label -> handle) at the top of ``fig``, two entries a row, its
    labels wrapped until it fits the figure's width; the inches of height it takes."""
    renderer = fig.canvas.get_renderer()
    width = max(map(len, handles))  # characters a label's line holds
    while True:
        labels = [textwrap.fill(label, width) for label in handles]
        legend = fig.legend(list(handles.values()), labels, loc="upper center", ncol=2, fontsize="small")
        box = legend.get_window_extent(renderer)
        if box.width <= fig.bbox.width or width <= 20:
            return box.height / fig.dpi
        legend.remove()
        width = int(width * 0.85)


def plot_speed(rows: list[tuple[str, float]], path: Path) -> None:
    """Horizontal bars: the CLI's training speed over its loop's, one bar per run."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 0.3 * len(rows) + 1.2))
    ax.barh([label for label, _ in rows], [value for _, value in rows], color="tab:blue")
    ax.axvline(1.0, color="black", linewidth=1)
    ax.set_xlabel("CLI speed / loop speed (training items/s)")
    ax.invert_yaxis()
    fig.tight_layout()
    with atomic_path(path) as tmp:
        fig.savefig(tmp, dpi=110, metadata={"Software": None})
    plt.close(fig)


def speed_rows(figures: Mapping[tuple, Cell], ours: str, loop: str, prefix: str) -> list[tuple[str, float]]:
    rows = []
    for data, budget, name in sorted(figures):
        value = speed_ratio(figures[(data, budget, name)], figures.get((data, budget, loop)))
        if name == ours and value is not None:
            rows.append((f"{prefix}{data}, {budget_label(budget)}", value))
    return rows


def changes(table: tuple[Setting, ...], today: Mapping[str, Any]) -> str:
    """The changes of a head's defaults since its first runs, oldest first, in words."""
    return "; ".join(setting.change for setting in table if setting.changed(today))


def render(
    results_dir: Path,
    figures_dir: Path | None,
    vision: Mapping[str, Any] | None = None,
    translation: Mapping[str, Any] | None = None,
) -> str:
    """The page's Markdown; with ``figures_dir``, the figures are written there too.
    ``vision`` and ``translation``: as :func:`measure` takes them."""
    today = vision_defaults() if vision is None else vision
    nmt_today = nmt_defaults() if translation is None else translation
    quality = measure(results_dir, today, nmt_today)
    vision, nmt = quality.vision, quality.nmt
    if figures_dir is not None:
        if vision:
            plot_quality(vision, quality.vision_order, "test accuracy (%)", figures_dir / "vision_quality.png")  # levers: in words only
        if nmt:
            plot_quality(nmt, quality.nmt_order, "test BLEU", figures_dir / "translation_quality.png")
        float32 = float32_figures(quality.nmt_float32)
        if float32:
            plot_quality(float32, (NMT_LOOP, NMT_DEFAULTS), "test BLEU", figures_dir / FLOAT32_FIGURE)
        speeds = speed_rows(vision, DEFAULTS, LOOP, "vision ") + speed_rows(nmt, NMT_DEFAULTS, NMT_LOOP, "translation ")
        if speeds:
            plot_speed(speeds, figures_dir / "speed_ratios.png")
    history, levers = (
        history_and_levers(quality.vision_effects, earlier_only(vision, quality.vision_order, LOOP, DEFAULTS))
        if vision else ("(no results)", "(no results)")
    )
    nmt_history, nmt_levers = (
        history_and_levers(quality.nmt_effects, earlier_only(nmt, quality.nmt_order, NMT_LOOP, NMT_DEFAULTS))
        if nmt else ("(no results)", "(no results)")
    )
    return PAGE_TEMPLATE.format(
        vision=defaults_table(vision, DEFAULTS, LOOP) if vision else "(no results)",
        vision_float32=float32_budgets(quality.vision_runs),
        vision_multiples=budget_multiples(vision, DEFAULTS, LOOP) if vision else "(no results)",
        vision_changes=changes(VISION_SETTINGS, today),
        nmt_changes=changes(NMT_SETTINGS, nmt_today),
        history=history or "(none)",
        levers=levers or "(none)",
        nmt=defaults_table(nmt, NMT_DEFAULTS, NMT_LOOP, what="corpus") if nmt else "(no results)",
        nmt_multiples=budget_multiples(nmt, NMT_DEFAULTS, NMT_LOOP) if nmt else "(no results)",
        nmt_float32=float32_machines(quality.nmt_float32, quality.nmt_float32_effects, plotted=True),
        nmt_history=nmt_history or "(none)",
        nmt_levers=nmt_levers or "(none)",
    )


PAGE_TEMPLATE = """\
# Results: the defaults against the plain loops

<!-- Generated by `python -m benchmarks.quality_report` from benchmarks/results/quality_*.jsonl; do not edit. -->

What a user gets from today's defaults, next to the plain loop they would write instead, at the
same budget, on data that runs offline. Every figure is the latest run of its kind in the result
files (`benchmarks/results/`); the commands that write them are in
[BENCHMARKS.md](../BENCHMARKS.md#quality-of-the-defaults-on-real-data-cpu), and each line of the
files records its command, machine and settings. The plain loop's figure is its best peak rate at
that budget; a figure over several seeds is their mean (range, seeds). "lead" is the defaults'
figure minus the loop's, on the seeds both ran where one side ran more (named beside it, as
"(seed 0)"); "speed" is the defaults' training images/s (tokens/s) over the loop's,
the median over the pairs of their runs that trained at the same batch (translation: each at its
own, the loop's 128 sentences of similar length, the defaults' batches of tokens) in one session
(on one machine, within three hours) with nothing else running. An earlier default
or a lever is set against the run of the defaults nearest to it in time, of the same session where
there was one: a run of minutes makes as many steps as the machine's pace of the day allows. Why
each default is what it is: [Decisions](decisions.md).

## Vision Transformer

Test accuracy (%), the CPU model pinned on both sides (width 128, depth 4, 4 heads, MLP ratio 2,
patch 4). `digits` and `mnist` are the small sets (scikit-learn's and MNIST digits),
`cluttered-digits` and `glyphs` the proving grounds of `python -m benchmarks.proving_grounds`
(a count in brackets: the set built with that many training images, `--ground-counts`).

![Test accuracy against budget](figures/vision_quality.png)

{vision}

{vision_float32}

The lead as budget: the most epochs or minutes the loop was given while staying under the
defaults' figure at fewer (the loop's budget and figure, then the defaults').

{vision_multiples}

### History

The defaults changed since the first runs, oldest change first: {vision_changes}.
Each earlier default against the recipe that replaced it, at the same data, budget and seeds (its
figure first, then theirs, and the difference):

{history}

### Levers

Each lever is one override of the defaults (`--cli-extra OVERRIDE`), measured against the
defaults of its time at the same data, budget and seeds (the lever's figure first, then theirs,
and the difference). None of them is a default.

{levers}

## Translation

Test BLEU, `nlp.train model=transformer_mini` against a plain `torch.nn.Transformer` loop given
the same minutes, each scored as its user gets it: the defaults' figure is the test of `nlp.train`,
beam search (beam 4, length penalty 0.6) on the checkpoint of the lowest validation loss; the
loop's is greedy decoding of its last weights, as a plain loop decodes. The lead includes what the
beam and the checkpoint choice add. What was tried for the translation defaults, and why they are what they are:
[Decisions](decisions.md#translation).

![Test BLEU against minutes](figures/translation_quality.png)

{nmt}

The defaults train in bf16 autocast (`trainer.precision=auto` on a CPU that computes bfloat16, as
every run of the table's did), the loop in float32, as the PyTorch tutorial does. The defaults'
minutes include their validations (each epoch's loss and greedy-decoded BLEU on the validation
split); the loop's minutes are all training steps.

The lead as budget, as for the Vision Transformer:

{nmt_multiples}

### On a CPU without bfloat16

Where the CPU has neither AVX512-BF16 nor AMX (AVX2 only, as many desktop and laptop CPUs),
`trainer.precision=auto` trains in float32, as the loop does; every other default is the same.
These runs are kept apart from the table above. A speed of `-` marks a pair whose two sides ran
in different sessions, at another pace of the machine:

{nmt_float32}

### History

The defaults changed since the first runs, oldest change first: {nmt_changes}.
Each earlier recipe against the recipe that replaced it, at the same corpus, budget and seeds (its
figure first, then theirs, and the difference):

{nmt_history}

### Levers

Each lever is one override of the defaults (`--cli-extra OVERRIDE`), against the defaults of its
time at the same corpus, budget and seeds. None of them is a default.

{nmt_levers}

## Speed

![Speed ratios](figures/speed_ratios.png)
"""


def float32_budgets(runs: Iterable[Run]) -> str:
    """Which figures of today's vision defaults trained in float32 (rows from before
    ``trainer.precision=auto`` became the vision default), in words."""
    earlier = sorted({(run.data, run.budget) for run in runs if run.contender == DEFAULTS and run.precision == FLOAT32})
    if not earlier:
        return "Every figure of the defaults trained in bf16 autocast where the hardware computes bfloat16."
    where = ", ".join(f"{data} at {budget_words(budget)}" for data, budget in earlier)
    return (
        "The vision defaults train in bf16 autocast where the hardware computes bfloat16 (`trainer.precision=auto`); "
        f"these figures of the defaults hold runs from before, in float32 (the same recipe, slower): {where}."
    )


def float32_figures(figures: Mapping[tuple, Cell]) -> dict[tuple, Cell]:
    """The defaults' and the loop's figures of CPUs without bfloat16, those the figure of
    :data:`FLOAT32_FIGURE` draws; none where the defaults have none."""
    if not any(name == NMT_DEFAULTS for _, _, name in figures):
        return {}
    return {key: cell for key, cell in figures.items() if key[2] in (NMT_LOOP, NMT_DEFAULTS)}


def float32_machines(figures: Mapping[tuple, Cell], found: Mapping[str, list[Effect]], plotted: bool = False) -> str:
    """The translation defaults against the loop on CPUs without bfloat16 (:func:`without_bf16`),
    with the machines they ran on, the lead as budget (:func:`budget_multiples`) and the earlier
    defaults and levers measured there (``found``, their :func:`effects`); ``plotted``: led by the
    figure of :data:`FLOAT32_FIGURE` (the results page's)."""
    if not float32_figures(figures):
        return "(no runs on such a CPU yet)"
    machines = sorted({run.machine for cell in figures.values() for run in cell.runs})
    listed = "\n".join(part for part in history_and_levers(found, []) if part)
    measured = f"\n\nLevers measured on such a CPU, against the defaults there:\n\n{listed}" if listed else ""
    figure = f"![Test BLEU against minutes on a CPU without bfloat16]({FIGURES}/{FLOAT32_FIGURE})\n\n" if plotted else ""
    return (
        f"{figure}Machine: {', '.join(machines)}.\n\n{defaults_table(figures, NMT_DEFAULTS, NMT_LOOP, what='corpus')}\n\n"
        f"The lead as budget:\n\n{budget_multiples(figures, NMT_DEFAULTS, NMT_LOOP)}{measured}"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", type=Path, default=RESULTS, help="folder of the quality_*.jsonl files")
    parser.add_argument("--docs", type=Path, default=DOCS, help="where results.md and figures/ are written")
    parser.add_argument("--check", action="store_true", help="only compare docs/results.md with the results")
    args = parser.parse_args(argv)
    if args.check:
        page = render(args.results, None)
        current = (args.docs / PAGE).read_text() if (args.docs / PAGE).is_file() else ""
        if current != page:
            print(f"{args.docs / PAGE} is out of date; run python -m benchmarks.quality_report", file=sys.stderr)
            return 1
        return 0
    page = render(args.results, args.docs / FIGURES)
    with atomic_path(args.docs / PAGE) as tmp:
        tmp.write_text(page)
    print(f"wrote {args.docs / PAGE} and {args.docs / FIGURES}/")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
