#!/usr/bin/env bash
# Issue 38's GPU check, one script: the steps below in order, each given what is left of SECONDS and
# skipped (saying so) when less is left than it needs, its output kept in $WORK/<step>.log and its tail
# printed. The tools' data, checkpoints and models go to $WORK (default device/out/gpu_fast_check);
# their JSON, TSV, text and log files are packed into $OUT/work.tgz at the end (a device call returns
# at most 8 files). Run from the project's root; on the lent GPU machine carry .device-wheels
# (wheelhouse.sh, device/pack_spacy.sh, device/pack_fairseq.sh), which device/env.sh installs.
#
#   bash device/gpu_fast_check.sh [SECONDS] [STEP...]        # default 560 s, the default steps
#   DEVICE=cpu FAIRSEQ_PYTHON=... bash device/gpu_fast_check.sh 900   # its CPU rehearsal (small sizes, fp32)
#
# The default steps, in the order of what issue 38 still needs measured (a session's 15 device minutes
# hold the first four in one call, the next three in a second):
#   attention SDPA's flash, memory-efficient, cuDNN and math kernels on the Base's attention shapes,
#             masked and causal, 4,096- and 12,288-token micro-batches: whether cuDNN's should serve the
#             CUDA-graph step (bench/gpu_kernels.py attention; ~0.5 min)
#   loss      the label-smoothed loss on 4,096 and 12,288 rows of 37,000 logits, as torch's ops write it
#             and as the trainer computes it since cb63f9c (criterion.SmoothedCrossEntropy), eager and
#             compiled: microseconds and bytes kept for backward (bench/gpu_kernels.py loss; ~1 min)
#   gru       forward + backward of a paper-size BiGRU layer on bucketed 4,096-token micro-batches, packed
#             (reading its lengths on the host, as before) and as `layers.run_bidirectional` runs it since
#             2026-11-28 (over the padding, no host read; its directions in turn, or on two CUDA streams):
#             does leaving out packing cost the GPU time? (bench/gpu_kernels.py gru; ~0.3 min)
#   profile   the paper Base on `fast: graphs` with the scale's 4,096-token micro-batches and with
#             `max_tokens: auto` (the micro-batch sized from the card's memory), and under fairseq
#             (cuDNN's attention off in all three), timed over 40 updates after 80, with the steady rate
#             of those that recorded no new shape; then two updates each under torch's profiler, again
#             until two in a row meet no new shape: the GPU's time by kind of kernel, the rate it bounds,
#             how near the steady rate comes to it, where the host's time goes
#             (bench/fairseq_compare.py --paths graphs,graphs_auto --profile 2; ~6 min): whether the
#             paper scale should take auto
#   big       `nmtrepro train` of the Transformer Big at the paper scale's settings (`fast: graphs`,
#             4,096-token micro-batches), its steady rate (bench/gpu_train.py; ~2.5 min): the Big-size
#             jobs hold 62 % of the plan's FLOPs (bench/plan_flops.py), so its rate moves the plan most
#   families  the same for +Fusing_Diverse (first: its GRU changed on 2026-11-28), BiARN and +PR (parser
#             phrases), each printed as it ends, so a call cut short keeps the first: the plan's rates and the
#             60 %-of-Base target, Base's rate being the profile step's (~2.5 min a family)
#   npmt      paper C's NPMT: its SWAN loss at paper size on IWSLT14-test-length batches, before (the
#             source of d568182, carried in $NPMT_BEFORE, if there) and after (bench/swan_loss.py), the
#             last pass profiled ($WORK/npmt.profile.txt: where NPMT's time goes on a GPU), then
#             `nmtrepro train`'s tok/s and peak, two of its updates profiled (the trainer's own time
#             between the model's passes too: gpu_train_npmt/npmt.steps.profile.txt) (bench/gpu_train.py;
#             ~1.5 min)
#   graphs    eager against `fast: graphs` (the paper scale's path), each update accumulating several
#             micro-batches, which CUDA graphs must not overwrite, for the RNN encoder, the family not
#             yet compared on a GPU (bench/fast_equality.py --fast graphs; ~3 min)
# Run on 2026-11-27 (docs/measurements.md), so not among the defaults:
#   auto      `nmtrepro train` of the paper Base with CUDA graphs and `max_tokens: auto`: the size found,
#             its steady tok/s (bench/gpu_train.py; ~2.5 min); the profile step now times auto beside 4,096
#   fairseq   the paper Base under ours (eager, compiled, CUDA graphs) and fairseq on one GPU, same data
#             shapes: ours/fairseq tok/s and MFU (bench/fairseq_compare.py --setup paper; ~6 min)
#   equality  eager against `fast: compile`, bf16, dropout off, `ci` sizes, five families
#             (bench/fast_equality.py; ~1.5 min a family)
# Run when named:
#   cudnn     the paper Base on `fast: graphs` with and without cuDNN's attention kernels (the train
#             setting cudnn_attention), 4,096-token micro-batches, the same 40 updates after 80: their
#             steady rates side by side (bench/fairseq_compare.py --without-fairseq; ~4 min, the cuDNN
#             graph's compile cold). Run it when the attention step finds cuDNN faster on the masked calls
set -u
budget=${1:-560}
shift $(( $# > 0 ? 1 : 0 ))
steps=${*:-attention loss gru profile big families npmt graphs}
start=$(date +%s)
mkdir -p "${WORK:=device/out/gpu_fast_check}" "${OUT:=$WORK}"
WORK=$(cd "$WORK" && pwd) OUT=$(cd "$OUT" && pwd)
source device/env.sh
NPMT_BEFORE=$(realpath -m "${NPMT_BEFORE:-.device-wheels/npmt-d568182/src}")
DEVICE=${DEVICE:-cuda}
if [ "$DEVICE" = cpu ]; then   # the rehearsal: every command as on the GPU, at sizes a CPU runs in minutes
    fairseq=(--device cpu --scale ci --precision fp32 --pairs 300 --warmup-updates 2 --updates 3 --paths eager,graphs)
    profile=(--device cpu --scale ci --precision fp32 --pairs 300 --warmup-updates 2 --updates 3)
    cudnn=(--device cpu --scale ci --precision fp32 --pairs 300 --warmup-updates 2 --updates 3)
    families=(--device cpu --scale ci --updates 4 --pairs 400 --minutes 1 --variant transformer_base --variant biarn)
    equality=(--device cpu --precision fp32 --updates 3 --pairs 300 --variant transformer_base)
    graphs=(--device cpu --precision fp32 --updates 3 --pairs 300 --variant biarn)
    auto=(--device cpu --scale ci --updates 4 --pairs 400 --minutes 1)
    big=(--device cpu --scale ci --updates 4 --pairs 400 --minutes 1)
    npmt=(--device cpu --scale ci --updates 3 --pairs 200 --minutes 1 --vocab 2000 --max-tokens 300 --profile 1:1)
    swan=(--d-model 32 --vocab 2000 --tokens 300 --batches 2 --repeats 1)
    attention=(--device cpu --tokens 512 --lengths 16 32 --repeats 2)
    loss=(--device cpu --rows 256 --vocab 2000 --repeats 2)
    gru=(--device cpu --tokens 1024 --lengths 16 32 --repeats 3 --d-model 64)
else
    # Each new shape costs a micro-batch's compile or warm-up and a recording: on the benches' synthetic
    # lengths the 4,096-token micro-batches meet ~100 shapes in 200 updates, and from update 80 on 15 to
    # 20 updates in 20 meet none (a simulation of the planner's batches); so 80 untimed updates first.
    fairseq=(--device cuda --warmup-updates 80 --updates 40 --threads 8)
    profile=(--device cuda --warmup-updates 80 --updates 40 --threads 8)
    cudnn=(--device cuda --warmup-updates 80 --updates 40 --threads 8)
    # gpu_train.py logs every update (--log-every 1): its steady rate leaves out only those that met new shapes
    families=(--updates 120 --minutes 3 --timeout 320 --log-every 1 --variant fusing_diverse --variant biarn
              --variant phrase_max_attn_ta_parse)
    equality=(--device cuda --precision bf16)
    graphs=(--device cuda --precision bf16 --variant rnn_encoder)
    auto=(--updates 120 --minutes 3 --timeout 320 --log-every 1)
    big=(--updates 120 --minutes 3 --timeout 320 --log-every 1)
    npmt=(--updates 40 --minutes 1 --timeout 150 --profile 30:2)
    swan=(--device cuda --precision bf16 --d-model 256 --decoder-layers 2 --vocab 22822 --tokens 800 --batches 8)
    attention=(--device cuda)
    loss=(--device cuda)
    gru=(--device cuda)
fi
swan+=(--corpus data/iwslt14/test.de.gz data/iwslt14/test.en.gz --lengths --max-segments 6)  # both: paper C's lengths

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
    timeout -k 10 "$left" "$@" > "$WORK/$name.log" 2>&1
    echo "== $name: rc=$? in $(( $(date +%s) - began )) s"
    grep -v -E "^\+ |Warning|warn\(" "$WORK/$name.log" | tail -n "${TAIL_LINES:-14}"
}

for step in $steps; do
    case $step in
        fairseq)  run fairseq 200 python3 bench/fairseq_compare.py --setup paper --fairseq-python "${FAIRSEQ_PYTHON:-python3}" \
                      --out "$WORK/fairseq_compare" "${fairseq[@]}" ;;
        profile)  TAIL_LINES=24 run profile 340 python3 bench/fairseq_compare.py --setup paper --fairseq-python "${FAIRSEQ_PYTHON:-python3}" \
                      --out "$WORK/fairseq_profile" --paths graphs,graphs_auto --profile 2 "${profile[@]}" ;;
        cudnn)    TAIL_LINES=10 run cudnn 240 python3 bench/fairseq_compare.py --setup paper --without-fairseq \
                      --out "$WORK/cudnn_compare" --paths graphs,graphs_cudnn "${cudnn[@]}" ;;
        attention) TAIL_LINES=30 run attention 30 python3 bench/gpu_kernels.py attention "${attention[@]}" ;;
        loss)     run loss 60 python3 bench/gpu_kernels.py loss "${loss[@]}" ;;
        gru)      run gru 20 python3 bench/gpu_kernels.py gru "${gru[@]}" ;;
        auto)     run auto 100 python3 bench/gpu_train.py --out "$WORK/gpu_train_auto" --variant transformer_base \
                      --setting max_tokens=auto --setting fast=graphs --setting buckets=true "${auto[@]}" ;;
        families) run families 150 python3 bench/gpu_train.py --out "$WORK/gpu_train" "${families[@]}" ;;
        equality) run equality 120 python3 bench/fast_equality.py --out "$WORK/fast_equality" "${equality[@]}" ;;
        graphs)   run graphs 60 python3 bench/fast_equality.py --out "$WORK/fast_equality_graphs" --fast graphs \
                      --max-tokens 500 --update-tokens 1500 "${graphs[@]}" ;;
        big)      run big 100 python3 bench/gpu_train.py --out "$WORK/gpu_train_big" --variant transformer_big "${big[@]}" ;;
        npmt)     if [ -d "$NPMT_BEFORE" ]; then
                      run swan_before 30 env PYTHONPATH="$NPMT_BEFORE:${PYTHONPATH:-}" python3 bench/swan_loss.py "${swan[@]}"
                  else
                      echo "== swan_before: skipped, no $NPMT_BEFORE"
                  fi
                  run swan_after 40 python3 bench/swan_loss.py "${swan[@]}" --profile "$WORK/npmt.profile.txt"
                  run npmt 80 python3 bench/gpu_train.py --out "$WORK/gpu_train_npmt" --variant npmt "${npmt[@]}" ;;
        *)        echo "gpu_fast_check: unknown step $step (graphs, auto, profile, cudnn, attention, loss, gru, npmt, families, big, fairseq, equality)"; exit 2 ;;
    esac
done
if [ "$WORK" != "$OUT" ]; then  # one archive: a device call returns at most 8 files
    (cd "$WORK" && find . -type f \( -name '*.json' -o -name '*.tsv' -o -name '*.log' -o -name '*.txt' \) -size -4M \
        -not -path '*/checkpoints/*' -not -path '*/prepared/*' -not -path '*/data*/*' -not -path '*/fairseq-bin/*' -print0 \
        | tar --null -T - -czf "$OUT/work.tgz") || true
fi
echo "== done in $(( $(date +%s) - start )) s"
