# Analyses beyond corpus BLEU (config `analyses`, and significance for `tables`): per-experiment
# measurements under results/analyse/, rendered as paper figures and tables under results/report/.
ANALYSES = config.get("analyses", {})


def analyses_of(kind):
    return "|".join(name for name, spec in ANALYSES.items() if spec["kind"] == kind) or "^$"


def evaluated(experiment, ext):
    return f"results/evaluate/{experiment}/{EXPERIMENTS[experiment].test}.{ext}"


def test_input(experiment, kind):
    e = EXPERIMENTS[experiment]
    return f"results/prepare/{e.dataset}/test/{e.test}.{kind}"


def baseline_of(system):
    return system.get("baseline", system["experiment"])


def paper_numbers(wildcards):
    path = ANALYSES[wildcards.analysis].get("paper_numbers")
    return {"numbers": path} if path else {}


def paper_numbers_arg(wildcards, input):
    return f"--paper-numbers {input.numbers}" if "numbers" in input.keys() else ""


def note_arg(wildcards):
    note = ANALYSES[wildcards.analysis]["note"]
    return f"--note {shlex.quote(note)}" if note else ""


def system_inputs(pattern):
    """Input function: one named input per system of the analysis, from `pattern(analysis, system)`."""
    def inputs(wildcards):
        systems = ANALYSES[wildcards.analysis]["systems"]
        return {**{f"sys{i}": pattern(wildcards.analysis, s) for i, s in enumerate(systems)},
                **paper_numbers(wildcards)}
    return inputs


def system_args(render):
    """Params function: `--system LABEL=...` per system, `render(system, input, i)` giving what follows '='."""
    def args(wildcards, input):
        systems = ANALYSES[wildcards.analysis]["systems"]
        return shlex.join(a for i, s in enumerate(systems) for a in ("--system", f"{s['label']}={render(s, input, i)}"))
    return args


rule significance:
    input:
        hyp=lambda w: evaluated(w.experiment, "hyp"),
        hyp_tok=lambda w: evaluated(w.experiment, "hyp.tok"),
        base_hyp=lambda w: evaluated(w.baseline, "hyp"),
        base_hyp_tok=lambda w: evaluated(w.baseline, "hyp.tok"),
        ref=lambda w: test_input(w.experiment, "ref"),
        ref_tok=lambda w: test_input(w.experiment, "ref.tok"),
    output:
        "results/analyse/significance/{experiment}.vs.{baseline}.json",
    log:
        "results/logs/analyse/significance.{experiment}.vs.{baseline}.log",
    wildcard_constraints:
        baseline="|".join(EXPERIMENTS) or "^$",
    shell:
        "nmtrepro significance --hyp {input.hyp} --hyp-tok {input.hyp_tok} --base-hyp {input.base_hyp} "
        "--base-hyp-tok {input.base_hyp_tok} --ref {input.ref} --ref-tok {input.ref_tok} --out {output} 2> {log}"


rule length_buckets:
    input:
        src=lambda w: test_input(w.experiment, "src.bpe"),
        hyp_tok=lambda w: evaluated(w.experiment, "hyp.tok"),
        base_hyp_tok=lambda w: evaluated(w.baseline, "hyp.tok"),
        ref_tok=lambda w: test_input(w.experiment, "ref.tok"),
    output:
        "results/analyse/{analysis}/{experiment}.vs.{baseline}.buckets.json",
    log:
        "results/logs/analyse/{analysis}.{experiment}.vs.{baseline}.log",
    wildcard_constraints:
        analysis=analyses_of("length_buckets"),
        baseline="|".join(EXPERIMENTS) or "^$",
    params:
        edges=lambda w: " ".join(map(str, ANALYSES[w.analysis]["edges"])),
    shell:
        "nmtrepro length-buckets --src-bpe {input.src} --hyp-tok {input.hyp_tok} --base-hyp-tok {input.base_hyp_tok} "
        "--ref-tok {input.ref_tok} --edges {params.edges} --out {output} 2> {log}"


rule speed:
    input:
        model="results/train/{experiment}/averaged.pt",
        curve="results/train/{experiment}/curve.tsv",
        stats=lambda w: evaluated(w.experiment, "decode.json"),
        src=lambda w: test_input(w.experiment, "src.bpe"),
    output:
        "results/analyse/speed/{experiment}.json",
    log:
        "results/logs/analyse/speed.{experiment}.log",
    shell:
        "nmtrepro speed --model {input.model} --curve {input.curve} --decode-stats {input.stats} "
        "--src-bpe {input.src} --out {output} 2> {log}"


