"""Translation quality per wall-clock minute: ``python -m nlp.train DATA model=transformer_mini
trainer=cpu trainer.max_time=...`` (nothing else: the defaults) against a plain
``torch.nn.Transformer`` training loop, each given the same training minutes, on every proving
corpus (``--corpus``, :data:`CORPORA`):

- ``gettext-en-de``: the gettext catalogs, English -> German program messages (40k pairs, median
  5 words), ``data=gettext``;
- ``long-es-en``: Spanish -> English sentences of 25 to 64 words (median 33 Spanish, 28 English;
  10k pairs), each program's messages joined in order (``data.join_words=24``), written to TSV
  files and read with ``data=files`` as a user's own corpus would be;
- ``gettext-fr-en``: French -> English program messages (53k pairs), ``data=gettext``;
- ``long-many-en`` and ``many-en`` (named with ``--corpus`` only): the corpora of
  :mod:`benchmarks.corpora`, every language into English, as long passages (30k+ pairs) and as
  messages (300k+ pairs), with a held-back test of 300 pairs, built into ``OUT_DIR/corpora``.

Both contenders get the same data: the same split, BPE tokenizer and truncation, built by the
data config the CLI composes (one list of Hydra overrides drives both). The CLI runs as a user
would run it, in a subprocess with ``trainer.max_time``; it tests its best checkpoint with beam
search (``metrics.json``).

The plain loop is the model and loop of the PyTorch tutorial "Language Translation with
nn.Transformer": ``torch.nn.Transformer`` with the transformer_mini sizes, separate source and
target embeddings scaled by sqrt(d), sinusoidal positions, a linear generator, batches of 128
sentence pairs, Adam (0.9, 0.98, 1e-9) and greedy decoding without a cache. Its learning rate,
warmup and batches are tuned as a practitioner would (``PLAIN_LOOP``): peak 1e-3 after 200 linear
warmup steps, then 1/sqrt(step), and batches of sentences of similar length (torchtext's old
``BucketIterator``: sorted by length, cut into 128s, the batches shuffled): the tutorial's
random batches of 128 spend most of their compute on padding (on 2 CPU cores they trained 180
target tokens/s, where the CLI's length-bucketed batches train 1,334). It adds label smoothing
0.1 and gradient clipping 1.0 as the CLI has them. It trains in float32, as the tutorial does
(the CLI's precision follows the hardware: ``trainer.precision=auto``, bf16 autocast on a CPU with
AVX512-BF16 or AMX and on a GPU that has it), until the minutes are spent, without validation.

Columns: test BLEU, validation BLEU and test chrF (sacreBLEU), rep4 (share of translations
repeating a word 4-gram, beside the references' own share), optimizer steps, the final label-smoothed training loss (the
CLI's last logged ``train/loss``, the plain loop's mean over its last 50 steps) and training
target tokens per second. The validation BLEU is greedy on both sides (the CLI's last
validation; the loop's decoded after its clock stops): it is the figure to decide a lever on, so
that the held-back test split stays out of every decision.

With ``--steps N`` the CLI alone trains for ``N`` optimizer steps instead of minutes, at batches
of :data:`STEP_BATCH_TOKENS` tokens: a lever and the defaults at equal steps, a pair the machine's
pace cannot tilt (at equal minutes, a faster minute is more steps).

    python -m benchmarks.quality_nmt [--corpus gettext-en-de long-es-en gettext-fr-en] [--minutes 8 30 | --steps N]
        [--device cpu|cuda] [--threads N] [--locale-dir /usr/share/locale] [--out-dir DIR]
        [--contenders cli loop] [--cli-extra OVERRIDE ...]
        [--append results.jsonl] [--quick]
"""

from __future__ import annotations

import argparse
import math
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from hydra import compose, initialize_config_dir
from hydra.utils import instantiate
from omegaconf import OmegaConf
from sacrebleu.metrics import BLEU, CHRF
from torch import Tensor, nn

