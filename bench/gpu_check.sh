#!/usr/bin/env bash
# The gpu scale's device check, one call on a lent GPU (bench/README.md "gpu_check.sh"): the central
# study at `gpu` from an empty results/ (data, 21 trainings sharing the card, decoding, claims, report),
# timed, while bench/gpu_convergence.py trains the Base recipe twice as long beside it and then
# decodes its checkpoints (the curve that says whether the recipe's end sits on the plateau); what time
# is left before the deadline goes to `tables` at gpu (the other families' training times).
#
# On the device, from the project's root, with .device-wheels carried (../shared/device/wheelhouse.sh,
# then bench/device_spacy.sh):   bash bench/gpu_check.sh
# CURVE=0 leaves the convergence run out (the study alone on the card, for its wall time).
# On a CPU, as a test of this script (few updates, slices):   STUDY_CONFIG=tests/gpu-few-updates.yaml bash bench/gpu_check.sh
# Prints the study's wall time, each training's time, the claims page and the curve; everything else
# goes to $OUT (results.tgz: logs, curves, reports and hypotheses; no model files).
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-bench/out/gpu_check}
LIMIT=${STUDY_LIMIT:-450}      # seconds the study may run before it is stopped
DEADLINE=${DEADLINE:-560}      # seconds after the start by which the script packs up, curve or not
begin=$(date +%s)
mkdir -p "$OUT"
source bench/device_env.sh
extra=(); conv=(--factor 2 --every 250)
if [ -n "${STUDY_CONFIG:-}" ]; then extra=(--configfile "$STUDY_CONFIG"); conv=(--factor 2 --every 1 --configfile "$STUDY_CONFIG"); fi
echo "setup: $(( $(date +%s) - begin )) s"

rm -rf results .snakemake bench/out/gpu_convergence
if command -v nvidia-smi > /dev/null; then nvidia-smi dmon -s um -d 5 > "$OUT/dmon.txt" 2>&1 & dmon=$!; fi
curve=
if [ "${CURVE:-1}" = 1 ]; then
    python3 bench/gpu_convergence.py --scale gpu "${conv[@]}" --wait > "$OUT/convergence.txt" 2>&1 &
    curve=$!
fi
start=$(date +%s)
timeout -k 20 "$LIMIT" snakemake --cores all --scheduler greedy --keep-going "${extra[@]}" --config scale=gpu \
    > "$OUT/study.log" 2>&1
rc=$?
echo "central study at gpu: rc=$rc in $(( $(date +%s) - start )) s (limit $LIMIT s)"
snakemake --scheduler greedy "${extra[@]}" --config scale=gpu --report results/report.html > "$OUT/report.log" 2>&1
echo "report: rc=$?"
# Time left before the deadline goes to `tables` at gpu, for the per-training times of the other families.
left=$(( DEADLINE - 30 - $(date +%s) + begin ))
if [ "$left" -gt 60 ]; then
    started=$(date +%s)
    timeout -k 10 "$left" snakemake tables --cores all --scheduler greedy --keep-going "${extra[@]}" --config scale=gpu \
        > "$OUT/tables.log" 2>&1
    echo "tables at gpu: rc=$? after $(( $(date +%s) - started )) s of $left (stopped at the deadline unless rc=0)"
fi
while [ -n "$curve" ] && kill -0 "$curve" 2> /dev/null && [ $(( $(date +%s) - begin )) -lt "$DEADLINE" ]; do sleep 2; done
[ -n "$curve" ] && kill "$curve" 2> /dev/null && echo "convergence run stopped at the deadline"
[ -n "${dmon:-}" ] && kill "$dmon" 2> /dev/null

tar czf "$OUT/results.tgz" --exclude='*.pt' --exclude='results/prepare' --exclude='results/data' \
    --exclude='results/pos' --exclude='results/checkpoints' results bench/out/gpu_convergence 2> /dev/null
grep -E "^(Error|WorkflowError)|Exception|Traceback" "$OUT/study.log" | head -5
python3 bench/study_times.py --results results
cat results/report/central_claims.md 2> /dev/null || echo "no central claims page"
grep -E "^\| (ll|npmt)" results/report/C_table1.md 2> /dev/null
[ -n "$curve" ] && tail -n 15 "$OUT/convergence.txt"
echo "total: $(( $(date +%s) - begin )) s"
