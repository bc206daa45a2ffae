"""``trainer.precision=auto``: bf16 autocast where the device computes bfloat16, float32 elsewhere,
resolved before Lightning builds the Trainer."""

from __future__ import annotations

import lightning.pytorch as pl
import pytest
import torch
from omegaconf import OmegaConf

from core.training.plan import precision
from core.training.plan.precision import hardware_precision, resolve_precision


@pytest.mark.parametrize(
    ("avx512_bf16", "amx", "expected"),
    [(True, False, "bf16-mixed"), (False, True, "bf16-mixed"), (False, False, "32-true")],
)
def test_a_cpu_gets_bf16_only_with_its_instructions(
    monkeypatch: pytest.MonkeyPatch, avx512_bf16: bool, amx: bool, expected: str
) -> None:
    monkeypatch.setattr(torch.cpu, "_is_avx512_bf16_supported", lambda: avx512_bf16)
    monkeypatch.setattr(torch.cpu, "_is_amx_tile_supported", lambda: amx)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert hardware_precision("cpu") == hardware_precision("auto") == expected


@pytest.mark.parametrize(("bf16", "expected"), [(True, "bf16-mixed"), (False, "32-true")])
def test_a_gpu_gets_bf16_only_where_it_has_it(monkeypatch: pytest.MonkeyPatch, bf16: bool, expected: str) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    # torch's answer counts emulated bf16 (a GPU before Ampere) unless told not to.
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda including_emulation=True: bf16 or including_emulation)
    monkeypatch.setattr(precision, "cpu_computes_bf16", lambda: not bf16)  # the GPU decides, not the CPU
    assert hardware_precision("gpu") == hardware_precision("auto") == expected


def test_auto_is_replaced_in_the_config_and_a_named_precision_kept() -> None:
    trainer = OmegaConf.create({"accelerator": "cpu", "precision": "auto"})
    OmegaConf.set_struct(trainer, True)
    chosen = resolve_precision(trainer)
    assert chosen == trainer.precision == hardware_precision("cpu")
    named = OmegaConf.create({"accelerator": "cpu", "precision": "32-true"})
    assert resolve_precision(named) is None and named.precision == "32-true"


def test_lightning_trains_in_the_resolved_precision() -> None:
    """The resolved value is one Lightning accepts, and its steps run under bf16 autocast when it
    says bf16: the linear layer's output is bfloat16 inside the step."""
    trainer_cfg = OmegaConf.create({"accelerator": "cpu", "precision": "auto"})
    resolve_precision(trainer_cfg)
    seen: list[torch.dtype] = []

    class Probe(pl.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.layer = torch.nn.Linear(4, 4)

        def training_step(self, batch: list[torch.Tensor], batch_idx: int) -> torch.Tensor:
            out = self.layer(batch[0])
            seen.append(out.dtype)
            return out.float().pow(2).mean()

        def configure_optimizers(self) -> torch.optim.Optimizer:
            return torch.optim.SGD(self.parameters(), lr=0.1)

    data = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(torch.randn(8, 4)), batch_size=4)
    trainer = pl.Trainer(
        accelerator="cpu", precision=trainer_cfg.precision, max_steps=2, logger=False,
        enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
    )
    trainer.fit(Probe(), data)
    expected = torch.bfloat16 if trainer_cfg.precision == "bf16-mixed" else torch.float32
    assert seen == [expected, expected]