import core
from core.constraints import AUTO
from benchmarks import corpora
from benchmarks.common import CONF, cli_precision, environment, precision_setting, run_training_cli, table_result
from benchmarks.report import budget_label, length_of, table
from nlp.analysis.corpus_scores import corpus_score
from nlp.data.batching import Example, pad_batch
from nlp.constraints import pad_multiple
from nlp.data.datamodule import TranslationDataModule
from nlp.decoding import length_limits, repetition_rate
from nlp.data.gettext import DEFAULT_LOCALE_DIR, read_gettext_corpus
from nlp.data.tokenizer import SubwordTokenizer
from nlp.recipe import MIN_DROPOUT

QUICK_OVERRIDES = ("model=transformer_tiny", "data.vocab_size=300", "trainer.num_sanity_val_steps=0")
# The batch of a run bounded by steps (--steps): what data.max_tokens=auto gives the proving corpora
# at 8 and 30 minutes on a CPU (its batch_rule line in the run's log), fixed, since a budget of
# steps has no tokens of its own to size the batch from.
STEP_BATCH_TOKENS = 1024
DEFAULT_SEED = 42  # conf/nlp.yaml's seed: the CLI's rows without --seed


@dataclass(frozen=True)
class PlainLoop:
    """Settings of the plain ``torch.nn.Transformer`` loop."""

    batch_sentences: int = 128  # the tutorial's BATCH_SIZE, in batches of similar lengths
    peak_lr: float = 1e-3  # the tutorial's 1e-4 is for 18 epochs
    warmup_steps: int = 200  # linear warmup, then lr * sqrt(warmup / step)
    label_smoothing: float = 0.1
    clip_norm: float = 1.0
    dropout: float = 0.1  # the tutorial's
    seed: int = 0


PLAIN_LOOP = PlainLoop()


@dataclass(frozen=True)
class Corpus:
    """A proving corpus: gettext catalogs of one language pair, read with ``data=gettext`` or
    written to TSV files and read with ``data=files``."""

    src_lang: str
    tgt_lang: str
    join_words: int = 0  # nlp.data.gettext's joining of messages into long sentences
    as_files: bool = False  # through data=files, as a user's own corpus
    built: bool = False  # built by benchmarks.corpora (all languages into English), through data=files


CORPORA = {
    "gettext-en-de": Corpus("en", "de"),
    "long-es-en": Corpus("es", "en", join_words=24, as_files=True),
    "gettext-fr-en": Corpus("fr", "en"),
    "long-many-en": Corpus("mul", "en", built=True),
    "many-en": Corpus("mul", "en", built=True),
}
PROVING = ("gettext-en-de", "long-es-en", "gettext-fr-en")  # the corpora run when none is named


def write_tsv_splits(corpus: Corpus, locale_dir: str, directory: Path) -> dict[str, Path]:
    """The corpus's train/val/test splits as ``source<TAB>target`` files in ``directory``."""
    return corpora.write_splits(directory, read_gettext_corpus(locale_dir, corpus.src_lang, corpus.tgt_lang, corpus.join_words))


def data_overrides(name: str, args: argparse.Namespace, out_dir: Path) -> list[str]:
    """The Hydra overrides both contenders share: corpus, languages, model size."""
    corpus = CORPORA[name]
    languages = [f"data.src_lang={corpus.src_lang}", f"data.tgt_lang={corpus.tgt_lang}"]
    if corpus.built:
        if not (out_dir / "corpora" / name / "build.json").is_file():
            corpora.main([str(out_dir / "corpora"), "--corpora", name, "--locale-dir", str(args.locale_dir)])
        paths = {split: out_dir / "corpora" / name / f"{split}.tsv" for split in ("train", "val", "test")}
        overrides = ["data=files", f"data.train={paths['train']}", f"data.val={paths['val']}", f"data.test={paths['test']}"]
    elif corpus.as_files:
        paths = write_tsv_splits(corpus, args.locale_dir, out_dir / name)
        overrides = ["data=files", f"data.train={paths['train']}", f"data.val={paths['val']}", f"data.test={paths['test']}"]
    else:
        overrides = ["data=gettext", f"data.locale_dir={args.locale_dir}", f"data.join_words={corpus.join_words}"]
    overrides += [*languages, "model=transformer_mini"]
    return overrides + list(QUICK_OVERRIDES if args.quick else ())


