"""The smoke scale's mirror of slices (data/smoke/): reproducible, listed with the right checksums, and
standing in for every download a paper-scale run fetches."""
from __future__ import annotations

import importlib.util
import io
import tarfile
from pathlib import Path

import pytest
import yaml

from nmtrepro.data import download

ROOT = Path(__file__).resolve().parents[1]
SMOKE = download.load_manifest(ROOT / "workflow/downloads-smoke.yaml")
REAL = download.load_manifest(ROOT / "workflow/downloads.yaml")


def build_module():
    spec = importlib.util.spec_from_file_location("smoke_build", ROOT / "data/smoke/build.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def contents(data: bytes) -> dict[str, bytes] | bytes:
    """An archive's members by name, or the bytes of any other file."""
    try:
        with tarfile.open(fileobj=io.BytesIO(data)) as archive:
            return {m.name: archive.extractfile(m).read() for m in archive.getmembers()}
    except tarfile.ReadError:
        return data


def test_the_mirror_rebuilds_to_the_committed_files(tmp_path):
    build_module().build(tmp_path, tmp_path)
    for folder in ("mirror", "ldc_zh_en"):
        committed = sorted(p.name for p in (ROOT / "data/smoke" / folder).iterdir())
        assert committed == sorted(p.name for p in (tmp_path / "smoke" / folder).iterdir())
        for name in committed:
            assert contents((tmp_path / "smoke" / folder / name).read_bytes()) == \
                contents((ROOT / "data/smoke" / folder / name).read_bytes()), name


@pytest.mark.parametrize("name", sorted(SMOKE))
def test_each_mirror_file_matches_its_smoke_manifest_entry(name):
    resource = SMOKE[name]
    path = ROOT / "data/smoke/mirror" / resource.filename
    if resource.trust_on_first_use:
        assert REAL[name].trust_on_first_use  # first use as the real entry; nothing to compare before it
        return
    algorithm, expected = resource.checksum
    assert download.digest(path, algorithm) == expected
    assert resource.size is None or path.stat().st_size == resource.size


def test_every_download_of_a_paper_run_has_a_smoke_entry_of_the_same_kind():
    config = yaml.safe_load((ROOT / "config.yaml").read_text(encoding="utf-8"))
    fetched = {name for spec in config["datasets"].values() for name in spec.get("downloads", [])}
    fetched |= {config["scales"]["paper"]["contrastive"]["download"]}
    fetched |= {name for name in REAL if name.startswith("senteval_")}
    assert fetched <= set(SMOKE)
    for name in fetched:
        real, smoke = REAL[name], SMOKE[name]
        assert (real.checksum or (None,))[0] == (smoke.checksum or (None,))[0], name
        assert real.trust_on_first_use == smoke.trust_on_first_use, name
        assert smoke.filename == real.filename, name  # the recipes and split paths see the real names


def test_smoke_runs_the_paper_scales_study_from_its_own_data():
    from nmtrepro.study.config import load, model_options, tables_at_scale, with_scale_data

    smoke, _ = load(ROOT / "config.yaml", ["scale=smoke"])
    paper, _ = load(ROOT / "config.yaml", ["scale=paper"])
    left_out = set(smoke["scales"]["smoke"]["leave_out"])  # paper D's heads sweep (test_workflow)
    assert set(tables_at_scale(smoke)) == set(tables_at_scale(paper)) - left_out and left_out <= set(tables_at_scale(paper))
    assert model_options(smoke, "rec_diverse", "m")["rec_heads"] == model_options(paper, "rec_diverse", "m")["rec_heads"]
    assert model_options(smoke, "rec_diverse", "m")["d_model"] == 32  # at ci widths
    data = with_scale_data(smoke)
    assert data["download_cache"] == "results/smoke/download-cache" != with_scale_data(paper)["download_cache"]
    assert data["local_data"]["ldc_zh_en"] == "data/smoke/ldc_zh_en"
    assert smoke["scales"]["smoke"]["tasks"] == paper["scales"]["paper"]["tasks"]