def head_groups(wildcards):
    for system in ANALYSES[wildcards.analysis]["systems"]:
        if system["experiment"] == wildcards.experiment and "groups" in system:
            return "--groups " + shlex.join(system["groups"])
    return ""


rule head_similarity:
    input:
        model="results/train/{experiment}/averaged.pt",
        src=lambda w: test_input(w.experiment, "src.bpe"),
        spans=lambda w: spans_files(w, [f"test/{exp(w).test}"]),
    output:
        "results/analyse/{analysis}/{experiment}.heads.json",
    log:
        "results/logs/analyse/{analysis}.{experiment}.heads.log",
    wildcard_constraints:
        analysis=analyses_of("head_similarity"),
    params:
        data_dir=lambda w: f"results/prepare/{exp(w).dataset}",
        groups=head_groups,
        spans=lambda w, input: f"--spans {input.spans}" if input.spans else "",
    threads: SCALE["train"].get("threads") or 1
    shell:
        "nmtrepro head-similarity --model {input.model} --data {params.data_dir} --input {input.src} "
        "{params.spans} {params.groups} --threads {threads} --out {output} 2> {log}"


def figure_outputs(category, caption):
    return {
        "png": report("results/report/{analysis}.png", caption=caption, category=category,
                      labels={"analysis": "{analysis}", "kind": "figure"}),
        "svg": "results/report/{analysis}.svg",
        "md": "results/report/{analysis}.md",
        "html": report("results/report/{analysis}.html", caption=caption, category=category,
                       labels={"analysis": "{analysis}", "kind": "table"}),
        "tex": "results/report/{analysis}.tex",
    }


def table_outputs(category, caption):
    outputs = figure_outputs(category, caption)
    return {key: outputs[key] for key in ("md", "html", "tex")}


rule bucket_figure:
    input:
        unpack(system_inputs(lambda a, s: f"results/analyse/{a}/{s['experiment']}.vs.{baseline_of(s)}.buckets.json")),
    output:
        **figure_outputs("Length buckets", "../report/buckets.rst"),
    log:
        "results/logs/report/{analysis}.log",
    wildcard_constraints:
        analysis=analyses_of("length_buckets"),
    params:
        systems=system_args(lambda s, input, i: input[f"sys{i}"]),
        numbers=paper_numbers_arg,
        title=lambda w: ANALYSES[w.analysis]["title"],
        note=note_arg,
    shell:
        "nmtrepro plot-buckets {params.systems} {params.numbers} --title {params.title:q} {params.note} "
        "--out-png {output.png} --out-svg {output.svg} --out-md {output.md} --out-html {output.html} "
        "--out-tex {output.tex} 2> {log}"


rule ngram_figure:
    input:
        unpack(system_inputs(lambda a, s: [bleu_file(s["experiment"]), bleu_file(baseline_of(s))])),
    output:
        **figure_outputs("n-gram precision", "../report/ngrams.rst"),
    log:
        "results/logs/report/{analysis}.log",
    wildcard_constraints:
        analysis=analyses_of("ngram_precision"),
    params:
        systems=system_args(lambda s, input, i: "=".join(input[f"sys{i}"])),
        numbers=paper_numbers_arg,
        metric=lambda w: ANALYSES[w.analysis]["metric"],
        title=lambda w: ANALYSES[w.analysis]["title"],
        note=note_arg,
    shell:
        "nmtrepro plot-ngrams {params.systems} {params.numbers} --metric {params.metric} "
        "--title {params.title:q} {params.note} --out-png {output.png} --out-svg {output.svg} "
        "--out-md {output.md} --out-html {output.html} --out-tex {output.tex} 2> {log}"


def paper_size_args(wildcards):
    """`--paper-size LABEL=SPEC` per system: its model at another scale's size with a given vocabulary."""
    spec = ANALYSES[wildcards.analysis].get("paper_size")
    if not spec:
        return ""
    at_scale = {**config, "scale": spec["scale"]}
    extra = {key: spec[key] for key in ("src_vocab", "tgt_vocab", "output_bias")}
    args = []
    for s in ANALYSES[wildcards.analysis]["systems"]:
        variant = config["experiments"][s["experiment"]]["model"]
        options = model_options(at_scale, variant, f"analyses.{wildcards.analysis}.paper_size")
        args += ["--paper-size", f"{s['label']}={json.dumps({**options, **extra})}"]
    return shlex.join(args)


