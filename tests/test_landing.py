"""The report's first screen (reporting/landing.py, workflow/report/workflow.rst): what the run found."""
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest
from docutils.core import publish_parts
from jinja2 import Environment

from nmtrepro.core.files import InputError
from nmtrepro.reporting.landing import brief, read_page
from nmtrepro.reporting.render import Label, write_table

REPO = Path(__file__).resolve().parents[1]


def claims_page(folder: Path, name: str) -> Path:
    """A claims page's Markdown as `nmtrepro claims` writes it: title, reading, table (two claims)."""
    shown = pd.DataFrame({
        "claim": ["+PR improves Base | En-De", "BiARN*2 beats Base"], "metric": ["tokenized BLEU"] * 2,
        "paper Δ": ["+1.29", "+0.90"], "ours Δ": ["+0.84", "-0.20"],
        "verdict": [Label("reproduced (p 0.003)", "good"), Label("inconclusive: the seed pairs split", "open")]})
    write_table(shown, f"{name} beside this run (scale ci)", "How.", folder / f"{name}.md", folder / f"{name}.html",
                reading="1 of 2 judged claims reproduced, 0 contradicted, 1 inconclusive (1: the seed pairs split).",
                figures=[("<svg></svg>", f"{name}.svg")])
    return folder / f"{name}.md"


def test_a_claims_page_in_brief_gives_its_reading_and_each_claims_verdict_as_rst(tmp_path):
    reading, rows = read_page(claims_page(tmp_path, "central_claims"))
    assert reading.startswith("1 of 2 judged claims reproduced")
    assert [row["claim"] for row in rows] == ["+PR improves Base | En-De", "BiARN*2 beats Base"]
    html = publish_parts(brief("central: one claim a paper", reading, rows, verdicts=True), writer="html")["body"]
    assert "<strong>central: one claim a paper</strong>: 1 of 2 judged claims reproduced" in html
    assert "+PR improves Base | En-De (paper +1.29, ours +0.84): <strong>reproduced</strong>" in html
    assert "BiARN*2 beats Base (paper +0.90, ours -0.20): <strong>inconclusive</strong>" in html   # '*' as text
    alone = brief("paper A", reading, rows, verdicts=False)
    assert alone.count("\n") == 1 and "reproduced</strong>" not in alone


def test_a_page_that_is_not_a_claims_page_is_named(tmp_path):
    (tmp_path / "x.md").write_text("# A table\n\n| a | b |\n|---|---|\n| 1 | 2 |\n")
    with pytest.raises(InputError, match=r"x.md: not a claims page"):
        read_page(tmp_path / "x.md")


def landing(files, scale="ci") -> str:
    """workflow/report/workflow.rst as Snakemake renders the report's landing page (Jinja2, then docutils)."""
    template = (REPO / "workflow/report/workflow.rst").read_text()
    text = Environment(trim_blocks=True, lstrip_blocks=True).from_string(template).render(
        snakemake=SimpleNamespace(config={"scale": scale}), files=files, categories={})
    return publish_parts(text, writer="html")["html_body"]


def test_the_reports_first_screen_opens_with_its_title_then_what_the_run_found(tmp_path):
    """The central page's verdicts come first, then each paper's page in one line; across-scales pages
    and other results are not listed; a run without a claims page says how to build one."""
    records = []
    for name, label in (("central_claims", "central: one claim a paper"), ("A_claims", "paper A")):
        reading, rows = read_page(claims_page(tmp_path, name))
        (tmp_path / f"{name}.brief.rst").write_text(brief(label, reading, rows, name == "central_claims"))
        records.append(SimpleNamespace(target=f"{name}.html", path=tmp_path / f"{name}.html"))
    others = [SimpleNamespace(target=name, path=tmp_path / name) for name in ("central_claims_across_scales.html",
                                                                              "A_table1.html")]
    html = landing([records[1], *others, records[0]])
    title, found, paper_a = (html.index(text) for text in (
        "four NMT papers reproduced", "What this run found", "<strong>paper A</strong>"))
    assert title < found < html.index("(paper +1.29, ours +0.84): <strong>reproduced</strong>") < paper_a
    assert html.index("<strong>central: one claim a paper</strong>") < paper_a < html.index("The verdict is computed")
    assert "across_scales" not in html and "A_table1" not in html
    assert "This run built no claims page" in landing([*others])
