"""The Hydra presets of the translation head, composed with the real config tree."""

from __future__ import annotations

from pathlib import Path

import pytest
from hydra.utils import instantiate

from core.training.runner import model_kwargs
from nlp.model import Seq2SeqTransformer
from tests.nlp.conftest import nlp_config


def test_default_is_multi30k_with_the_small_model(tmp_path: Path) -> None:
    cfg = nlp_config(tmp_path)
    assert cfg.data.corpus == "hf" and cfg.data.dataset == "bentrevett/multi30k"
    assert (cfg.data.src_lang, cfg.data.tgt_lang) == ("de", "en")
    assert cfg.model.dim == 512 and cfg.model.ffn_dim == 1024
    assert cfg.data.max_len == cfg.model.max_len
    assert cfg.trainer.use_distributed_sampler is False and cfg.trainer.gradient_clip_val == 1.0


DATA_PRESETS = {
    "toy": (),
    "files": ("data.train=a.tsv", "data.val=b.tsv"),
    "gettext": (),
    "multi30k": (),
    "hf": ("data.dataset=wmt/wmt14", "data.dataset_config=de-en"),
}


@pytest.mark.parametrize("data", list(DATA_PRESETS))
def test_data_presets_carry_data_only_and_the_model_preset_brings_the_recipe(tmp_path: Path, data: str) -> None:
    cfg = nlp_config(tmp_path, f"data={data}", *DATA_PRESETS[data], "model=transformer_mini")
    assert (cfg.module.lr, cfg.module.warmup_steps, cfg.budget.max_warmup_fraction) == (2e-3, 1000, 0.5)
    assert cfg.data.max_tokens == (96 if data == "toy" else "auto")  # the toy corpus is 3 short pairs
    reference = nlp_config(tmp_path, "data=toy", "model=transformer_mini")
    assert cfg.module == reference.module and cfg.trainer == reference.trainer  # nothing from the data preset
    small = nlp_config(tmp_path, f"data={data}", *DATA_PRESETS[data], "model=transformer_small")
    assert (small.module.lr, small.module.warmup_steps, small.budget.max_warmup_fraction) == (5e-4, 4000, 0.1)


def test_the_command_line_wins_over_the_presets(tmp_path: Path) -> None:
    cfg = nlp_config(tmp_path, "data=toy", "model=transformer_tiny", "module.warmup_steps=7", "data.max_tokens=64")
    assert cfg.data.corpus == "toy" and cfg.module.lr == 3e-3 and cfg.module.warmup_steps == 7
    assert cfg.data.max_tokens == 64
    wmt = nlp_config(tmp_path, "data=hf", "data.dataset=wmt/wmt14", "data.dataset_config=de-en")
    assert instantiate(wmt.data).dataset_config == "de-en"


def test_paper_experiment_preset(tmp_path: Path) -> None:
    cfg = nlp_config(tmp_path, "experiment=transformer_base_wmt14")
    assert (cfg.data.dataset, cfg.data.src_lang, cfg.data.tgt_lang) == ("wmt/wmt14", "en", "de")
    assert cfg.model.ffn_dim == 2048 and cfg.model.num_heads == 8 and cfg.model.norm_first is False
    assert cfg.module.lr == pytest.approx((512 * 4000) ** -0.5, rel=0.01) and cfg.trainer.max_steps == 100_000


def test_files_preset_without_paths_names_the_missing_key(tmp_path: Path) -> None:
    from omegaconf.errors import MissingMandatoryValue

    with pytest.raises(MissingMandatoryValue, match="train"):
        instantiate(nlp_config(tmp_path, "data=files").data)


def parameters(preset: str, tmp_path: Path, vocab_size: int) -> int:
    model = Seq2SeqTransformer(vocab_size, vocab_size, **model_kwargs(nlp_config(tmp_path, f"model={preset}")))
    return sum(p.numel() for p in model.parameters())


def test_base_preset_has_the_papers_size(tmp_path: Path) -> None:
    # Table 3: 65M parameters for the base model with a shared ~37k BPE vocabulary (EN-DE).
    assert parameters("transformer_base", tmp_path, 37000) / 1e6 == pytest.approx(63.1, abs=0.1)
    assert parameters("transformer_small", tmp_path, 8000) < parameters("transformer_base", tmp_path, 8000)
    assert parameters("transformer_tiny", tmp_path, 400) < 250_000
