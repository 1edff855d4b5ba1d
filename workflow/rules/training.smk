# The declared output is the final model; checkpoints live outside the outputs (a params value), so
# a killed or failed job keeps them and the next run resumes from the newest one. A job with several
# GPUs runs one process per GPU under torchrun, which forwards SLURM's SIGTERM/SIGUSR1 to them;
# a retry (pre-empted or out of time) resumes with a longer runtime, up to the scale's max_runtime.
# The shell execs the launcher: where SLURM signals every process of the job step, a bash left
# between Snakemake and torchrun would die at once on SIGTERM, Snakemake would take the job for
# done and end the step, and SLURM would kill the trainers before they saved their checkpoint.
# An experiment that starts from another (`init_from`, paper B) loads that one's averaged model, the
# replicate of its own seed (study/config.py); an experiment whose training is another's links that one's
# models (`SHARED`).
# Resources per experiment: the scale's, with its model size's `by_size` over them; retries are a
# rule's constant in Snakemake, so they stay the scale's.
# The longest trainings (a size's `priority`) and the models others start from train first: on a few
# cores (or slots of a GPU) the scheduler would otherwise fill them with short continuations and leave
# a long baseline (and everything waiting on it) for the end.
# (The training job of a model others start from: paper B's baseline is paper A's training below paper scale.)
STARTED_FROM = {training_of(EXPERIMENTS, e.init) for e in EXPERIMENTS.values() if e.init}


ruleorder: shared_training > train
ruleorder: shared_training > select_checkpoint > average
ruleorder: average_at > average


# Paper D's regime evaluates the kept checkpoint with the best dev BLEU (`average.by_dev_bleu`), not an average.
BY_DEV_BLEU = [name for name, e in EXPERIMENTS.items() if e.average.get("by_dev_bleu") and not e.same_as]


rule train:
    input:
        data=prepared,
        annotations=lambda w: annotation_files(w, ["train", "valid"], ".bin"),
        init=lambda w: [results(f"train/{exp(w).init}/averaged.pt")] if exp(w).init else [],
    output:
        model=results("train/{experiment}/final.pt"),
        curve=results("train/{experiment}/curve.tsv"),
    log:
        results("logs/train/{experiment}.log"),
    priority: train_priority
    retries: SCALE["resources"]["retries"]
    conda:
        CONDA_ENV
    threads: SCALE["train"].get("threads") or 1
    resources:
        gpu=lambda w: exp(w).resources["gpu"],
        cpus_per_gpu=lambda w: exp(w).resources["cpus_per_gpu"],
        mem_mb=lambda w: exp(w).resources["mem_mb"],
        runtime=capped_runtime,
    params:
        data_dir=lambda w: results(f"prepare/{exp(w).dataset}"),
        model=lambda w: json.dumps(exp(w).model),
        settings=lambda w: json.dumps(exp(w).train),
        checkpoint_dir=results("checkpoints/{experiment}"),
        tensorboard=results("tensorboard/{experiment}"),
        launcher=train_launcher,
        annotations=annotation_dirs,
        init=lambda w, input: f"--init {input.init}" if input.init else "",
    message:
        "Training {wildcards.experiment} ({resources.gpu} GPUs, {resources.mem_mb} MB, {resources.runtime} min; "
        "checkpoints in {params.checkpoint_dir})"
    shell:
        "exec {params.launcher}nmtrepro train --prepared {params.data_dir} --model {params.model:q} --settings {params.settings:q} "
        "--checkpoint-dir {params.checkpoint_dir} --tensorboard {params.tensorboard} {params.annotations} {params.init} "
        "--threads {threads} --out {output.model} --curve {output.curve} 2> {log}"


rule average:
    input:
        results("train/{experiment}/final.pt"),
    output:
        results("train/{experiment}/averaged.pt"),
    log:
        results("logs/train/{experiment}.average.log"),
    conda:
        CONDA_ENV
    params:
        checkpoint_dir=results("checkpoints/{experiment}"),
        last=lambda w: exp(w).average["last"],
    shell:
        "nmtrepro average --checkpoint-dir {params.checkpoint_dir} --last {params.last} --final {input} --out {output} 2> {log}"


