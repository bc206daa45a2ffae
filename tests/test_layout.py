"""The layout that keeps the layers apart: ``core/`` holds the paper's blocks and the training
machinery lives in ``core.training``, which the blocks never import; the translation product does
not lean on the walkthrough tutorial."""

from __future__ import annotations

import ast
from pathlib import Path

import core

BLOCKS = {"attention", "cache", "dropout", "feedforward", "initialization", "layers", "masks", "positional", "regularization", "schedules", "stacks"}


def imported_modules(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    names = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module}
    return names | {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}


def test_core_holds_the_blocks_and_they_import_no_machinery() -> None:
    root = Path(core.__file__).parent
    assert {path.stem for path in root.glob("*.py")} - {"__init__"} == BLOCKS | {"constraints", "errors"}
    for name in BLOCKS:
        imported = imported_modules(root / f"{name}.py")
        assert not {module for module in imported if module.startswith(("core.training", "lightning", "hydra"))}, name


def test_the_translation_product_does_not_import_the_walkthrough() -> None:
    root = Path(core.__file__).parents[1] / "nlp"
    for path in (path for path in root.rglob("*.py") if "walkthrough" not in path.parts):
        assert not {module for module in imported_modules(path) if module.startswith("nlp.walkthrough")}, path.name


def test_the_rules_of_arguments_and_configs_import_no_torch() -> None:
    """What the constructors accept and the config rules built on it load without torch, so the
    training commands refuse a bad value before the heavy imports."""
    root = Path(core.__file__).parents[1]
    for path in ("core/constraints.py", "core/training/commands/config_check.py", "core/training/plan/lengths.py",
                 "nlp/constraints.py", "nlp/config_rules.py", "vision/constraints.py", "vision/config_rules.py", "vision/recipe.py"):
        imported = imported_modules(root / path)
        assert not {module for module in imported if module.split(".")[0] in ("torch", "lightning", "timm", "numpy")}, path
        local = {module for module in imported if module.split(".")[0] in ("core", "nlp", "vision")}
        assert local <= {"core.constraints", "core.errors", "core.training.commands.config_check", "core.files.model_directory",
                         "core.files.atomic", "core.training.plan.lengths", "nlp.constraints",
                         "vision.constraints", "vision.recipe"}, (path, local)


def test_each_head_keeps_commands_on_top_and_the_rest_in_wings() -> None:
    """A head's top level holds its commands (``python -m <head>.<command>``), its contract
    (``head.py``, ``hooks.py``, ``module.py`` with the checkpoint loader, the config rules) and
    the modules named in the contracts; everything else lives in the wings every head has, named
    alike (data, model, export, analysis). The third head of the tests is laid out the same way."""
    root = Path(core.__file__).parents[1]
    shared = {"__init__", "train", "evaluate", "head", "hooks", "module", "config_rules", "constraints"}
    both = {"recipe", "serve"}  # the run's regularization sized to its length; the HTTP server
    tops = {
        "vision": shared | both | {"predict", "explain", "inference"},
        "nlp": shared | both | {"translate", "average", "decoding"},
    }
    wings = {"data", "model", "export", "analysis"}
    for head, top in tops.items():
        assert {path.stem for path in (root / head).glob("*.py")} == top, head
        packages = {path.name for path in (root / head).iterdir() if (path / "__init__.py").is_file()}
        assert packages - {"walkthrough"} == wings, head
    third = root / "tests" / "third_head"
    assert {path.stem for path in third.glob("*.py")} - shared == {"test_third_head"}
    assert {path.name for path in third.iterdir() if (path / "__init__.py").is_file()} <= wings


def test_each_head_keeps_its_checkpoint_loader_and_hooks_in_the_same_place() -> None:
    """``Head.load_checkpoint`` lives in the head's ``module.py`` beside the LightningModule it
    reads; the evaluation hooks in its ``hooks.py``."""
    from nlp.head import HEAD as NLP
    from tests.third_head.head import HEAD as THIRD
    from vision.head import HEAD as VISION

    for head in (VISION, NLP, THIRD):
        assert head.load_checkpoint.startswith(f"{head.package}.module."), head.package
        for hook in (head.checkpoint_data, head.evaluation_reports):
            assert hook is None or hook.startswith(f"{head.package}.hooks."), (head.package, hook)


def test_core_imports_no_head() -> None:
    """``core`` reaches a head only through the config and the head's ``Head``
    (``core.training.head``), so a new head needs no change in ``core``."""
    root = Path(core.__file__).parent
    for path in root.rglob("*.py"):
        heads = {module for module in imported_modules(path) if module.split(".")[0] in ("nlp", "vision", "tests", "benchmarks")}
        assert not heads, (path, heads)