def max_time(seconds: float) -> str:
    """Lightning's ``DD:HH:MM:SS`` for ``trainer.max_time``."""
    whole = max(1, round(seconds))
    return f"{whole // 86400:02d}:{whole // 3600 % 24:02d}:{whole // 60 % 60:02d}:{whole % 60:02d}"


def budget_overrides(unit: str, length: float) -> list[str]:
    """The CLI's budget: ``length`` minutes, or ``length`` optimizer steps at batches of
    :data:`STEP_BATCH_TOKENS` tokens."""
    if unit == "minutes":
        return [f"trainer.max_time={max_time(60 * length)}"]
    return ["trainer.max_time=null", f"trainer.max_steps={length:g}", f"data.max_tokens={STEP_BATCH_TOKENS}"]


def run_cli(budget: list[str], overrides: list[str], run_dir: Path, device: str, threads: int) -> dict[str, Any]:
    """``python -m nlp.train`` with the ``budget`` overrides; the figures of its ``metrics.json``
    (among them the cross entropy without label smoothing of its last validation and of the test,
    ``val_nll`` and ``test_nll``), the precision it trained in and its setting (``auto`` unless an
    override names one), its ``model.dropout`` (an auto one with the rate it switches on at), its
    label smoothing, its width and feed-forward and the multiple its batches were padded to."""
    cli_overrides = [*overrides, f"trainer={'gpu' if device == 'cuda' else 'cpu'}", *budget, "logger=csv"]
    metrics, _ = run_training_cli("nlp.train", cli_overrides, run_dir, threads)
    config = OmegaConf.load(run_dir / ".hydra" / "config.yaml")
    dropout = config.model.dropout  # a number, or auto (nlp.recipe)
    return {
        "bleu": metrics["test/bleu"],
        "val_bleu": metrics["val/bleu"],  # greedy, the last validation's
        "chrf": metrics["test/chrf"],
        "rep4": metrics["test/rep4"],
        "rep4_ref": metrics["test/rep4_ref"],
        "train_loss": metrics["train/loss"],
        "val_nll": metrics["val/nll"],
        "test_nll": metrics["test/nll"],
        "train_tokens_per_second": metrics["train_tokens_per_second"],
        "train_seconds": metrics["fit_seconds"],
        "steps": metrics["optimizer_steps"],
        "precision": cli_precision(overrides, device),
        "precision_setting": precision_setting(overrides),
        "dropout": dropout,
        "label_smoothing": config.module.label_smoothing,
        "dim": config.model.dim,
        "ffn_dim": config.model.ffn_dim,
        "pad_to_multiple": pad_multiple(config.data.pad_to_multiple),
        **({"min_dropout": MIN_DROPOUT} if dropout == AUTO else {}),  # the rate an auto dropout switches on at
    }


class TutorialTransformer(nn.Module):
    """The PyTorch tutorial's ``Seq2SeqTransformer``: ``nn.Transformer`` (post-norm, with the
    final norms of its stacks), separate embeddings scaled by sqrt(d), a linear generator, every
    matrix Xavier-uniform initialized."""

    def __init__(self, vocab_size: int, model: dict[str, Any], pad_id: int, dropout: float) -> None:
        super().__init__()
        self.dim, self.pad_id, self.max_len = model["dim"], pad_id, model["max_len"]
        self.src_embed = nn.Embedding(vocab_size, self.dim)
        self.tgt_embed = nn.Embedding(vocab_size, self.dim)
        self.pos_encoding = core.SinusoidalPositionalEncoding(self.dim, model["max_len"], dropout)
        self.transformer = nn.Transformer(
            d_model=self.dim,
            nhead=model["num_heads"],
            num_encoder_layers=model["encoder_depth"],
            num_decoder_layers=model["decoder_depth"],
            dim_feedforward=model["ffn_dim"],
            dropout=dropout,
            batch_first=True,
        )
        self.generator = nn.Linear(self.dim, vocab_size)
        for parameter in self.parameters():  # the tutorial's init; N(0, 1) embeddings * sqrt(d) would be huge
            if parameter.dim() > 1:
                nn.init.xavier_uniform_(parameter)

    def embed(self, embedding: nn.Embedding, tokens: Tensor) -> Tensor:
        return self.pos_encoding(embedding(tokens) * math.sqrt(self.dim))

    def forward(self, src: Tensor, tgt: Tensor) -> Tensor:
        """Source [B, S] and shifted target [B, T] -> logits [B, T, vocab]."""
        src_padding_mask = src.eq(self.pad_id)
        hidden = self.transformer(
            self.embed(self.src_embed, src),
            self.embed(self.tgt_embed, tgt),
            tgt_mask=core.causal_mask(tgt.shape[1], device=tgt.device),
            src_key_padding_mask=src_padding_mask,
            tgt_key_padding_mask=tgt.eq(self.pad_id),
            memory_key_padding_mask=src_padding_mask,
        )
        return self.generator(hidden)


