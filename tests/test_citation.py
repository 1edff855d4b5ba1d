"""CITATION.cff names the workflow and, as its references, the four papers that README.md's table lists."""
import re
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]


def test_the_citation_file_references_the_four_papers_of_the_readme():
    citation = yaml.safe_load((REPO / "CITATION.cff").read_text())
    assert citation["cff-version"] == "1.2.0" and citation["license"] == "MIT"
    assert {"message", "title", "authors"} <= set(citation)
    readme = (REPO / "README.md").read_text()
    # the README table's rows: | A | Xu et al. 2020, *title* | ...
    rows = re.findall(r"^\| [A-D] \| [^|]*?(\d{4}), \*([^*]+)\*", readme, re.M)
    papers = {title.replace("NMT", "Neural Machine Translation"): int(year) for year, title in rows}
    assert len(papers) == 4
    cited = {ref["title"]: ref["year"] for ref in citation["references"]}
    assert cited == papers