rule speed_table:
    input:
        unpack(system_inputs(lambda a, s: [f"results/analyse/speed/{s['experiment']}.json",
                                           f"results/analyse/speed/{baseline_of(s)}.json"])),
    output:
        **table_outputs("Speed and size", "../report/speed.rst"),
    log:
        "results/logs/report/{analysis}.log",
    wildcard_constraints:
        analysis=analyses_of("speed_size"),
    params:
        systems=system_args(lambda s, input, i: "=".join(input[f"sys{i}"])),
        numbers=paper_numbers_arg,
        paper_size=paper_size_args,
        title=lambda w: ANALYSES[w.analysis]["title"],
        note=note_arg,
    shell:
        "nmtrepro speed-table {params.systems} {params.numbers} {params.paper_size} --title {params.title:q} {params.note} "
        "--out-md {output.md} --out-html {output.html} --out-tex {output.tex} 2> {log}"


rule head_table:
    input:
        unpack(system_inputs(lambda a, s: f"results/analyse/{a}/{s['experiment']}.heads.json")),
    output:
        **table_outputs("Head similarity", "../report/heads.rst"),
    log:
        "results/logs/report/{analysis}.log",
    wildcard_constraints:
        analysis=analyses_of("head_similarity"),
    params:
        systems=system_args(lambda s, input, i: input[f"sys{i}"]),
        numbers=paper_numbers_arg,
        title=lambda w: ANALYSES[w.analysis]["title"],
        note=note_arg,
    shell:
        "nmtrepro head-table {params.systems} {params.numbers} --title {params.title:q} {params.note} "
        "--out-md {output.md} --out-html {output.html} --out-tex {output.tex} 2> {log}"


# ---- probing (SentEval protocol; paper B Table 5, paper D Table VII) --------------------------------
PROBING = config.get("probing")
PROBING_TASKS = [
    "sentence_length", "word_content", "tree_depth", "top_constituents", "bigram_shift",
    "past_present", "subj_number", "obj_number", "odd_man_out", "coordination_inversion",
]
if PROBING:
    for _name in PROBING["experiments"]:
        if _name not in EXPERIMENTS:
            raise WorkflowError(f"config: probing.experiments: unknown experiment {_name!r}")
        if EXPERIMENTS[_name].src_lang != "en":
            raise WorkflowError(f"config: probing.experiments: {_name!r} translates from "
                                f"{EXPERIMENTS[_name].src_lang!r}; the probing tasks are English")


def probing_task_files(wildcards=None):
    folder = PROBING["senteval_dir"] or "results/probing/tasks"
    return [f"{folder}/{task}.txt" for task in PROBING_TASKS]


def probing_classifier_args(wildcards):
    opts = PROBING.get("classifier", {}).get(config["scale"], {})
    args = []
    for key in ("nhid", "dropout", "weight_decay"):
        if key in opts:
            args += [f"--{key.replace('_', '-')}"] + [str(v) for v in opts[key]]
    for key in ("max_epochs", "max_examples"):
        if key in opts:
            args += [f"--{key.replace('_', '-')}", str(opts[key])]
    return shlex.join(args)


rule probing_data:
    input:
        lambda w: PROBING["treebank"],
    output:
        [f"results/probing/tasks/{task}.txt" for task in PROBING_TASKS],
    log:
        "results/logs/probing/tasks.log",
    params:
        out_dir=lambda w, output: subpath(output[0], parent=True),
    shell:
        "nmtrepro probing-data --treebank {input} --out-dir {params.out_dir} 2> {log}"


rule probe:
    input:
        model="results/train/{experiment}/averaged.pt",
        prepared=prepared,
        tasks=probing_task_files,
    output:
        "results/probing/{experiment}.json",
    log:
        "results/logs/probing/{experiment}.log",
    params:
        prepared=lambda w: f"results/prepare/{exp(w).dataset}",
        lang=lambda w: exp(w).src_lang,
        classifier=probing_classifier_args,
        parser=parser_args,
    threads: 2
    shell:
        "OMP_NUM_THREADS={threads} nmtrepro probe --model {input.model} --prepared {params.prepared} "
        "--lang {params.lang} --tasks {input.tasks} {params.classifier} {params.parser} --output {output} 2> {log}"