rule average_at:
    input:
        lambda w: results(f"train/{exp(w).same_as}/final.pt"),
    output:
        results("train/{experiment}/averaged.pt"),
    log:
        results("logs/train/{experiment}.average.log"),
    wildcard_constraints:
        experiment="|".join(STOPPED) or "^$",
    conda:
        CONDA_ENV
    params:
        checkpoint_dir=lambda w: results(f"checkpoints/{exp(w).same_as}"),
        last=lambda w: exp(w).average["last"],
        at=lambda w: exp(w).stops_at,
    shell:
        "nmtrepro average --checkpoint-dir {params.checkpoint_dir} --last {params.last} --final {input} "
        "--at {params.at} --out {output} 2> {log}"


rule select_checkpoint:
    input:
        model=results("train/{experiment}/final.pt"),
        src=lambda w: results(f"prepare/{exp(w).dataset}/test/valid.src.bpe"),
        ref_tok=lambda w: reference_files(exp(w).dataset, "valid", "ref.tok"),  # NIST06: four
        annotations=lambda w: annotation_files(w, ["test/valid"]),
    output:
        model=results("train/{experiment}/averaged.pt"),
        scores=results("train/{experiment}/dev_bleu.json"),
    log:
        results("logs/train/{experiment}.select.log"),
    wildcard_constraints:
        experiment="|".join(BY_DEV_BLEU) or "^$",
    conda:
        CONDA_ENV
    threads: SCALE["train"].get("threads") or 1
    resources:
        gpu=DECODE_GPUS,
    params:
        checkpoint_dir=results("checkpoints/{experiment}"),
        last=lambda w: exp(w).average["last"],
        data_dir=lambda w: results(f"prepare/{exp(w).dataset}"),
        search=search_args,
        annotations=annotation_args,
        on_gpus=on_gpus,  # a slot of a shared GPU or a profile's `gpu`, as for decode
        refs=lambda w, input: shlex.join(a for path in input.ref_tok for a in ("--ref-tok", path)),
    shell:
        "{params.on_gpus}nmtrepro select-checkpoint --checkpoint-dir {params.checkpoint_dir} --last {params.last} "
        "--final {input.model} "
        "--prepared {params.data_dir} --src-bpe {input.src} {params.refs} {params.search} {params.annotations} "
        "--threads {threads} --scores {output.scores} --out {output.model} 2> {log}"


rule shared_training:
    input:
        model=of_shared(results("train/{experiment}/final.pt")),
        curve=of_shared(results("train/{experiment}/curve.tsv")),
        averaged=of_shared(results("train/{experiment}/averaged.pt")),
    output:
        model=results("train/{experiment}/final.pt"),
        curve=results("train/{experiment}/curve.tsv"),
        averaged=results("train/{experiment}/averaged.pt"),
    log:
        results("logs/train/{experiment}.shared.log"),
    wildcard_constraints:
        experiment="|".join(SHARED) or "^$",
    conda:
        CONDA_ENV
    params:
        links=link_commands,
    shell:
        "({params.links}) 2> {log}"


# A model that leaves the run: its weights, vocabularies, BPE codes, languages, decoding settings and
# provenance in one folder, which `nmtrepro translate --model` and `nmtrepro.load` take alone.
rule bundle:
    input:
        model=results("train/{experiment}/averaged.pt"),
        prepared=prepared,
    output:
        directory(results("bundle/{experiment}")),
    log:
        results("logs/bundle/{experiment}.log"),
    conda:
        CONDA_ENV
    params:
        data_dir=lambda w: results(f"prepare/{exp(w).dataset}"),
        max_len=lambda w: dataset_preparation(exp(w).dataset)["max_len"],
        dataset=lambda w: exp(w).dataset,
        scale=config["scale"],
        search=search_args,
        segments=segment_args,
    shell:
        "nmtrepro bundle --model {input.model} --prepared {params.data_dir} --max-len {params.max_len} "
        "{params.search} {params.segments} --experiment {wildcards.experiment} --dataset {params.dataset} "
        "--scale {params.scale} --out {output} 2> {log}"
