"""The Hydra presets of the translation head, composed with the real config tree."""

from __future__ import annotations

from pathlib import Path

import pytest
from hydra.utils import instantiate

from core.runner import model_kwargs
from nlp.model import Seq2SeqTransformer
from tests.nlp.conftest import nlp_config


def test_default_is_multi30k_with_the_small_model(tmp_path: Path) -> None:
    cfg = nlp_config(tmp_path)
    assert cfg.data.corpus == "hf" and cfg.data.dataset == "bentrevett/multi30k"
    assert (cfg.data.src_lang, cfg.data.tgt_lang) == ("de", "en")
    assert cfg.model.dim == 512 and cfg.model.ffn_dim == 1024
    assert cfg.data.max_len == cfg.model.max_len
    assert cfg.trainer.use_distributed_sampler is False and cfg.trainer.gradient_clip_val == 1.0


def test_data_presets_bring_their_schedule_and_the_command_line_wins(tmp_path: Path) -> None:
    toy = nlp_config(tmp_path, "data=toy", "module.warmup_steps=7")
    assert toy.data.corpus == "toy" and toy.trainer.max_epochs == 10 and toy.module.lr == 3e-3
    assert toy.module.warmup_steps == 7
    files = nlp_config(tmp_path, "data=files", "data.train=a.tsv", "data.val=b.tsv")
    assert files.module.warmup_steps == 4000 and files.data.train == "a.tsv"
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
