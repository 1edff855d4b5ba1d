rule decode:
    input:
        model=results("train/{experiment}/averaged.pt"),
        src=lambda w: test_files(w, "src.bpe"),
        annotations=lambda w: annotation_files(w, [f"test/{w.split}"]),
    output:
        hyp=results("evaluate/{experiment}/{split}.hyp"),
        tok=results("evaluate/{experiment}/{split}.hyp.tok"),
        stats=results("evaluate/{experiment}/{split}.decode.json"),
    log:
        results("logs/evaluate/{experiment}.{split}.decode.log"),
    priority: 10
    conda:
        CONDA_ENV
    threads: SCALE["train"].get("threads") or 1
    resources:
        gpu=DECODE_GPUS,
    params:
        data_dir=lambda w: results(f"prepare/{exp(w).dataset}"),
        tgt=lambda w: exp(w).tgt_lang,
        search=search_args,
        segments=segment_args,
        annotations=annotation_args,
        on_gpus=on_gpus,  # a slot of a shared GPU (jobs_per_gpu), or a profile's `gpu`: devices of its own
    shell:
        "{params.on_gpus}nmtrepro decode --model {input.model} --prepared {params.data_dir} --src-bpe {input.src} "
        "--tgt-lang {params.tgt} {params.search} {params.segments} "
        "{params.annotations} --threads {threads} --out {output.hyp} --out-tok {output.tok} --stats {output.stats} 2> {log}"


# An experiment that trains as another (`same_as`, training.smk) and decodes with the same options gives
# the same output on the same split, so its files are linked.
ruleorder: shared_decode > decode


rule shared_decode:
    input:
        hyp=of_shared(results("evaluate/{experiment}/{split}.hyp")),
        tok=of_shared(results("evaluate/{experiment}/{split}.hyp.tok")),
        stats=of_shared(results("evaluate/{experiment}/{split}.decode.json")),
    output:
        hyp=results("evaluate/{experiment}/{split}.hyp"),
        tok=results("evaluate/{experiment}/{split}.hyp.tok"),
        stats=results("evaluate/{experiment}/{split}.decode.json"),
    log:
        results("logs/evaluate/{experiment}.{split}.shared.log"),
    wildcard_constraints:
        experiment="|".join(SHARED_DECODES) or "^$",
    conda:
        CONDA_ENV
    params:
        links=link_commands,
    shell:
        "({params.links}) 2> {log}"


rule bleu:
    input:
        hyp=results("evaluate/{experiment}/{split}.hyp"),
        tok=results("evaluate/{experiment}/{split}.hyp.tok"),
        ref=lambda w: reference_files(exp(w).dataset, w.split, "ref"),
        ref_tok=lambda w: reference_files(exp(w).dataset, w.split, "ref.tok"),
    output:
        scores=results("evaluate/{experiment}/{split}.bleu.json"),
        sentences=results("evaluate/{experiment}/{split}.sentences.tsv"),
        statistics=results("evaluate/{experiment}/{split}.statistics.npz"),
    log:
        results("logs/evaluate/{experiment}.{split}.bleu.log"),
    priority: 10
    conda:
        CONDA_ENV
    params:
        refs=lambda w, input: shlex.join(
            a for ref, tok in zip(input.ref, input.ref_tok) for a in ("--ref", ref, "--ref-tok", tok)
        ),
    shell:
        "nmtrepro bleu --hyp {input.hyp} --hyp-tok {input.tok} {params.refs} --out {output.scores} "
        "--out-sentences {output.sentences} --out-statistics {output.statistics} 2> {log}"


# A claim or table cell against its baseline, pooled over the seeds both train (`seeds`).
rule significance:
    input:
        stats=seed_pair_files("statistics.npz", 0),  # each metric's sentence statistics (rule bleu)
        base_stats=seed_pair_files("statistics.npz", 1),
    output:
        results(SIGNIFICANCE),
    log:
        results("logs/analyse/significance.{experiment}.vs.{baseline}.log"),
    wildcard_constraints:
        baseline="|".join(EXPERIMENTS) or "^$",
    conda:
        CONDA_ENV
    params:
        args=significance_args,
        samples=SCALE["bootstrap_samples"],
    shell:
        "nmtrepro significance {params.args} --samples {params.samples} --out {output} 2> {log}"


# The same on the sentences whose source is longer than {length} tokens: a claim on a length bucket
# (`source_longer_than`); where the test set has none, the JSON says so and the claim is not judged.
rule significance_longer:
    input:
        stats=seed_pair_files("statistics.npz", 0),
        base_stats=seed_pair_files("statistics.npz", 1),
        src=lambda w: test_input(w.experiment, "src.bpe"),
    output:
        results(SIGNIFICANCE_LONGER),
    log:
        results("logs/analyse/significance.{experiment}.vs.{baseline}.longer_than_{length}.log"),
    wildcard_constraints:
        baseline="|".join(EXPERIMENTS) or "^$",
        length="[0-9]+",
    conda:
        CONDA_ENV
    params:
        args=significance_args,
        samples=SCALE["bootstrap_samples"],
    shell:
        "nmtrepro significance {params.args} --src-bpe {input.src} --longer-than {wildcards.length} "
        "--samples {params.samples} --out {output} 2> {log}"


# A claim on a quantity an analysis measures, over the seeds both experiments train (claims_inputs.smk
# `claim_significance`), with the BLEU of the same seed pairs, which the claims page holds to its floor.
rule quantity_test:
    input:
        stats=quantity_files(0),
        base_stats=quantity_files(1),
        floor=lambda w: significance_file(w.experiment, w.baseline),
    output:
        results(QUANTITY_TEST),
    log:
        results("logs/analyse/{analysis}.{experiment}.vs.{baseline}.{metric}.log"),
    wildcard_constraints:
        metric="|".join(QUANTITIES),
        baseline="|".join(EXPERIMENTS) or "^$",
    conda:
        CONDA_ENV
    params:
        args=significance_args,  # the same flags: --stats/--base-stats/--seed once a seed pair
        samples=SCALE["bootstrap_samples"],
    shell:
        "nmtrepro quantity-test --quantity {wildcards.metric} {params.args} --floor {input.floor} "
        "--samples {params.samples} --out {output} 2> {log}"
