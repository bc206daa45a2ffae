"""Training to a budget: the learning-rate schedule laid over the steps the run will really take,
and the run ended at its budget with a final validation.

A run is bounded by ``trainer.max_epochs``, ``trainer.max_steps`` or ``trainer.max_time``
(whichever comes first). Left at ``null``, ``max_epochs`` is the head's ``budget.epochs`` for a
run that names no other bound, and no bound at all beside ``max_time`` or ``max_steps``
(:func:`resolve_epochs`): a 30-minute run trains for 30 minutes. For epochs and steps the number of optimizer steps is known when
training starts; for a time budget it is estimated from the measured time per step (validation
included) and refined as the run goes, so a 10-minute run anneals over its 10 minutes (after
"Budgeted Training", Li et al. 2020, whose linear-to-zero finding holds for any schedule that
ends with the budget). The warmup is capped to a stated fraction of the planned steps.

:class:`TrainingBudget` publishes that plan as one :class:`RunPlan`, the same on every process
(a time budget's pace is measured on the first process and broadcast): the learning-rate
schedules, the warmup cap, the regularization sized to the run's length (vision) and the
progress lines all read it through :func:`run_plan`.
"""

from __future__ import annotations

import logging
import math
import time
from dataclasses import asdict, dataclass
from typing import Any

import lightning.pytorch as pl
from lightning.pytorch.callbacks import Timer
from omegaconf import DictConfig, open_dict
from torch.optim.lr_scheduler import LambdaLR

from core.constraints import FRACTION
from core.errors import InputError
from core.schedules import BudgetedSchedule

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RunPlan:
    """The run as planned: ``steps`` optimizer steps in all (``inf`` for a run without a bound),
    ``steps_per_epoch`` optimizer steps in an epoch of the training loader (``inf`` when its
    length is unknown), and whether the total is ``estimated`` from a time budget's pace."""

    steps: float
    steps_per_epoch: float
    estimated: bool = False

    @property
    def epochs(self) -> float:
        """Planned epochs, fractions allowed (``inf`` for an unbounded run, 0 when the loader's
        length is unknown)."""
        if not 0 < self.steps_per_epoch < math.inf:
            return 0.0
        return self.steps / self.steps_per_epoch


def resolve_epochs(trainer: DictConfig, epochs: int | None) -> int | None:
    """Replace ``trainer.max_epochs=null`` in place: -1 (no epoch bound) when ``trainer.max_time``
    or a positive ``trainer.max_steps`` bounds the run, else ``epochs`` (the head's
    ``budget.epochs``). Returns what was chosen, None when the config names ``max_epochs`` itself.
    A run left with no bound at all is an :class:`InputError`."""
    if trainer.get("max_epochs") is not None:
        return None
    bounded = trainer.get("max_time") is not None or (trainer.get("max_steps") or -1) > 0
    if not bounded and epochs is None:
        raise InputError(
            "the run has no bound: trainer.max_epochs, trainer.max_steps and trainer.max_time are unset and the "
            "config has no budget.epochs; set one, e.g. trainer.max_epochs=10"
        )
    chosen = -1 if bounded else int(epochs)  # type: ignore[arg-type]
    with open_dict(trainer):
        trainer.max_epochs = chosen
    return chosen


def steps_per_epoch(trainer: pl.Trainer) -> float:
    """Optimizer steps in one epoch of the Trainer's training loader (inf when its length is
    unknown, or not sized yet); every data-parallel process has the same number. An epoch ends
    with an optimizer step on its last batches when they fill only part of an accumulation."""
    batches = float(trainer.num_training_batches)
    return float(math.ceil(batches / trainer.accumulate_grad_batches)) if math.isfinite(batches) else batches


def run_plan(trainer: pl.Trainer) -> RunPlan | None:
    """The plan that the Trainer's :class:`TrainingBudget` published (None while a time budget's
    pace is being measured); without that callback, the plan of ``max_epochs`` / ``max_steps``."""
    budget = training_budget(trainer)
    if budget is not None:
        return budget.plan
    return RunPlan(float(stepping_bound(trainer) or math.inf), steps_per_epoch(trainer))


def training_budget(trainer: pl.Trainer) -> TrainingBudget | None:
    """The Trainer's :class:`TrainingBudget`, None without one."""
    return next((callback for callback in trainer.callbacks if isinstance(callback, TrainingBudget)), None)


