"""The one written contract between the shared machinery and a head (``vision``, ``nlp``, or a
third one): what the runner and the evaluation app use of the head's LightningDataModule and
LightningModule (:class:`HeadData`, :class:`HeadModule`, optionally :class:`EvaluationSplits` and
:class:`SplitSelection`),
and what the head declares once for its two commands (:class:`Head`).

A head needs no change in ``core``: it writes a datamodule and a module that have these members,
a primary config for training and one for evaluation (each naming its rules module in
``config_rules``, see :mod:`core.training.commands.config_check`), and a :class:`Head`; its ``train`` and
``evaluate`` commands are then ``training_app(HEAD)`` and ``evaluation_app(HEAD)`` of
:mod:`core.training.commands.apps`.

Importing this module loads neither torch nor Lightning, so a command built from a :class:`Head`
answers ``--help`` before those imports.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from core.errors import InputError

if TYPE_CHECKING:
    from torch import nn


@runtime_checkable
class HeadData(Protocol):
    """What the shared runner and evaluation app use of a head's LightningDataModule.

    The runner builds it from the config's ``data`` section, calls :meth:`prepare_data` and
    ``setup("fit")``, then builds the module with :meth:`module_kwargs`; the Trainer takes the
    three loaders. The evaluation app calls ``setup("test")`` and reads one split.
    """

    def prepare_data(self) -> None:
        """Download or prepare files on disk; the runner calls it one process at a time per
        machine (a file lock), so the processes of a launch do the work once."""

    def setup(self, stage: str | None = None) -> None:
        """Load what :meth:`prepare_data` left on disk (every process)."""

    def module_kwargs(self) -> dict[str, Any]:
        """What the module needs from the data (classes, tokenizer, preprocessing), as plain
        types: the runner passes them to the module's constructor, so checkpoints keep them, and
        the evaluation app refuses data whose values differ from a checkpoint's."""

    def train_dataloader(self) -> Any:
        """The training batches."""

    def val_dataloader(self) -> Any:
        """The validation split: validation during training, which gives the optimized metric."""

    def test_dataloader(self) -> Any:
        """The test split: the final test of a run and the default split of evaluation."""


@runtime_checkable
class EvaluationSplits(Protocol):
    """Optional for a :class:`HeadData`: a datamodule whose training loader augments offers each
    split as evaluation must see it (the training images without augmentation)."""

    def evaluation_dataloader(self, split: str) -> Any:
        """``split`` (``train``, ``val`` or ``test``) in order, with evaluation preprocessing."""


@runtime_checkable
class SplitSelection(Protocol):
    """Optional for a :class:`HeadData`: a datamodule that can prepare and load the one split an
    evaluation reads instead of every split (a translation corpus then encodes its test pairs
    alone, not the training pairs too)."""

    def select_split(self, split: str) -> None:
        """Prepare and load only what evaluating ``split`` (``train``, ``val`` or ``test``) needs;
        the evaluation app calls it before :meth:`HeadData.prepare_data`."""


@runtime_checkable
class HeadModule(Protocol):
    """What the shared runner and evaluation app use of a head's LightningModule.

    The runner builds it as ``module._target_(model=<the model section as a dict>,
    **datamodule.module_kwargs(), **<the other module settings>)``; its constructor calls
    ``save_hyperparameters()``, so a checkpoint alone rebuilds it. Lightning calls the usual
    steps (``training_step``, ``validation_step``, ``test_step``, ``configure_optimizers``) and
    the steps log ``<stage>/<metric>``, among them the config's ``optimized_metric``. A head
    whose defaults change may add a static ``upgrade_hyperparameters(hparams) -> hparams`` that
    gives older checkpoints' missing settings their values of then
    (:func:`core.files.checkpoints.current_hyperparameters`).
    """

    net: nn.Module
    """The network built from the model section: the runner checks ``model._target_`` against
    its class and compiles it in place (``compile=true``)."""

    throughput_unit: str
    """What :meth:`count_items` counts (``"samples"``, ``"tokens"``): names the training rate,
    ``train_<unit>_per_second`` in ``metrics.json``."""

    hparams: Any
    """The saved hyperparameters (``model`` and every :meth:`HeadData.module_kwargs` key): the
    evaluation app completes its config from them and compares the data with them."""

    def count_items(self, batch: Any) -> int:
        """The items (samples, tokens) of a training batch, for the training rate."""


def members(protocol: type) -> list[str]:
    """The members a protocol class declares: its annotated attributes, then its methods."""
    methods = [name for name, value in vars(protocol).items() if inspect.isfunction(value)]
    return [name for name in (*inspect.get_annotations(protocol), *methods) if not name.startswith("_")]


def require_members(built: object, protocol: type, source: str) -> None:
    """Refuse ``built`` (made as ``source`` says, e.g. ``module._target_=...``) when it lacks a
    member of ``protocol``, naming the member.

    Attributes are looked up as ``hasattr`` does: a LightningModule's ``net`` lives among its
    submodules, where ``isinstance`` against the protocol looks up statically from Python 3.12 on.
    """
    missing = [name for name in members(protocol) if not hasattr(built, name)]
    if missing:
        raise InputError(
            f"{source}: class {type(built).__name__} lacks {', '.join(missing)}, which the shared runner needs "
            f"({protocol.__name__} of core.training.head; see 'Writing a head' in the docs); add it to the class"
        )


@dataclass(frozen=True)
class Head:
    """A head, declared once for its ``train`` and ``evaluate`` commands.

    Functions are named by dotted import path, as ``_target_`` names classes in the configs, and
    imported only when the evaluate command runs, so a :class:`Head` costs no torch import.
    """

    package: str
    """The head's package (``vision``): its commands are ``<package>.train`` and
    ``<package>.evaluate``, which name the run's log file (``train.log``, ``evaluate.log``)."""

    train_config: str
    """The primary config of training (``vision`` for ``conf/vision.yaml``)."""

    eval_config: str
    """The primary config of evaluation (``vision_eval``)."""

    load_checkpoint: str
    """``path -> module``: the head's LightningModule read from a checkpoint alone, as plain data
    (``vision.module.load_classifier``)."""

    eval_metric: str
    """The metric the evaluate command returns for sweeps, ``<split>/<eval_metric>`` (``acc``)."""

    checkpoint_data: str | None = None
    """``(module, output_dir) -> dict``: the data settings the checkpoint fixes (preprocessing, a
    tokenizer written to ``output_dir``), given to the datamodule of the evaluated data; None: none."""

    evaluation_reports: str | None = None
    """``module -> list of core.training.evaluation.EvaluationReport``: callbacks that add entries
    to the evaluation's ``metrics.json`` (a confusion matrix, sacreBLEU signatures); None: none."""

    config_path: str = "pkg://conf"
    """Where Hydra finds the two primary configs: the ``conf`` package of this project, or a
    directory of the head's own (which may compose the shared groups through
    ``hydra.searchpath: [pkg://conf]``)."""
