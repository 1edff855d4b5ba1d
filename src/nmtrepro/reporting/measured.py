"""Claims measured elsewhere, kept as data beside the papers' numbers: a run's significance JSONs with
where, when and at which commit they were measured, so that a checkout without that scale's results
(a laptop's `tiny`, which never has `gpu`'s) still sets the converged answer beside its own.

`nmtrepro export-claims --results results/gpu --out workflow/measured/gpu` copies every paired
bootstrap the run wrote (analyse/significance/*.json: per seed Δ, baseline BLEU, the variance parts; and
its tests of claims on quantities, analyse/<analysis>/*.vs.*.<quantity>.json)
and its claims pages' gaps over training (report/<page>.gap.tsv), and writes provenance.json (scale, commit, date, hardware). The claims pages across scales read such a
folder for every scale this checkout has no results tree of (a local run takes precedence), each row
labelled with its provenance and, where git can tell, whether the models, the trainer or the config
changed since that commit.
"""
from __future__ import annotations

import datetime
import functools
import json
import platform
import shutil
from pathlib import Path

from ..core.files import InputError, atomic_open
from ..core.repo import commit, git
from ..evaluation.quantities import QUANTITIES

MEASURED = "workflow/measured"     # one folder a scale, beside workflow/papers/
PROVENANCE = "provenance.json"
# What a claim's numbers depend on: a change here since the measuring commit is named on the page.
CODE = ("src/nmtrepro/models", "src/nmtrepro/training", "src/nmtrepro/evaluation", "config.yaml")


def hardware() -> str:
    """The GPU's name where torch sees one, else the CPU's."""
    try:
        import torch
        if torch.cuda.is_available():
            return f"{torch.cuda.device_count()}x {torch.cuda.get_device_name(0)}"
    except ImportError:
        pass
    model = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                  if line.startswith("model name")), None) if Path("/proc/cpuinfo").exists() else None
    return model or platform.processor() or platform.machine()


def export(results: Path, out: Path, scale: str, machine: str | None = None) -> int:
    """Copy `results`' significance JSONs, and its tests of claims on a quantity (`<experiment>.vs.<baseline>.
    <quantity>.json` beside their analysis), into `out` with their provenance; the count copied."""
    found = sorted((results / "analyse" / "significance").glob("*.json"))
    found += sorted(path for path in (results / "analyse").glob("*/*.vs.*.json")
                    if path.name.rsplit(".", 2)[1] in QUANTITIES)
    if not found:
        raise InputError(f"{results}/analyse/significance: no paired bootstrap to export")
    out.mkdir(parents=True, exist_ok=True)
    for path in found + sorted((results / "report").glob("*.gap.tsv")):  # the claims pages' gaps over training
        shutil.copyfile(path, out / path.name)
    with atomic_open(out / PROVENANCE) as handle:
        json.dump({"scale": scale, "commit": commit(),
                   "date": datetime.date.today().isoformat(), "hardware": machine or hardware(),
                   "files": len(found)}, handle, indent=1)
    return len(found)


@functools.cache
def label(folder: str | Path, repo: str | Path = ".") -> str:
    """The scale's row label of a measured folder: '<scale> measured on <hardware>, <date>, commit <c>',
    and the commits since that touched CODE, where git knows both (no '=', which the pages' arguments split on)."""
    folder = Path(folder)
    try:
        meta = json.loads((folder / PROVENANCE).read_text())
    except (OSError, json.JSONDecodeError) as err:
        raise InputError(f"{folder / PROVENANCE}: unreadable provenance ({err}); export again") from None
    text = f"{meta['scale']} measured on {meta['hardware']}, {meta['date']}, commit {meta['commit']}"
    since = git(["rev-list", "--count", f"{meta['commit'].removesuffix('-dirty')}..HEAD", "--", *CODE], repo)
    if since is not None and since != "0":
        text += f" (models, trainer or config changed in {since} commits since)"
    return text.replace("=", "-")


def add_arguments_export_claims(parser) -> None:
    parser.add_argument("--results", required=True, help="the run's results folder (results/<scale>)")
    parser.add_argument("--out", required=True, help=f"the folder to write ({MEASURED}/<scale>)")
    parser.add_argument("--hardware", help="what ran it, in words (default: the GPU's or the CPU's name)")


def run_export_claims(args) -> None:
    results = Path(args.results)
    count = export(results, Path(args.out), results.name, args.hardware)
    print(f"{count} paired bootstraps of {results} in {args.out}, provenance in {Path(args.out) / PROVENANCE}")