class FollowsThePlan:
    """A LightningModule mixin for settings sized to the run's plan (regularization, in each head's
    ``recipe``): the head's :meth:`follow_plan`, which sets ``followed_plan`` to :func:`run_plan`,
    runs as training starts, at the start of every epoch, and at every batch until a plan exists
    (a ``max_time`` run is planned once its first steps are timed)."""

    followed_plan: RunPlan | None = None

    def on_train_start(self) -> None:
        """Follow the plan before the first batch is loaded: a run resumed in the middle of an
        epoch starts without that epoch's ``on_train_epoch_start``."""
        self.follow_plan()

    def on_train_epoch_start(self) -> None:
        """Follow the plan at the start of every epoch."""
        self.follow_plan()

    def on_train_batch_start(self, batch: Any, batch_idx: int) -> None:
        """A time budget is planned once its first steps are timed: follow the plan from then on."""
        if self.followed_plan is None:
            self.follow_plan()

    def follow_plan(self) -> None:
        """Size the settings to ``run_plan(self.trainer)`` and keep it as ``followed_plan``."""
        raise NotImplementedError


def stepping_bound(trainer: pl.Trainer) -> int | None:
    """The optimizer steps that ``max_epochs`` / ``max_steps`` allow, None when unbounded (a run
    bounded by ``max_time`` alone, or by epochs of a loader without a length): the ``total_steps``
    a module gives its schedule at first.

    Also None for an epoch bound while Lightning has not set the training loader up (in
    ``configure_optimizers``) and a :class:`TrainingBudget` plans the run as training starts:
    counting an epoch's batches there (``estimated_stepping_batches``) would set the loader up
    before a resumed run restores its position, and the resumed epoch would start again from its
    first batch."""
    if training_budget(trainer) is not None and trainer.max_epochs != -1 and trainer.train_dataloader is None:
        return None
    bound = float(trainer.estimated_stepping_batches)  # max_steps (-1: none) where an epoch has no length
    return max(1, int(bound)) if math.isfinite(bound) and bound >= 0 else None


def wall_clock_timer(trainer: pl.Trainer) -> Timer | None:
    """The ``Timer`` that ``trainer.max_time`` installs, None without a time bound."""
    return next((c for c in trainer.callbacks if isinstance(c, Timer) and c._duration), None)  # type: ignore[attr-defined]


def validate_this_epoch(trainer: pl.Trainer) -> None:
    """Make the epoch in progress validate, whatever ``trainer.check_val_every_n_epoch`` is: the
    epoch a budget ends in holds the final weights, trained to the end of the schedule. Lightning
    validates at an asked-for stop (``should_stop``), or at the epoch's end, only in an epoch that
    ``check_val_every_n_epoch`` names; a run that ends in another would test an older checkpoint."""
    if trainer.check_val_every_n_epoch is not None:  # None: validation every val_check_interval steps, in any epoch
        trainer.check_val_every_n_epoch = 1


def after_the_timer(trainer: pl.Trainer) -> None:
    """Move the Trainer's :class:`TrainingBudget` after the ``Timer`` that ``trainer.max_time``
    appends to its callbacks, so that the budget sees the time budget's stop in the hooks of the
    batch it is asked for (Lightning calls the callbacks' hooks in their order)."""
    timer, budget = wall_clock_timer(trainer), training_budget(trainer)
    if timer is None or budget is None:
        return
    rest = [callback for callback in trainer.callbacks if callback is not budget]
    at = rest.index(timer) + 1
    trainer.callbacks = [*rest[:at], budget, *rest[at:]]


