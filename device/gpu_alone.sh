#!/usr/bin/env bash
# Each central family's cost per update on the gpu scale's card when it has the card to itself (one
# slot: `--resources gpu=1`), from the embedded data: Base, +PR, +Fusing_Diverse, the LL seq2seq and
# NPMT, a few hundred updates each (NPMT 30; device/gpu-alone.yaml), read off their training logs. Beside
# gpu_study.sh's shared-card times, it says how much of a training's time is its own work and how much
# the sharing. On the device, from the project's root, .device-wheels carried:   bash device/gpu_alone.sh
# On a CPU, as a test of the script, with a second override file shrinking the data and widths:
#   TEST_CONFIG=path/to/small.yaml LIMIT=600 bash device/gpu_alone.sh
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-device/out/gpu_alone}
mkdir -p "$OUT"
begin=$(date +%s)
source device/env.sh
rm -rf results/gpu .snakemake
timeout -k 10 "${LIMIT:-150}" snakemake --cores all --resources gpu=1 --keep-going \
    --configfile device/gpu-alone.yaml ${TEST_CONFIG:-} --config scale=gpu ${TEST_CONFIG:+allow_cpu=true} -- \
    results/gpu/train/{base_en_de,pr_en_de,fusing_en_de,ll_greedy_de_en,npmt_greedy_de_en}/final.pt > "$OUT/alone.log" 2>&1
echo "rc=$? after $(( $(date +%s) - begin )) s"
grep -H "tgt tok/s" results/gpu/logs/train/*.log | sed -e "s,results/gpu/logs/train/,  ," -e "s,nmtrepro.training.train | ,," | cut -c1-170
python3 device/study_times.py --results results/gpu