def batches(examples: list[Example], size: int, pad_id: int, generator: torch.Generator) -> list[tuple[Tensor, Tensor]]:
    """One epoch of batches of ``size`` pairs of similar lengths, in random order: (source [B, S],
    target [B, T]). A stable sort of a random permutation breaks length ties differently each epoch."""
    order = sorted(torch.randperm(len(examples), generator=generator).tolist(), key=lambda i: len(examples[i][0]))
    chosen = [[examples[i] for i in order[start : start + size]] for start in range(0, len(order), size)]
    chosen = [chosen[i] for i in torch.randperm(len(chosen), generator=generator).tolist()]
    return [(pad_batch([s for s, _ in batch], pad_id), pad_batch([t for _, t in batch], pad_id)) for batch in chosen]


def train_plain(
    model: TutorialTransformer, examples: list[Example], seconds: float, device: torch.device, seed: int
) -> dict[str, float]:
    """Train until ``seconds`` have passed, the batches in an order drawn from ``seed``; target
    tokens per second, the seconds and steps spent and the mean loss of the last 50 steps."""
    settings, pad_id = PLAIN_LOOP, model.pad_id
    optimizer = torch.optim.Adam(model.parameters(), lr=settings.peak_lr, betas=(0.9, 0.98), eps=1e-9)
    warmup = settings.warmup_steps
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda step: min((step + 1) / warmup, math.sqrt(warmup / (step + 1)))
    )
    generator = torch.Generator().manual_seed(seed)
    model.train()
    tokens, steps, losses, start = 0, 0, [], time.perf_counter()
    while time.perf_counter() - start < seconds:
        for src, tgt in batches(examples, settings.batch_sentences, pad_id, generator):
            src, tgt = src.to(device), tgt.to(device)
            logits = model(src, tgt[:, :-1])
            loss = F.cross_entropy(
                logits.flatten(0, 1).float(),  # (B * T, V)
                tgt[:, 1:].flatten(),
                ignore_index=pad_id,
                label_smoothing=settings.label_smoothing,
            )
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            nn.utils.clip_grad_norm_(model.parameters(), settings.clip_norm)
            optimizer.step()
            scheduler.step()
            tokens += int(tgt[:, 1:].ne(pad_id).sum())
            losses.append(loss.item())
            steps += 1
            if time.perf_counter() - start >= seconds:
                break
    elapsed = time.perf_counter() - start
    last = losses[-50:]
    return {
        "train_tokens_per_second": tokens / elapsed,
        "train_seconds": elapsed,
        "steps": steps,
        "train_loss": sum(last) / max(len(last), 1),  # mean of the last 50 steps
    }


@torch.no_grad()
def greedy_uncached(model: TutorialTransformer, src: Tensor, limits: Tensor, bos_id: int, eos_id: int) -> Tensor:
    """The tutorial's greedy decoding, batched: the whole prefix through the decoder each step."""
    tokens = torch.full((src.shape[0], 1), bos_id, dtype=torch.long, device=src.device)
    finished = torch.zeros(src.shape[0], dtype=torch.bool, device=src.device)
    for step in range(int(limits.max())):
        logits = model(src, tokens)[:, -1].float()  # (B, V)
        logits[:, [model.pad_id, bos_id]] = float("-inf")
        next_token = logits.argmax(dim=-1)
        next_token = torch.where(step + 1 >= limits, eos_id, next_token).masked_fill(finished, model.pad_id)
        tokens = torch.cat([tokens, next_token[:, None]], dim=1)
        finished |= next_token == eos_id
        if finished.all():
            break
    return tokens[:, 1:]