class TrainingBudget(pl.Callback):
    """Plans every :class:`BudgetedSchedule` of the module's schedulers over the run's budget.

    Args:
        max_warmup_fraction: the warmup is at most this fraction of the planned steps; a note is
            logged when the configured warmup is shortened. Each head states it once, in its
            primary config (``budget.max_warmup_fraction``); a model preset may set its own.
        measure_steps: optimizer steps timed (after the first, which carries one-off costs)
            before a time budget's plan is made.
        refine_every_n_steps: how often a time budget's plan is re-estimated.
    """

    def __init__(self, max_warmup_fraction: float, measure_steps: int = 3, refine_every_n_steps: int = 10) -> None:
        FRACTION.require(max_warmup_fraction, "budget.max_warmup_fraction")
        self.max_warmup_fraction = max_warmup_fraction
        self.measure_steps = max(1, measure_steps)
        self.refine_every_n_steps = max(1, refine_every_n_steps)
        self.schedulers: list[LambdaLR] = []
        self.schedules: list[BudgetedSchedule] = []
        self.timer: Timer | None = None
        self.start_step = 0
        self.start_time = 0.0
        self.timing = False  # whether steps are timed yet (from the end of the first)
        self.plan: RunPlan | None = None
        self.resumed_plan: RunPlan | None = None  # the checkpoint's, for a run that resumes
        self.announced = False

    def state_dict(self) -> dict[str, Any]:
        """The plan in force, kept in the checkpoint."""
        return {} if self.plan is None else {"plan": asdict(self.plan)}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Take the checkpoint's plan: a resumed time budget follows it until it has measured its
        pace again, so that what is sized to the plan (each head's regularization) is sized from
        the first batch on."""
        plan = state_dict.get("plan")
        self.resumed_plan = RunPlan(**plan) if plan is not None else None

    def on_train_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        """Find the budgeted schedules and the time budget, and make the first plan (a resumed
        time budget keeps the checkpoint's until its pace is measured); a run resumed inside its
        last epoch makes it validate (:meth:`on_train_epoch_start`, which Lightning does not call
        for the epoch it resumes inside)."""
        self.schedulers = [
            config.scheduler
            for config in trainer.lr_scheduler_configs
            if isinstance(config.scheduler, LambdaLR)
            and any(isinstance(schedule, BudgetedSchedule) for schedule in config.scheduler.lr_lambdas)
        ]
        # LambdaLR repeats one schedule object for every parameter group: plan (and note) each once.
        self.schedules = list({
            id(schedule): schedule
            for scheduler in self.schedulers
            for schedule in scheduler.lr_lambdas
            if isinstance(schedule, BudgetedSchedule)
        }.values())
        self.timer = wall_clock_timer(trainer)
        self.start_step, self.start_time, self.timing = trainer.global_step, time.monotonic(), False
        self.plan = self.resumed_plan
        self.replan(trainer)
        self.on_train_epoch_start(trainer, pl_module)

    def on_train_batch_end(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, outputs: Any, batch: Any, batch_idx: int
    ) -> None:
        """Refine a time budget's plan; at ``max_steps`` ask Lightning to stop, which validates the
        final weights first (a stop inside an epoch would otherwise skip that validation), and make
        any stop asked for by now (the time budget's, from Lightning's ``Timer`` before this
        callback: :func:`after_the_timer`) validate although ``check_val_every_n_epoch`` passes
        over its epoch."""
        done = trainer.global_step - self.start_step
        if self.timer is not None and not self.timing and done == 1:
            # The first step carries one-off costs (compilation, allocator, workers): time from its end.
            self.start_step, self.start_time, self.timing = trainer.global_step, time.monotonic(), True
        elif self.timer is not None and done >= self.measure_steps and (
            self.plan is None or done % self.refine_every_n_steps == 0
        ):
            self.replan(trainer)
        if 0 < trainer.max_steps <= trainer.global_step:
            trainer.should_stop = True
        if trainer.should_stop:
            validate_this_epoch(trainer)

    def on_train_epoch_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        """Make the last epoch of an epoch bound validate (see :func:`validate_this_epoch`)."""
        if 0 < trainer.max_epochs <= trainer.current_epoch + 1:
            validate_this_epoch(trainer)

    def planned_steps(self, trainer: pl.Trainer) -> float | None:
        """Optimizer steps the run will take: the epoch/step bound (inf without one), and for a
        time budget the steps done plus the remaining time over the measured time per step;
        None while that time is being measured."""
        bound = float(stepping_bound(trainer) or math.inf)
        done = trainer.global_step - self.start_step
        if self.timer is not None:
            if done < self.measure_steps:
                return None
            seconds_per_step = (time.monotonic() - self.start_time) / done
            remaining = self.timer.time_remaining("train") or 0.0
            bound = min(bound, float(int(trainer.global_step + remaining / seconds_per_step)))
        return bound

    def replan(self, trainer: pl.Trainer) -> None:
        """Publish the current plan, lay the schedules over it, and log it once (and when warmup
        is cut)."""
        steps = self.planned_steps(trainer)
        if self.timer is not None:  # measured per process: every process follows the first one's plan
            steps = trainer.strategy.broadcast(steps, src=0)
        if steps is None or (self.plan is not None and self.plan.steps == steps):
            return
        self.plan = RunPlan(steps, steps_per_epoch(trainer), estimated=self.timer is not None)
        if not math.isfinite(steps):
            return
        planned = int(steps)
        shortened = [
            schedule for schedule in self.schedules if schedule.plan(planned, self.max_warmup_fraction, trainer.global_step)
        ]
        for scheduler in self.schedulers:  # the rate in force now follows the new plan
            rates = [base * schedule(scheduler.last_epoch) for base, schedule in zip(scheduler.base_lrs, scheduler.lr_lambdas)]
            for group, rate in zip(scheduler.optimizer.param_groups, rates):
                group["lr"] = rate
            scheduler._last_lr = rates  # what get_last_lr() and the LR monitor report
        if self.announced:
            return
        self.announced = True
        kind = " (estimated from the time budget)" if self.timer is not None else ""
        log.info("learning-rate schedule laid over %d optimizer steps%s", planned, kind)
        for schedule in shortened:
            log.info(
                "note: warmup shortened from %d to %d steps, %.0f%% of the planned steps (budget.max_warmup_fraction)",
                schedule.requested_warmup, schedule.warmup_steps, 100 * self.max_warmup_fraction,
            )
