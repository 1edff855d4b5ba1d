"""stanza's English models: which files the stanza backend needs, `nmtrepro stanza-models`, and the parse
backend selection that depends on them (a backend asked for by name never falls back). Nothing is
downloaded: the models are stand-in files listed in a stand-in resources.json."""
from __future__ import annotations

import hashlib
import importlib.util
import json
import re
import sys
from types import SimpleNamespace

import pytest

from nmtrepro import cli
from nmtrepro.core.files import InputError
from nmtrepro.data import stanza_models
from nmtrepro.data.nlp import resolve_backend

# The default English package as stanza's resources.json shapes it: processor -> package, each model
# file with its md5, dependencies (pretrained vectors) listed per model.
PACKAGE = {"tokenize": "combined", "pos": "combined_charlm", "lemma": "combined_nocharlm",
           "depparse": "combined_charlm", "constituency": "ptb3-revised_charlm"}
FILES = [f"en/{kind}/{name}.pt" for kind, name in PACKAGE.items()] + ["en/pretrain/conll17.pt"]


def md5(text: str) -> str:
    return hashlib.md5(text.encode()).hexdigest()


def fake_models(root, missing=()):
    """resources.json for PACKAGE plus every model file (content = its path) except `missing`."""
    pretrain = [{"model": "pretrain", "package": "conll17"}]
    en = {"packages": {"default": PACKAGE}, "pretrain": {"conll17": {"md5": md5("en/pretrain/conll17.pt")}}}
    for kind, name in PACKAGE.items():
        en[kind] = {name: {"md5": md5(f"en/{kind}/{name}.pt"), "dependencies": pretrain}}
    root.mkdir(parents=True, exist_ok=True)
    (root / "resources.json").write_text(json.dumps({"en": en}))
    for rel in FILES:
        if rel not in missing:
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            (root / rel).write_text(rel)
    return root


needs_stanza = pytest.mark.skipif(importlib.util.find_spec("stanza") is None,
                                  reason="stanza not installed (pip install -r envs/requirements.txt)")


def test_stanza_asked_for_without_its_models_fails_naming_the_file_and_the_command(tmp_path):
    with pytest.raises(InputError, match=re.escape(str(tmp_path / "resources.json"))) as err:
        resolve_backend("stanza", tmp_path)
    assert "nmtrepro stanza-models" in str(err.value) and "rule stanza_models" in str(err.value)


def test_stanza_asked_for_but_not_installed_fails_naming_it(tmp_path, monkeypatch):
    fake_models(tmp_path)
    monkeypatch.setitem(sys.modules, "stanza", None)  # import stanza -> ImportError
    with pytest.raises(InputError, match="needs stanza, which is not installed"):
        resolve_backend("stanza", tmp_path)
    assert resolve_backend("auto", tmp_path) == "spacy"


def test_auto_without_stanza_models_resolves_to_spacy(tmp_path):
    assert resolve_backend("auto", tmp_path) == "spacy"


@needs_stanza
def test_stanza_with_a_model_file_missing_fails_naming_it_and_auto_takes_spacy(tmp_path):
    fake_models(tmp_path, missing={"en/constituency/ptb3-revised_charlm.pt"})
    assert sorted(str(p.relative_to(tmp_path)) for p, _ in stanza_models.required_files(tmp_path)) == sorted(FILES)
    with pytest.raises(InputError, match=r"missing \S*en/constituency/ptb3-revised_charlm\.pt"):
        resolve_backend("stanza", tmp_path)
    assert resolve_backend("auto", tmp_path) == "spacy"
    fake_models(tmp_path)
    assert resolve_backend("stanza", tmp_path) == "stanza" and resolve_backend("auto", tmp_path) == "stanza"


@pytest.mark.parametrize("how", ["flag", "env"])
def test_stanza_models_offline_fails_fast_naming_what_is_missing(tmp_path, monkeypatch, capsys, how):
    monkeypatch.setattr(stanza_models, "download", lambda directory: pytest.fail("offline must not download"))
    argv = ["stanza-models", "--dir", str(tmp_path / "stanza"), "--out", str(tmp_path / "record.json")]
    if how == "flag":
        argv.append("--offline")
    else:
        monkeypatch.setenv("NMTREPRO_OFFLINE", "1")
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert "offline" in err and str(tmp_path / "stanza" / "resources.json") in err and "nmtrepro stanza-models" in err
    assert not (tmp_path / "record.json").exists()


def test_stanza_models_without_network_fails_naming_the_folder(tmp_path, monkeypatch):
    import requests

    def unreachable(**kwargs):
        raise requests.exceptions.ConnectionError("Name or service not known")

    monkeypatch.setattr(stanza_models, "import_stanza", lambda: SimpleNamespace(download=unreachable))
    with pytest.raises(InputError, match="downloading stanza's English models into .*stanza failed "
                                         r"\(Name or service not known\)"):
        stanza_models.download(tmp_path / "stanza")


@needs_stanza
def test_stanza_models_offline_verifies_the_cache_and_records_every_file(tmp_path):
    root = fake_models(tmp_path / "stanza")
    record = tmp_path / "record.json"
    assert cli.main(["stanza-models", "--dir", str(root), "--out", str(record), "--offline"]) == 0
    written = json.loads(record.read_text())
    assert written["dir"] == str(root) and written["processors"] == stanza_models.PROCESSORS
    assert sorted(f["path"] for f in written["files"]) == sorted(FILES)
    pos = next(f for f in written["files"] if f["path"] == "en/pos/combined_charlm.pt")
    assert pos["md5"] == md5("en/pos/combined_charlm.pt")
    assert pos["sha256"] == hashlib.sha256(b"en/pos/combined_charlm.pt").hexdigest()


@needs_stanza
def test_stanza_models_refuses_a_file_whose_md5_differs(tmp_path, capsys):
    root = fake_models(tmp_path / "stanza")
    (root / "en/pretrain/conll17.pt").write_text("truncated")
    argv = ["stanza-models", "--dir", str(root), "--out", str(tmp_path / "record.json"), "--offline"]
    assert cli.main(argv) == 2
    assert re.search(r"conll17\.pt: md5 \w+, stanza's resources.json says " + md5("en/pretrain/conll17.pt"),
                     capsys.readouterr().err)
