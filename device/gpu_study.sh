#!/usr/bin/env bash
# A workflow run at scale `gpu` on a lent GPU, timed from an empty results/gpu/ to its end, over one or more
# device calls on one warm machine (a call may run 10 minutes). `start` sets up and starts the run
# detached (setsid: it outlives the call), then watches it; `wait`, a next call issued at once so the
# machine stays warm, watches it on. Once it has ended: the report, each training's time, the pages
# named in PRINT. Nothing is stopped or restarted between calls, so the wall time is one run's.
#
#   bash device/gpu_study.sh start 570    # first call (carry .device-wheels): returns by 570 s
#   bash device/gpu_study.sh wait 200     # next call: returns by 200 s; AFTER="cmd" runs in time left
#   TARGET=paper_C PRINT="results/gpu/report/C_table1.md results/gpu/report/C_claims.md" bash device/gpu_study.sh start 570
#
# On a CPU, as a test of this script (allow_cpu set with it):  STUDY_CONFIG=tests/gpu-few-updates.yaml bash device/gpu_study.sh start 600
# TARGET: the Snakemake targets (default: none, the central study). $OUT gets the logs and results.tgz
# (logs, curves, reports, hypotheses; no model files).
set -u
cd "$(dirname "$0")/.."
mode=$1 until=$2
OUT=${OUT:-device/out/gpu_study}
state=device/out/gpu_study_state    # ignored by git, so it stays on the warm machine between calls
begin=$(date +%s)
mkdir -p "$OUT" "$state"
source device/env.sh
extra=() config=(scale=gpu)
[ -n "${STUDY_CONFIG:-}" ] && extra=(--configfile "$STUDY_CONFIG") config+=(allow_cpu=true)
read -r -a target <<< "${TARGET:-}"

if [ "$mode" = start ]; then
    rm -rf results/gpu .snakemake "$state"/*
    echo "setup: $(( $(date +%s) - begin )) s"
    date +%s > "$state/start"
    if command -v nvidia-smi > /dev/null; then setsid nvidia-smi dmon -s um -d 5 > "$state/dmon.txt" 2>&1 < /dev/null & fi
    setsid bash -c 'snakemake "$@" --cores all --keep-going > '"$state"'/study.log 2>&1
                    echo $? > '"$state"'/rc; date +%s > '"$state"'/end' study "${target[@]}" "${extra[@]}" --config "${config[@]}" \
        < /dev/null > /dev/null 2>&1 &
fi
[ -f "$state/start" ] || { echo "no study started on this machine (a fresh one?): run 'start' first"; exit 1; }

while [ ! -f "$state/end" ] && [ $(( $(date +%s) - begin )) -lt $(( until - 25 )) ]; do sleep 3; done
started=$(cat "$state/start")
cp "$state/study.log" "$state/dmon.txt" "$OUT/" 2> /dev/null
python3 device/study_times.py --results results/gpu
if [ ! -f "$state/end" ]; then
    echo "study still running after $(( $(date +%s) - started )) s: $(grep -E 'steps \(' "$state/study.log" | tail -n 1)"
    exit 0
fi
echo "${TARGET:-central study} at gpu: rc=$(cat "$state/rc") in $(( $(cat "$state/end") - started )) s"
pkill -f "nvidia-smi dmon" 2> /dev/null
grep -E "^(Error|WorkflowError)|Exception|Traceback" "$state/study.log" | head -5
snakemake "${target[@]}" "${extra[@]}" --config "${config[@]}" --report results/gpu/report.html > "$OUT/report.log" 2>&1
echo "report: rc=$?"
for page in ${PRINT:-results/gpu/report/central_claims.md results/gpu/report/B_warm_start.md}; do cat "$page" 2> /dev/null || echo "no $page"; done
# The run's claims as data (reporting/measured.py): copy $OUT/measured/gpu to workflow/measured/gpu and commit it.
nmtrepro export-claims --results results/gpu --out "$OUT/measured/gpu" || echo "export-claims: failed"
tar czf "$OUT/results.tgz" --exclude='*.pt' --exclude='results/gpu/prepare' --exclude='results/gpu/data' \
    --exclude='results/gpu/pos' --exclude='results/gpu/checkpoints' results/gpu 2> /dev/null
left=$(( until - 15 - $(date +%s) + begin ))
if [ -n "${AFTER:-}" ] && [ "$left" -gt 30 ]; then
    echo "AFTER ($left s): $AFTER"
    timeout -k 5 "$left" bash -c "$AFTER"
    echo "AFTER: rc=$?"
fi
echo "total this call: $(( $(date +%s) - begin )) s"