def evaluate_plain(
    model: TutorialTransformer, examples: list[Example], tokenizer: SubwordTokenizer, device: torch.device
) -> dict[str, float]:
    """BLEU, chrF and rep4 of greedy translations of ``examples`` (a split), limited to the CLI's
    default ``1.2 * source length + 10`` tokens."""
    model.eval()
    hypotheses, references = [], []
    ordered = sorted(examples, key=lambda example: len(example[0]))  # similar lengths batch well
    for start in range(0, len(ordered), 64):
        chunk = ordered[start : start + 64]
        src = pad_batch([s for s, _ in chunk], tokenizer.pad_id).to(device)
        limits = length_limits(model, src)  # type: ignore[arg-type]  # reads max_len and pad_id
        output = greedy_uncached(model, src, limits, tokenizer.bos_id, tokenizer.eos_id)
        hypotheses += [tokenizer.decode(row.tolist()) for row in output]
        references += [tokenizer.decode(target) for _, target in chunk]
    return {
        "bleu": corpus_score(BLEU(), hypotheses, references).score,
        "chrf": corpus_score(CHRF(), hypotheses, references).score,
        "rep4": repetition_rate(hypotheses),
        "rep4_ref": repetition_rate(references),
    }


def run_plain(
    seconds: float, datamodule: TranslationDataModule, model_cfg: dict[str, Any], device: torch.device, seed: int
) -> dict[str, float]:
    """The plain loop on the CLI's data: train for ``seconds`` from ``seed``, then test; its figures,
    the BLEU of the validation split (greedy, as the CLI's last validation; decoded after the
    clock stops) and its width and feed-forward (``model_cfg``'s, those of the CLI's preset)."""
    tokenizer = datamodule.tokenizer
    assert tokenizer is not None
    torch.manual_seed(seed)
    model = TutorialTransformer(tokenizer.vocab_size, model_cfg, tokenizer.pad_id, PLAIN_LOOP.dropout).to(device)
    trained = train_plain(model, datamodule.examples["train"], seconds, device, seed)
    sizes = {"dim": model_cfg["dim"], "ffn_dim": model_cfg["ffn_dim"]}
    val_bleu = evaluate_plain(model, datamodule.examples["val"], tokenizer, device)["bleu"]
    return {**evaluate_plain(model, datamodule.examples["test"], tokenizer, device), "val_bleu": val_bleu, **trained, **sizes}


