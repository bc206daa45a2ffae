#!/usr/bin/env bash
# GPU readiness check, one script, about 10 minutes on one GPU (bf16, torch.compile):
#   1. python -m vision.train trainer=gpu compile=true on CIFAR-shaped (32 px) data, 200 steps:
#      the CLI's training images/s, beside timm's compiled ViT of the same shape (benchmarks.vit).
#   2. the same with the full 100-epoch recipe switched on (RandAugment m9, random erasing 0.25,
#      Mixup 0.8 / CutMix 1.0, drop path 0.1) through the real transforms: augmented in the loader
#      workers (data.augment_on=loader), on the GPU (device, what auto picks at 32 px), and on the GPU
#      with RandAugment off.
#   3. a 60,000-image proving ground held in memory: cluttered-digits built on the machine's CPUs
#      (benchmarks.proving_grounds --cifar), trained 3 epochs from CIFAR-format arrays
#      (data=cifar10, augmented on the GPU) at the batch the budget rule picks and at 1024:
#      images/s and test accuracy.
#   4. the translation recipe at a GPU budget: python -m nlp.train trainer=gpu compile=true
#      (precision auto: bf16 where the GPU has it) for 2 minutes of transformer_small on
#      long-many-en (benchmarks.corpora, built on the machine): the CLI's target tokens/s, its
#      steps and the BLEU on the 300 held-back test passages.
# Usage: bash benchmarks/gpu_check.sh [OUTPUT_DIR]   (figures: OUTPUT_DIR/summary.md)
set -uo pipefail
cd "$(dirname "$0")/.."
out=${1:-${OUT:-gpu_check}}
mkdir -p "$out"
export PYTHONUNBUFFERED=1 HYDRA_FULL_ERROR=1
py=${PYTHON:-python3}
workers=$(( $(nproc) > 12 ? 12 : $(nproc) ))
summary="$out/summary.md"

{
  echo "# GPU check $(date -u +%F)"
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
  $py -c "import torch, lightning, timm; print('torch', torch.__version__, '| lightning', lightning.__version__, '| timm', timm.__version__)"
} | tee "$summary"

metric() {  # metric RUN_DIR KEY: one value of a run's metrics.json
  $py -c "import json,sys; print(round(json.load(open(sys.argv[1] + '/metrics.json')).get(sys.argv[2], float('nan')), 1))" "$1" "$2"
}

vision_run() {  # vision_run NAME OVERRIDES...: 200 compiled steps of vit_tiny at 32 px, batch 256
  local name=$1; shift
  timeout 150 $py -m vision.train data=synthetic data.train_size=25600 data.val_size=1024 data.test_size=1024 \
    data.batch_size=256 data.num_workers=$workers data.pin_memory=true data.persistent_workers=true \
    trainer=gpu compile=true trainer.max_steps=200 trainer.limit_val_batches=4 "$@" \
    hydra.run.dir="$out/$name" > "$out/$name.log" 2>&1
  echo "exit $? | $name | CLI training images/s: $(metric "$out/$name" train_samples_per_second)" | tee -a "$summary"
}
recipe="data.auto_augment=rand-m9-n2-mstd0.5-inc1-mmax9 data.re_prob=0.25 module.mixup_alpha=0.8 module.cutmix_alpha=1.0 model.drop_path=0.1"

echo "## vision.train trainer=gpu compile=true (vit_tiny, 32 px, batch 256, $workers loader workers, 200 steps)" | tee -a "$summary"
vision_run vision
echo "## the same with the full recipe ($recipe)" | tee -a "$summary"
vision_run vision_recipe_loader $recipe data.augment_on=loader
vision_run vision_recipe_device $recipe data.augment_on=device
vision_run vision_recipe_device_no_randaugment $recipe data.augment_on=device data.auto_augment=null
timeout 100 $py -m benchmarks.vit --device cuda --compile --batch 256 --models vit_tiny --warmup 2 --repeats 3 \
  > "$out/vit_bench.json" 2>"$out/vit_bench.log"
echo "exit $? | benchmarks.vit vit_tiny 32 px (ours vs timm, both compiled, bf16), images/s:" | tee -a "$summary"
$py - "$out/vit_bench.json" <<'EOF' | tee -a "$summary"
import json, sys
for case in json.load(open(sys.argv[1]))["cases"]:
    print(case["case"], {name: run["items_per_s"] for name, run in case["speed"].items()}, case["ratios"])
EOF

echo "## a 60,000-image proving ground held in memory (cluttered-digits, 32 px, vit_tiny, 3 epochs, augmented on the GPU)" | tee -a "$summary"
timeout 120 $py -m benchmarks.proving_grounds "$out/grounds" --sets cluttered-digits --workers "$workers" --cifar \
  > "$out/grounds.log" 2>&1
echo "exit $? | $(head -c 300 "$out/grounds.log" | head -n 1)" | tee -a "$summary"
for batch in auto 1024; do
  timeout 150 $py -m vision.train data=cifar10 data.root="$out/grounds/cluttered-digits/cifar" data.download=false \
    data.val_size=5000 data.batch_size=$batch data.num_workers=$workers data.pin_memory=true data.augment_on=device \
    trainer=gpu compile=true trainer.max_epochs=3 hydra.run.dir="$out/ground_$batch" > "$out/ground_$batch.log" 2>&1
  echo "exit $? | data.batch_size=$batch ($(grep -o 'batches of [0-9]* images' "$out/ground_$batch.log" | head -n 1)) | training images/s: $(metric "$out/ground_$batch" train_samples_per_second) | test acc: $(metric "$out/ground_$batch" test/acc)" | tee -a "$summary"
done

echo "## nlp.train trainer=gpu compile=true: the translation recipe for 2 minutes (transformer_small, long-many-en: 33k passages into English, precision auto)" | tee -a "$summary"
timeout 90 $py -m benchmarks.corpora "$out/corpora" --corpora long-many-en > "$out/corpora.log" 2>&1
echo "exit $? | $(tail -n 1 "$out/corpora.log")" | tee -a "$summary"
corpus="$out/corpora/long-many-en"
timeout 240 $py -m nlp.train data=files data.train="$corpus/train.tsv" data.val="$corpus/val.tsv" data.test="$corpus/test.tsv" \
  model=transformer_small trainer=gpu compile=true trainer.max_time=00:00:02:00 hydra.run.dir="$out/nlp" > "$out/nlp.log" 2>&1
echo "exit $? | $(grep -o 'trainer.precision=auto: [^ ]*' "$out/nlp.log" | head -n 1) | CLI training target tokens/s: $(metric "$out/nlp" train_tokens_per_second) | steps: $(metric "$out/nlp" optimizer_steps) | test BLEU after 2 minutes (beam 4, 300 held-back passages): $(metric "$out/nlp" test/bleu)" | tee -a "$summary"
