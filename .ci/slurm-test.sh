#!/usr/bin/env bash
# CI: run the ci-scale workflow on a real one-node SLURM cluster on localhost, through
# profiles/slurm (with the test-only settings below), one of its trainings on 4 (fake) GPUs through
# torchrun, and check that a failing job is reported.
#
# Needs root and Debian (apt-get), no systemd. Every step is bounded with `timeout -k`; the daemons
# are stopped by PID on exit. Facts it relies on: ../shared/docs/slurm-on-one-machine.md.
#   - no slurmdbd here, so the plugin's default status query (sacct) would hang the workflow:
#     the test profile uses `slurm-status-command: squeue` with MinJobAge 300 s;
#   - the fake GPUs are 4 character devices that are /dev/null (gres.conf File=...nvidia[0-3]); the
#     node declares 4 CPUs on 2 cores (config_overrides), so a 4-GPU training fits with 1 CPU a GPU.
#     Its 4 ranks run on the CPU (gloo): what is tested is the request and the torchrun launch.
# Run from the repository root inside the environment that has nmtrepro installed.
set -euo pipefail
cd "$(dirname "$0")/.."
REPO=$PWD
SLURM_PLUGIN=snakemake-executor-plugin-slurm==2.8.0
started=$(date +%s)
say() { echo "[slurm-test $(( $(date +%s) - started ))s] $*"; }

