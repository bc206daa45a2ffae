"""The third head's config rules, named by ``config_rules`` in its configs."""

from collections.abc import Callable

from omegaconf import DictConfig

from core.constraints import POSITIVE_INT
from core.training.commands.config_check import Rule

RULES: tuple[Rule, ...] = (Rule(("data.repeat", "data.batch_size", "model.depth"), POSITIVE_INT),)
RELATIONS: tuple[Callable[[DictConfig], None], ...] = ()