def markdown(rows: list[dict[str, Any]]) -> str:
    """The side-by-side table."""
    return table(
        ("corpus", "budget", "contender", "test BLEU", "val BLEU (greedy)", "test chrF", "rep4 (references)", "steps",
         "train loss", "train tokens/s", "train s"),
        (
            (row["corpus"], budget_label(length_of(row)), row["contender"], f"{row['bleu']:.2f}",
             f"{row['val_bleu']:.2f}", f"{row['chrf']:.2f}",
             f"{row['rep4']:.3f} ({row['rep4_ref']:.3f})", row["steps"], f"{row['train_loss']:.3f}",
             f"{row['train_tokens_per_second']:.0f}", f"{row['train_seconds']:.0f}")
            for row in rows
        ),
    )


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    budgets = parser.add_mutually_exclusive_group()
    budgets.add_argument("--minutes", type=float, nargs="+", default=[8.0, 30.0], help="training budgets to compare")
    budgets.add_argument(
        "--steps", type=int, nargs="+", default=None,
        help=f"budgets of optimizer steps at batches of {STEP_BATCH_TOKENS} tokens instead (the CLI only: pairs at equal steps)",
    )
    parser.add_argument("--device", default="cpu", choices=("cpu", "cuda"), help="cuda: the CLI with trainer=gpu")
    parser.add_argument("--threads", type=int, default=torch.get_num_threads(), help="CPU threads of both contenders")
    parser.add_argument("--corpus", nargs="+", default=list(PROVING), choices=list(CORPORA), help="proving corpora")
    parser.add_argument("--locale-dir", default=DEFAULT_LOCALE_DIR, help="directory of <lang>/LC_MESSAGES/*.mo")
    parser.add_argument(
        "--contenders", nargs="+", default=["cli", "loop"], choices=["cli", "loop"],
        help="which side to run (e.g. cli alone to refresh its rows after a change of defaults)",
    )
    parser.add_argument(
        "--cli-extra", nargs="+", default=[], metavar="OVERRIDE",
        help="overrides added to the CLI's (a lever under test, e.g. trainer.precision=32-true); named in its rows",
    )
    parser.add_argument(
        "--seed", type=int, default=None,
        help="another seed than the defaults' (the config's seed=42, the loop's 0): the CLI's seed=S and the loop's "
        "torch.manual_seed(S), recorded in the rows (rows without one are seed 0 in the report)",
    )
    parser.add_argument("--out-dir", type=Path, default=None, help="where the CLI runs go (default: a temporary dir)")
    parser.add_argument("--append", type=Path, default=None, help="also append the result as one JSON line here")
    parser.add_argument(
        "--quick", action="store_true", help="transformer_tiny, a few seconds each: checks the script runs"
    )
    args = parser.parse_args(argv)
    if args.seed is not None and (args.seed < 1 or args.seed == DEFAULT_SEED):
        # Rows without a seed are the defaults' seeds (the config's 42): a row of 42 would count them twice.
        parser.error(f"--seed must be positive and not {DEFAULT_SEED}, the config's seed (without it, the defaults' seeds)")
    if args.steps and "loop" in args.contenders:
        parser.error("--steps bounds the CLI's runs only; add --contenders cli")
    if args.quick and not args.steps:
        args.minutes = [0.05]
    return args


def main(argv: list[str] | None = None) -> dict[str, Any]:
    argv = sys.argv[1:] if argv is None else argv
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    out_dir = args.out_dir or Path(tempfile.mkdtemp(prefix="quality_nmt-"))
    rows, settings = [], {}
    for name in args.corpus:
        overrides = data_overrides(name, args, out_dir)
        with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
            cfg = compose("nlp", overrides=overrides)
        datamodule: TranslationDataModule = instantiate(cfg.data, _convert_="all")
        datamodule.setup("fit")
        model_cfg = {key: value for key, value in cfg.model.items() if key != "_target_"}
        settings[name] = {
            "overrides": overrides,
            "pairs": {split: len(examples) for split, examples in datamodule.examples.items()},
        }
        budgets = [("max_steps", steps) for steps in args.steps] if args.steps else [("minutes", m) for m in args.minutes]
        seeded = {} if args.seed is None else {"seed": args.seed}
        for unit, length in budgets:
            if "cli" in args.contenders:
                run_dir = out_dir / f"{name}_cli_{length:g}{'min' if unit == 'minutes' else 'steps'}{args.seed or ''}"
                budget = budget_overrides(unit, length)
                seed = [] if args.seed is None else [f"seed={args.seed}"]
                cli = run_cli(budget, [*overrides, *args.cli_extra, *seed], run_dir, args.device, args.threads)
                contender = " + ".join(["nlp.train (transformer_mini)", *args.cli_extra])
                rows += [{"corpus": name, unit: length, **seeded, "contender": contender, **cli}]
            if "loop" in args.contenders:
                plain = run_plain(60 * length, datamodule, model_cfg, device, PLAIN_LOOP.seed if args.seed is None else args.seed)
                rows += [{"corpus": name, "minutes": length, **seeded, "contender": "plain nn.Transformer loop", **plain}]
    env = environment(device, args.threads, " ".join(["python -m benchmarks.quality_nmt", *argv]))
    settings_used = {"corpora": settings, "plain_loop": asdict(PLAIN_LOOP)}
    return table_result("quality_nmt", env, rows, markdown(rows), args.append, settings=settings_used)


if __name__ == "__main__":
    main()
