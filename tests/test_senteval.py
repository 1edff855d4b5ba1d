"""SentEval's own probing data at paper scale: its file format, and the dry run that wires the senteval_*
downloads (verified by git blob id) into the probe jobs, where ci keeps the PTB-derived stand-in."""
from __future__ import annotations

import re
import subprocess
import sys

import pytest
import torch
from test_workflow import repo_copy

from nmtrepro import cli
from nmtrepro.analyses.probing import tasks
from nmtrepro.core.files import InputError, read_json, write_json
from nmtrepro.core.vocab import Vocab
from nmtrepro.models import build_model

D_TABLE7 = ["tree_depth", "top_constituents", "bigram_shift", "past_present", "subj_number", "obj_number",
            "odd_man_out", "coordination_inversion"]


def test_senteval_reader_takes_split_label_and_last_field_as_senteval_does(tmp_path):
    # SentEval's README: "(at least)" split, label and sentence, the sentence last; its loader reads
    # fields 0, 1 and -1 and strips the line end, so a CRLF file and an extra field read the same.
    path = tmp_path / "odd_man_out.txt"
    path.write_bytes(b"tr\tO\tThe dog barked .\r\n"
                     b"va\tC\t7\tThe cat sang .\n"
                     b"\n"
                     b"te\tO\tA bird flew by .\n")
    assert tasks.read_task(path) == [tasks.Example("tr", "O", "The dog barked ."),
                                     tasks.Example("va", "C", "The cat sang ."),
                                     tasks.Example("te", "O", "A bird flew by .")]


@pytest.mark.parametrize("line, why", [("tr\tO\n", "two fields"), ("dev\tO\tA b .\n", "split not tr/va/te"),
                                       ("tr\tO\t \n", "no sentence")])
def test_senteval_reader_names_the_file_and_line_of_a_bad_row(tmp_path, line, why):
    path = tmp_path / "bigram_shift.txt"
    path.write_text("tr\tI\tA b c .\nva\tO\tB c d .\n" + line + "te\tO\tC d e .\n")
    with pytest.raises(InputError, match=r"bigram_shift.txt:3: expected 'tr\|va\|te<TAB>label<TAB>sentence'"):
        tasks.read_task(path)


def test_probe_reads_senteval_files_through_their_download_records(tmp_path):
    vocab = Vocab(["he", "she", "left", "stays", "."])
    spec = {"family": "transformer", "src_vocab": len(vocab), "tgt_vocab": len(vocab), "d_model": 8, "ffn": 16,
            "heads": 2, "encoder_layers": 1, "decoder_layers": 1, "dropout": 0.0}
    torch.save({"model_spec": spec, "model": build_model(spec).state_dict()}, tmp_path / "model.pt")
    prepared = tmp_path / "prepared"
    prepared.mkdir()
    vocab.save(prepared / "dict.src.txt")
    (prepared / "bpe.codes").write_text("#version: 0.2\nx y\n")  # one merge that never applies
    archive = tmp_path / "cache/senteval_past_present/past_present.txt"  # as `nmtrepro download` leaves it
    archive.parent.mkdir(parents=True)
    archive.write_text("".join(f"{split}\t{label}\t{text}\n" for split in ("tr", "va", "te")
                               for label, text in (("PAST", "he left ."), ("PRES", "she stays ."))))
    write_json(tmp_path / "senteval_past_present.json", {"name": "senteval_past_present", "archive": str(archive)})
    assert cli.main(["probe", "--model", str(tmp_path / "model.pt"), "--prepared", str(prepared), "--lang", "en",
                     "--task-downloads", str(tmp_path / "senteval_past_present.json"), "--nhid", "4",
                     "--dropout", "0", "--weight-decay", "0", "--max-epochs", "2",
                     "--out", str(tmp_path / "out.json")]) == 0
    assert set(read_json(tmp_path / "out.json")) == {"past_present"}  # named for the file, as the table expects


def dry_run(work, scale, *targets) -> str:
    """`snakemake -n -p TARGETS` at `scale`: the jobs it would run and their shell commands."""
    out = subprocess.run([sys.executable, "-m", "snakemake", "-n", "-p", "--cores", "2", *targets,
                          "--config", f"scale={scale}"], cwd=work, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-3000:]
    return out.stdout


def probe_tasks(text: str, experiment: str) -> list[str]:
    """The task files or download records the probe of `experiment` reads, from its shell command."""
    command = re.search(rf"nmtrepro probe --model results/\w+/train/{experiment}/averaged\.pt .*", text).group(0)
    return re.search(r"--(?:tasks|task-downloads) (.*?)\s+--", command).group(1).split()


def test_paper_scale_probes_on_the_senteval_downloads_and_ci_on_the_ptb_stand_in(tmp_path):
    work = repo_copy(tmp_path)
    paper_d = work / "config/papers/D.yaml"  # the table's own task list, whatever D.yaml says today
    own = r"\1    tasks: [" + ", ".join(D_TABLE7) + "]\n"
    text = re.sub(r"(  D_table7:\n    kind: probing\n)(    tasks: .*\n)?", own, paper_d.read_text())
    paper_d.write_text(text)
    targets = ("probing/base_en_de.json", "probing/rec_en_de.json", "report/D_table7.md")

    paper = dry_run(work, "paper", *(f"results/paper/{target}" for target in targets))
    downloads = set(re.findall(r"nmtrepro download --name (senteval_\w+) ", paper))
    assert downloads == {f"senteval_{task}" for task in tasks.TASKS}
    assert "probing-data" not in paper
    # base_en_de is in paper B's Table 5 (ten tasks) and D's Table VII; rec_en_de only in D's (eight)
    assert probe_tasks(paper, "base_en_de") == [f"results/paper/downloads/senteval_{task}.json" for task in tasks.TASKS]
    assert probe_tasks(paper, "rec_en_de") == [f"results/paper/downloads/senteval_{task}.json" for task in D_TABLE7]
    table = re.search(r"nmtrepro probing-table .*--out-md results/paper/report/D_table7\.md.*", paper).group(0)
    assert f"--tasks {' '.join(D_TABLE7)} --tasks-from senteval" in table

    ci = dry_run(work, "ci", *(f"results/ci/{target}" for target in targets))
    assert "nmtrepro download" not in ci and "nmtrepro probing-data" in ci
    assert probe_tasks(ci, "base_en_de") == [f"results/ci/probing/tasks/{task}.txt" for task in tasks.TASKS]
    assert "--tasks-from ptb" in ci
