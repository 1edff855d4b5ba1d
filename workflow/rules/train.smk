# The declared output is the final model; checkpoints live outside the outputs (a params value), so
# a killed or failed job keeps them and the next run resumes from the newest one.
rule train:
    input:
        prepared,
    output:
        model="results/train/{experiment}/final.pt",
        curve="results/train/{experiment}/curve.tsv",
    log:
        "results/logs/train/{experiment}.log",
    params:
        data_dir=lambda w: f"results/prepare/{exp(w).dataset}",
        model=lambda w: json.dumps(exp(w).model),
        settings=json.dumps(SCALE["train"]),
        checkpoint_dir="results/checkpoints/{experiment}",
    threads: SCALE["train"].get("threads") or 1
    message:
        "Training {wildcards.experiment} (checkpoints in results/checkpoints/{wildcards.experiment})"
    shell:
        "nmtrepro train --data {params.data_dir} --model {params.model:q} --settings {params.settings:q} "
        "--checkpoint-dir {params.checkpoint_dir} --threads {threads} --out {output.model} --curve {output.curve} 2> {log}"


rule average_checkpoints:
    input:
        "results/train/{experiment}/final.pt",
    output:
        "results/train/{experiment}/averaged.pt",
    log:
        "results/logs/train/{experiment}.average.log",
    params:
        checkpoint_dir="results/checkpoints/{experiment}",
        last=SCALE["average"]["last"],
    shell:
        "nmtrepro average --checkpoint-dir {params.checkpoint_dir} --last {params.last} --out {output} 2> {log}"
