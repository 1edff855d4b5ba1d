#!/usr/bin/env bash
# Issue 38's GPU check, one script: the steps below in order, each given what is left of SECONDS and
# skipped (saying so) when less is left than it needs, its output kept in $OUT/<step>.log and its tail
# printed. The tools' data, checkpoints and models go to $WORK (default bench/out/gpu_fast_check);
# their JSON, TSV and log files are copied to $OUT/work at the end. Run from the project's root; on
# the lent GPU machine carry .device-wheels (wheelhouse.sh, device_spacy.sh, device_fairseq.sh), which
# bench/device_env.sh installs.
#
#   bash bench/gpu_fast_check.sh [SECONDS] [STEP...]        # default 560 s, every step
#   DEVICE=cpu FAIRSEQ_PYTHON=... bash bench/gpu_fast_check.sh 900   # its CPU rehearsal (small sizes, fp32)
#
# Steps, in the order of what issue 38 most needs measured (a session's 15 device minutes hold about
# the first three in one call, the rest in a second):
#   fairseq   the paper Base under ours (eager, compiled, CUDA graphs) and fairseq on one GPU, same data
#             shapes: ours/fairseq tok/s (bench/fairseq_compare.py --setup paper; ~5 min, a cold compile)
#   equality  eager against `fast: compile` from the same seed and batches, bf16, dropout off, at the `ci`
#             sizes, five families (bench/fast_equality.py; ~3 min)
#   graphs    eager against `fast: graphs`, each update accumulating several micro-batches, which CUDA
#             graphs must not overwrite: Base, +Fusing_Diverse, +PR with parser phrases
#             (bench/fast_equality.py --fast graphs; ~2 min)
#   auto      `nmtrepro train` of the paper Base with CUDA graphs and `max_tokens: auto` (the micro-batch
#             sized from the card's memory): the size found, tok/s, peak (bench/gpu_train.py; ~2 min)
#   families  `nmtrepro train` of Base, BiARN, +Fusing_Diverse and +PR at paper size on the fast path,
#             12,500-token micro-batches (bench/gpu_train.py; ~2 min a family, each a cold compile)
#   big       the bare step of Big, eager and compiled (bench/gpu_throughput.py --size big; ~3 min)
set -u
budget=${1:-560}
shift $(( $# > 0 ? 1 : 0 ))
steps=${*:-fairseq equality graphs auto families big}
start=$(date +%s)
mkdir -p "${WORK:=bench/out/gpu_fast_check}" "${OUT:=$WORK}"
WORK=$(cd "$WORK" && pwd) OUT=$(cd "$OUT" && pwd)
source bench/device_env.sh
DEVICE=${DEVICE:-cuda}
if [ "$DEVICE" = cpu ]; then   # the rehearsal: every command as on the GPU, at sizes a CPU runs in minutes
    fairseq=(--device cpu --scale ci --precision fp32 --pairs 300 --warmup-updates 2 --updates 3 --paths eager,graphs)
    families=(--device cpu --scale ci --updates 4 --pairs 400 --minutes 1 --variant transformer_base --variant biarn)
    equality=(--device cpu --precision fp32 --updates 3 --pairs 300 --variant transformer_base)
    graphs=(--device cpu --precision fp32 --updates 3 --pairs 300 --variant transformer_base)
    auto=(--device cpu --scale ci --updates 4 --pairs 400 --minutes 1)
    big=(--device cpu --scale ci --steps 1 --warmup-steps 0 --vocab 500 --update-tokens 1000 --precision fp32 --paths eager)
else
    fairseq=(--device cuda --warmup-updates 10 --updates 40 --threads 8)
    families=(--max-tokens 12500 --updates 60 --minutes 4 --timeout 300 --setting fast=compile --variant transformer_base
              --variant biarn --variant fusing_diverse --variant phrase_max_attn_ta)
    equality=(--device cuda --precision bf16)
    graphs=(--device cuda --precision bf16 --variant transformer_base --variant fusing_diverse
            --variant phrase_max_attn_ta_parse)
    auto=(--updates 60 --minutes 3 --timeout 240)
    big=(--steps 8 --max-tokens 12500 --paths eager,compile)
fi

run() {  # run STEP NEEDED_SECONDS COMMAND...
    local name=$1 need=$2 left began
    shift 2
    left=$(( budget - ($(date +%s) - start) ))
    if (( left < need )); then
        echo "== $name: skipped, $left s left of $budget (it needs about $need)"
        return
    fi
    echo "== $name: $* ($left s left)"
    began=$(date +%s)
    timeout -k 10 "$left" "$@" > "$OUT/$name.log" 2>&1
    echo "== $name: rc=$? in $(( $(date +%s) - began )) s"
    grep -v -E "^\+ |Warning|warn\(" "$OUT/$name.log" | tail -n 14
}

for step in $steps; do
    case $step in
        fairseq)  run fairseq 200 python3 bench/fairseq_compare.py --setup paper --fairseq-python "${FAIRSEQ_PYTHON:-python3}" \
                      --out "$WORK/fairseq_compare" "${fairseq[@]}" ;;
        auto)     run auto 100 python3 bench/gpu_train.py --out "$WORK/gpu_train_auto" --variant transformer_base \
                      --setting max_tokens=auto --setting fast=graphs --setting buckets=true "${auto[@]}" ;;
        families) run families 150 python3 bench/gpu_train.py --out "$WORK/gpu_train" "${families[@]}" ;;
        equality) run equality 120 python3 bench/fast_equality.py --out "$WORK/fast_equality" "${equality[@]}" ;;
        graphs)   run graphs 60 python3 bench/fast_equality.py --out "$WORK/fast_equality_graphs" --fast graphs \
                      --max-tokens 500 --update-tokens 1500 "${graphs[@]}" ;;
        big)      run big 120 python3 bench/gpu_throughput.py --size big "${big[@]}" ;;
        *)        echo "gpu_fast_check: unknown step $step (fairseq, equality, graphs, auto, families, big)"; exit 2 ;;
    esac
done
if [ "$WORK" != "$OUT" ]; then
    mkdir -p "$OUT/work"
    (cd "$WORK" && find . -type f \( -name '*.json' -o -name '*.tsv' -o -name '*.log' \) -size -4M -print0 \
        | xargs -0 -r cp --parents -t "$OUT/work" 2> /dev/null) || true
fi
echo "== done in $(( $(date +%s) - start )) s"
