# Analyses beyond corpus BLEU (config `analyses`), one file of rules per kind under analyses/. Each
# measures per experiment under results/<scale>/analyse/ and renders its paper figure or table under
# results/<scale>/report/<analysis>.*. A kind's file registers the report files it renders in ANALYSIS_OUTPUTS.
ANALYSES = analyses_at_scale(config)  # the analyses built at this scale (an analysis' `scales`)
ANALYSIS_OUTPUTS = {}  # kind -> extensions of results/<scale>/report/<analysis>.<ext>
FIGURE, TABLE = ["png", "svg"], ["md", "html", "tex"]


def analyses_of(kind):
    return "|".join(name for name, spec in ANALYSES.items() if spec["kind"] == kind) or "^$"


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
        return {
            **{f"sys{i}": pattern(wildcards.analysis, s) for i, s in enumerate(systems)},
            **paper_numbers(wildcards),
        }

    return inputs


def system_args(render):
    """Params function: `--system LABEL=...` per system, `render(system, input, i)` giving what follows '='."""

    def args(wildcards, input):
        systems = ANALYSES[wildcards.analysis]["systems"]
        return shlex.join(a for i, s in enumerate(systems) for a in ("--system", f"{s['label']}={render(s, input, i)}"))

    return args


def one_test_input(wildcards, kind):
    """The test file (`src.bpe`, `ref.tok`) that every system and baseline of the analysis translated."""
    return test_input(one_test_experiment(wildcards), kind)


def one_test_experiment(wildcards):
    """One experiment of the analysis, once every system and baseline is known to translate its test set."""
    systems = ANALYSES[wildcards.analysis]["systems"]
    named = [e for s in systems for e in (s["experiment"], baseline_of(s))]
    paths = {test_input(e, "src") for e in named}
    if len(paths) != 1:
        raise WorkflowError(
            f"analyses.{wildcards.analysis}: its systems translate different test sets "
            f"({', '.join(sorted(paths))}); its table needs one"
        )
    return named[0]


def report_outputs(category, caption, extensions):
    """The report files of an analysis: a figure's PNG and a table's HTML go into the Snakemake report."""
    labels = {"analysis": "{analysis}"}
    shown = {"png": {**labels, "kind": "figure"}, "html": {**labels, "kind": "table"}}
    files = {ext: results(f"report/{{analysis}}.{ext}") for ext in extensions}
    # (`report` must not start a line: Snakemake's parser takes it for the `report:` keyword)
    return {
        ext: in_report(path, caption=caption, category=category, labels=shown[ext]) if ext in shown else path
        for ext, path in files.items()
    }


in_report = report


for _rules in ANALYSIS_RULES:

    include: _rules
