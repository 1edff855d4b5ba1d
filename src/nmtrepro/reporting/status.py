"""`nmtrepro status`: where a run stands, from the files it has written: its trainings done, running
(each at its step of max_updates, its last validation NLL, the time left as its log estimates), failed
and waiting, and the claims already judged with their verdicts.

It reads and never locks, so it works while Snakemake runs: the newest Snakemake log of the working
directory (.snakemake/log/) says how many trainings the run holds and which have started, finished or
failed; each training's own log (results/<scale>/logs/train/<experiment>.log) where it stands; each
claims page (results/<scale>/report/*_claims.md) its verdicts. Without a Snakemake log (a training run by
hand) the training logs alone are read.
"""
from __future__ import annotations

import re
from pathlib import Path

import yaml

from ..core.files import InputError, results_tree

STEP = re.compile(r"step (\d+)/(\d+) .*?(\d+) tgt tok/s \| (\d+) s trained, ~(\d+) s left")
VALID = re.compile(r"step (\d+) \| valid loss [-\d.]+ \| valid nll ([-\d.]+)")
# A started training as Snakemake 9 logs a rule with a message: "Job <id>: <message>", the train rule's
# message (workflow/rules/training.smk) beginning "Training <experiment> (".
STARTED = re.compile(r"^Job (\d+): Training (\S+) \(", re.MULTILINE)
FINISHED = re.compile(r"^Finished jobid: (\d+) \(Rule: (\w+)\)", re.MULTILINE)
FAILED = re.compile(r"^Error in rule (\w+):\n(?:    .*\n)*?    jobid: (\d+)", re.MULTILINE)
PLANNED = re.compile(r"^train +(\d+)$", re.MULTILINE)


def newest_log(workdir: Path) -> Path | None:
    """The newest Snakemake log: its counts are those of the newest invocation alone (a rerun lists only
    the trainings still to run; one with none left falls back to the training logs, `status`)."""
    logs = sorted((workdir / ".snakemake" / "log").glob("*.snakemake.log"))
    return logs[-1] if logs else None


def trainings(text: str) -> tuple[int | None, dict[str, str]]:
    """From a Snakemake log: the trainings the run holds (None where it did not say) and each started
    one's state, {experiment: "running" | "done" | "failed"}."""
    planned = PLANNED.search(text)
    jobs = dict(STARTED.findall(text))
    state = dict.fromkeys(jobs.values(), "running")
    for jobid, rule in FINISHED.findall(text):
        if rule == "train" and jobid in jobs:
            state[jobs[jobid]] = "done"
    for rule, jobid in FAILED.findall(text):
        if rule == "train" and jobid in jobs:
            state[jobs[jobid]] = "failed"
    return (int(planned.group(1)) if planned else None), state


def where(log: Path) -> str:
    """A training log's last step of max_updates, tok/s, last validation NLL and the time it says is left."""
    text = log.read_text(errors="replace") if log.exists() else ""
    steps, valids = STEP.findall(text), VALID.findall(text)
    if not steps:
        return "started, no update logged yet"
    step, total, speed, _, left = steps[-1]
    valid = f", valid NLL {float(valids[-1][1]):.3f} at step {valids[-1][0]}" if valids else ""
    return f"step {step}/{total}, {speed} tgt tok/s{valid}, ~{int(left) // 60} min {int(left) % 60} s left"


def verdicts(report: Path) -> list[tuple[str, str, str]]:
    """(page, claim, verdict) of every claims page written so far."""
    found = []
    for page in sorted(report.glob("*_claims.md")):
        lines = [line for line in page.read_text().splitlines() if line.startswith("| ")]
        if not lines:
            continue
        header = [cell.strip() for cell in lines[0].strip("|").split("|")]
        if "claim" not in header or "verdict" not in header:
            continue
        for line in lines[1:]:
            cells = [cell.strip() for cell in line.strip("|").split("|")]
            if len(cells) == len(header) and not all(set(cell) <= set("-:") for cell in cells):
                found.append((page.stem, cells[header.index("claim")], cells[header.index("verdict")]))
    return found


def status(results: Path, workdir: Path) -> str:
    log = newest_log(workdir)
    planned, state = trainings(log.read_text(errors="replace")) if log else (None, {})
    if not state:   # no Snakemake log: the trainings' own logs
        state = {path.stem: "done" if (results / "train" / path.stem / "final.pt").exists() else "running"
                 for path in sorted((results / "logs" / "train").glob("*.log")) if "." not in path.stem}
    counts = {word: sum(s == word for s in state.values()) for word in ("done", "running", "failed")}
    waiting = f", {planned - len(state)} waiting" if planned is not None else ""
    lines = [f"{results}: trainings {counts['done']} done, {counts['running']} running, {counts['failed']} failed"
             f"{waiting}" + (f" of {planned}" if planned is not None else "")
             + (f" (Snakemake log {log})" if log else " (no Snakemake log: from the training logs)")]
    for experiment, word in state.items():
        if word != "done":
            lines.append(f"  {word:8} {experiment}: {where(results / 'logs' / 'train' / f'{experiment}.log')}")
    judged = verdicts(results / "report")
    unjudged = sum(verdict.startswith(("not comparable", "seed noise unmeasured")) for _, _, verdict in judged)
    lines.append(f"claims judged: {len(judged) - unjudged}, shown unjudged: {unjudged}" if judged
                 else "claims judged: 0 (no claims page yet)")
    lines += [f"  {page}: {claim}: {verdict}" for page, claim, verdict in judged]
    return "\n".join(lines)


def add_arguments_status(parser) -> None:
    parser.add_argument("--config", nargs="*", default=[], metavar="KEY=VALUE",
                        help="as Snakemake takes it: scale=X picks results/X (default: config.yaml's scale), "
                             "budget=N results/X-budgetN")
    parser.add_argument("--results", help="the run's results folder (default: results/<scale>)")
    parser.add_argument("--directory", default=".", help="the workflow's working directory (its .snakemake/)")


def run_status(args) -> None:
    workdir = Path(args.directory)
    given = dict(item.partition("=")[::2] for item in args.config)
    scale = given.get("scale")
    if scale is None and (workdir / "config.yaml").exists():
        scale = yaml.safe_load((workdir / "config.yaml").read_text()).get("scale")
    tree = results_tree(scale or "tiny", int(given.get("budget", 1)))
    results = Path(args.results) if args.results else workdir / tree
    if not results.is_dir():
        raise InputError(f"{results}: no results folder (has the run started? --config scale=X names another)")
    print(status(results, workdir))