rule probing_table:
    input:
        results=lambda w: expand("results/probing/{experiment}.json", experiment=PROBING["experiments"]),
        papers=lambda w: PROBING["paper_tables"],
    output:
        md="results/report/probing.md",
        html=report("results/report/probing.html", caption="../report/probing.rst", category="Analyses"),
    log:
        "results/logs/report/probing.log",
    params:
        results=lambda w, input: shlex.join(f"{e}={p}" for e, p in zip(PROBING["experiments"], input.results)),
        papers=lambda w, input: shlex.join(input.papers),
    shell:
        "nmtrepro probing-table --result {params.results} --paper {params.papers} "
        "--output-md {output.md} --output-html {output.html} 2> {log}"


def probing_outputs():
    return ["results/report/probing.md", "results/report/probing.html"] if PROBING else []
# ---- end probing -------------------------------------------------------------------------------------


# ---- contrastive scoring (LingEval97 protocol) -- nmtrepro.analyses.contrastive, nmtrepro.analyses.agreement ---------------
# Config `scales.<scale>.contrastive`: the sets the systems of `analyses` of kind `agreement` force-score
# (none at a scale without it). Only En->De models can be scored (English sources, German targets).
CONTRASTIVE = SCALE.get("contrastive")
AGREEMENT = [name for name, spec in ANALYSES.items() if spec["kind"] == "agreement"] if CONTRASTIVE else []
CONTRASTIVE_EXPERIMENTS = sorted({s["experiment"] for name in AGREEMENT for s in ANALYSES[name]["systems"]})
for _name in CONTRASTIVE_EXPERIMENTS:
    if (EXPERIMENTS[_name].src_lang, EXPERIMENTS[_name].tgt_lang) != ("en", "de"):
        raise WorkflowError(f"config: analyses: agreement system {_name!r} is not En->De; LingEval97 pairs are")


def contrastive_outputs():
    return expand("results/report/{analysis}.{ext}", analysis=AGREEMENT, ext=["png", "svg"])


def contrastive_test_files(wildcards):
    if "download" in CONTRASTIVE:
        return [f"results/downloads/{CONTRASTIVE['download']}.json"]
    if "lingeval97" in CONTRASTIVE:
        return [CONTRASTIVE["lingeval97"]]
    return expand("{dir}/{set}/{file}", dir=CONTRASTIVE["distil_dir"], set=CONTRASTIVE["sets"],
                  file=["src.en.gz", "tgt.correct.de.gz", "tgt.incorrect.de.gz"])


def contrastive_args(wildcards):
    c = CONTRASTIVE
    if "download" in c:
        args = ["--lingeval97-download", f"results/downloads/{c['download']}.json"]
    elif "lingeval97" in c:
        args = ["--lingeval97", c["lingeval97"]]
    else:
        args = [a for s in c["sets"] for a in ("--distil-set", f"{c['distil_dir']}/{s}")] + ["--parser", c["parser"]]
    if "max_per_set" in c:
        args += ["--max-per-set", str(c["max_per_set"])]
    return shlex.join(args + ["--max-tokens", str(c["max_tokens"])])


rule contrastive_scores:
    input:
        prepared,
        contrastive_test_files,
        model="results/train/{experiment}/averaged.pt",
    output:
        "results/analyse/{experiment}/contrastive.json",
    log:
        "results/logs/analyse/{experiment}.contrastive.log",
    params:
        data_dir=lambda w: f"results/prepare/{exp(w).dataset}",
        args=contrastive_args,
        parser=parser_args,
    threads: SCALE["train"].get("threads") or 1
    message:
        "Contrastive scoring (LingEval97 protocol): {wildcards.experiment}"
    shell:
        "nmtrepro contrastive --model {input.model} --data {params.data_dir} {params.args} {params.parser} "
        "--threads {threads} --out {output} 2> {log}"


rule agreement_figure:
    input:
        unpack(system_inputs(lambda a, s: f"results/analyse/{s['experiment']}/contrastive.json")),
    output:
        png=report("results/report/{analysis}.png", caption="../report/agreement.rst", category="Analyses",
                   labels={"analysis": "{analysis}", "kind": "figure"}),
        svg="results/report/{analysis}.svg",
    log:
        "results/logs/report/{analysis}.log",
    wildcard_constraints:
        analysis="|".join(AGREEMENT) or "^$",
    params:
        results=system_args(lambda s, input, i: input[f"sys{i}"]),
        title=lambda w: ANALYSES[w.analysis]["title"],
    shell:
        "nmtrepro plot-agreement {params.results} --title {params.title:q} --out-png {output.png} "
        "--out-svg {output.svg} 2> {log}"


# ---- end of contrastive scoring ---------------------------------------------------------------------------