WORK=$(mktemp -d /tmp/nmtrepro-slurm.XXXXXX)
PIDS=()
stop_daemons() {
    # Newest first: slurmd, slurmctld, munged. By PID only; then wait for each (bounded).
    for (( i=${#PIDS[@]}-1; i>=0; i-- )); do kill "${PIDS[i]}" 2>/dev/null || true; done
    for pid in "${PIDS[@]}"; do
        for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
        kill -9 "$pid" 2>/dev/null || true
    done
}
cleanup() {
    stop_daemons
    for name in slurm.conf gres.conf; do
        [ "$(readlink "/etc/slurm/$name" 2>/dev/null)" = "$WORK/etc/$name" ] && rm -f "/etc/slurm/$name"
    done
    return 0
}
trap cleanup EXIT
trap "exit 143" TERM INT  # so that a timeout still stops the daemons

say "installing SLURM and munge"
if ! command -v slurmctld >/dev/null || ! command -v munged >/dev/null; then
    timeout -k 10 300 apt-get update -q >"$WORK/apt.log" 2>&1
    DEBIAN_FRONTEND=noninteractive timeout -k 10 600 apt-get install -y --no-install-recommends \
        slurmctld slurmd slurm-client munge >>"$WORK/apt.log" 2>&1
fi
python -c "import snakemake_executor_plugin_slurm" 2>/dev/null \
    || timeout -k 10 300 pip install -q "$SLURM_PLUGIN"

say "configuring a one-node cluster in $WORK"
mkdir -p "$WORK/etc" "$WORK/state" "$WORK/spool" "$WORK/log"
cat >"$WORK/etc/slurm.conf" <<EOF
ClusterName=nmtrepro-ci
SlurmctldHost=localhost
SlurmUser=root
AuthType=auth/munge
CredType=cred/munge
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
MinJobAge=300
ReturnToService=2
SlurmdParameters=config_overrides
GresTypes=gpu
MailProg=/bin/true
StateSaveLocation=$WORK/state
SlurmdSpoolDir=$WORK/spool
SlurmctldPidFile=$WORK/state/slurmctld.pid
SlurmdPidFile=$WORK/state/slurmd.pid
SlurmctldLogFile=$WORK/log/slurmctld.log
SlurmdLogFile=$WORK/log/slurmd.log
NodeName=localhost NodeAddr=127.0.0.1 CPUs=4 RealMemory=8000 Gres=gpu:4 State=UNKNOWN
PartitionName=debug Nodes=localhost Default=YES MaxTime=INFINITE State=UP
EOF
mkdir -p "$WORK/dev"
for i in 0 1 2 3; do mknod "$WORK/dev/nvidia$i" c 1 3; done  # each one a /dev/null
echo "NodeName=localhost Name=gpu File=$WORK/dev/nvidia[0-3]" >"$WORK/etc/gres.conf"
export SLURM_CONF=$WORK/etc/slurm.conf
# srun inside a job step ignores SLURM_CONF and looks in /etc/slurm: link ours there for the test.
mkdir -p /etc/slurm
for name in slurm.conf gres.conf; do
    if [ -e "/etc/slurm/$name" ] && [ ! -L "/etc/slurm/$name" ]; then
        say "/etc/slurm/$name exists: refusing to run a test cluster over a real configuration"; exit 1
    fi
    ln -sfn "$WORK/etc/$name" "/etc/slurm/$name"
done

say "starting munged, slurmctld, slurmd"
mkdir -p /run/munge && chown munge:munge /run/munge && chmod 0755 /run/munge
# setpriv execs munged, so $! is munged itself (runuser would leave it running behind a parent).
setpriv --reuid=munge --regid=munge --init-groups munged --foreground >"$WORK/log/munged.out" 2>&1 &
PIDS+=($!)
for _ in $(seq 50); do [ -S /run/munge/munge.socket.2 ] && break; sleep 0.1; done
slurmctld -D >"$WORK/log/slurmctld.out" 2>&1 &
PIDS+=($!)
slurmd -D -N localhost >"$WORK/log/slurmd.out" 2>&1 &
PIDS+=($!)
if ! timeout -k 5 60 bash -c 'until sinfo -h -N -o %T 2>/dev/null | grep -qx idle; do sleep 0.5; done'; then
    say "the node never became idle"; sinfo -N -l || true; tail -n 20 "$WORK"/log/*; exit 1
fi
say "node idle: $(sinfo -h -N -o '%N %T %G')"

say "writing the test profile from profiles/slurm"
python - "$REPO/profiles/slurm/config.yaml" "$WORK/profile/config.yaml" <<'EOF'
import sys
from pathlib import Path

import yaml

profile = yaml.safe_load(Path(sys.argv[1]).read_text())
assert profile["executor"] == "slurm" and "decode" in profile["set-resources"]
profile.update({
    # No slurmdbd here: sacct would fail and the workflow hang; squeue needs MinJobAge >= 3 x init wait.
    "slurm-status-command": "squeue",
    "slurm-init-seconds-before-status-checks": 2,
    "seconds-between-status-checks": 2,
    "latency-wait": 5,
    "jobs": 2,
    "retries": 0,
    "default-resources": {"mem_mb": 1000, "runtime": 10},
})
small = {"gpu": 1, "cpus_per_gpu": 1, "mem_mb": 2000, "runtime": 10}  # one fake GPU, one core
train = profile["set-resources"]["train"]
assert train["nodes"] == 1 and "--signal=TERM@" in train["slurm_extra"], train
profile["set-resources"] = {rule: ({**small} if "gpu" in res else {"mem_mb": 2000})
                            for rule, res in profile["set-resources"].items()}
# Training keeps the profile's nodes and signal and config's capped runtime (below). Config asks for
# no GPU at ci scale: here base_en_de gets 4 (torchrun), every other training one.
profile["set-resources"]["train"] = {**train, "gpu": "4 if wildcards.experiment == 'base_en_de' else 1",
                                     "cpus_per_gpu": 1, "mem_mb": 4000}
Path(sys.argv[2]).parent.mkdir(parents=True)
Path(sys.argv[2]).write_text(yaml.safe_dump(profile, sort_keys=False))
EOF

# One experiment up to its BLEU: 7 jobs (fetch, prepare, its test set, train, average, decode, bleu), each ~15-20 s of submission
# and polling. The ci scale's training runtime is set past its cap (30 > max_runtime 20 minutes).
WF=$WORK/wf
mkdir -p "$WF"
cp Snakefile config.yaml "$WF"/
cp -r workflow config profiles envs "$WF"/  # envs: every rule names envs/nmtrepro.yaml
ln -s "$REPO/data" "$WF/data"
python - "$WF/config.yaml" <<'EOF'
import sys
from pathlib import Path

import yaml

config = yaml.safe_load(Path(sys.argv[1]).read_text())
config["scales"]["ci"]["resources"].update(runtime=30, max_runtime=20)
Path(sys.argv[1]).write_text(yaml.safe_dump(config, sort_keys=False))
EOF
TARGET=results/ci/evaluate/base_en_de/test_2016_flickr.bleu.json
say "running the ci workflow through SLURM ($TARGET)"
# --verbose: the plugin logs each sbatch call, checked below.
if ! (cd "$WF" && timeout -k 10 900 python -m snakemake --profile "$WORK/profile" "$TARGET" \
        --verbose --config scale=ci >"$WORK/workflow.log" 2>&1); then
    say "the workflow failed"; tail -60 "$WORK/workflow.log"; tail -n 20 "$WORK"/log/slurm*.log; exit 1
fi
python - "$WF/$TARGET" <<'EOF'
import json, sys
bleu = json.load(open(sys.argv[1]))
assert bleu["n"] == 300, bleu
print("BLEU", bleu["sacrebleu"]["score"], "on", bleu["n"], "sentences")
EOF
jobs=$(grep -c "Job .* has been submitted with SLURM jobid" "$WORK/workflow.log" || true)
[ "$jobs" -ge 7 ] || { say "expected >= 7 SLURM submissions, saw $jobs"; tail -40 "$WORK/workflow.log"; exit 1; }
gpu_jobs=$(scontrol -o show job | grep -c "gres[:/]gpu" || true)  # trainings and decode ask for fake GPUs
[ "$gpu_jobs" -ge 2 ] || { say "expected the train and decode jobs to get a GPU, saw $gpu_jobs"; exit 1; }
say "workflow completed: $jobs jobs through SLURM, $gpu_jobs with a GPU"

say "the 4-GPU training: its request, its allocation and torchrun's 4 processes"
call=$(grep "sbatch call:.*rule_train_wildcards_base_en_de " "$WORK/workflow.log" || true)
for flag in "--gpus=4" "--nodes=1" "--signal=TERM@300" "-t 20 "; do
    [[ "$call" == *"$flag"* ]] || { say "the training's sbatch call lacks $flag: $call"; exit 1; }
done
alloc=$(scontrol -o show job | grep "rule_train_wildcards_base_en_de " || true)
for field in "NumNodes=1 " "TimeLimit=00:20:00" "TresPerJob=gres:gpu:4"; do
    [[ "$alloc" == *"$field"* ]] || { say "the training's job lacks $field: $alloc"; exit 1; }
done
grep -q "with-gpus 4 -- torchrun --standalone --nproc-per-node 4 " "$WORK/workflow.log" \
    || { say "the training did not run under torchrun with 4 processes"; exit 1; }
python - "$WF/results/ci/checkpoints/base_en_de" <<'EOF'
import sys
from pathlib import Path

import torch

# Every rank's RNG state is gathered into the checkpoint: 4 of them, one per torchrun process.
checkpoints = sorted(Path(sys.argv[1]).glob("*.pt"))
assert checkpoints, f"no checkpoint in {sys.argv[1]}"
for path in checkpoints:
    ranks = len(torch.load(path, map_location="cpu", weights_only=False)["rank_rng"])
    assert ranks == 4, f"{path}: {ranks} ranks"
print(len(checkpoints), "checkpoints written by 4 ranks")
EOF

say "a failing job must be reported as failed"
FAIL=$WORK/fail
mkdir -p "$FAIL"
cat >"$FAIL/Snakefile" <<'EOF'
rule fails:
    output:
        "never.txt",
    shell:
        "echo 'failing on purpose' >&2; exit 3"
EOF
set +e
(cd "$FAIL" && timeout -k 10 300 python -m snakemake --profile "$WORK/profile" >"$WORK/fail.log" 2>&1)
rc=$?
set -e
if [ "$rc" -eq 0 ] || [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
    say "the failing workflow exited $rc, not a failure report"; tail -40 "$WORK/fail.log"; exit 1
fi
grep -q "Error in rule fails" "$WORK/fail.log" || { say "no 'Error in rule fails' in the log"; tail -40 "$WORK/fail.log"; exit 1; }
grep -qi "slurm" "$WORK/fail.log" || { say "the failure does not name the SLURM job"; exit 1; }
say "failing job reported (exit $rc)"

cleanup
trap - EXIT
rm -rf "$WORK"  # kept when the test fails, for its logs
say "passed in $(( $(date +%s) - started )) s"
