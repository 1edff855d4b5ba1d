"""The dataset registry: materialise a named dataset's splits as plain aligned text files.

Two kinds of entry share one slot shape (config `datasets:`). `embedded` sets ship in the repo's
data/ folder and are checked against the SHA256SUMS file beside them; `download` sets name URLs and
checksums, fetched by the full-scale download stage.
"""
from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import tempfile
from pathlib import Path

from .files import InputError, read_parallel, require_file, write_json, write_lines

log = logging.getLogger("nmtrepro.datasets")


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def expected_checksum(path: Path) -> str:
    """The checksum listed for `path` in the nearest SHA256SUMS file of its parent folders."""
    path = path.resolve()
    for folder in path.parents:
        sums = folder / "SHA256SUMS"
        if sums.is_file():
            rel = path.relative_to(folder).as_posix()
            for line in sums.read_text(encoding="utf-8").splitlines():
                parts = line.split(maxsplit=1)
                if len(parts) == 2 and not line.startswith("#") and parts[1].removeprefix("./") == rel:
                    return parts[0]
            raise InputError(f"{path} is not listed in {sums}")
    raise InputError(f"no SHA256SUMS file above {path}")


def verified(path: str) -> Path:
    """`path` once its content matches its listed checksum."""
    path = require_file(path)
    actual, expected = sha256(path), expected_checksum(path)
    if actual != expected:
        raise InputError(f"checksum mismatch for {path}: sha256 {actual}, SHA256SUMS says {expected}")
    return path


def fetch_embedded(name: str, spec: dict, out_dir: Path, max_lines: int | None) -> None:
    """Verify and decompress every split into out_dir/{split}.{src,tgt}, atomically as a folder."""
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.", dir=out_dir.parent))
    try:
        manifest = {"name": name, "src_lang": spec["src"], "tgt_lang": spec["tgt"], "splits": {}}
        for split, files in spec["splits"].items():
            src_path, tgt_path = verified(files["src"]), verified(files["tgt"])
            src, tgt = read_parallel(src_path, tgt_path)
            if max_lines is not None:
                src, tgt = src[:max_lines], tgt[:max_lines]
            write_lines(staging / f"{split}.src", src)
            write_lines(staging / f"{split}.tgt", tgt)
            manifest["splits"][split] = {"lines": len(src), "src_path": str(src_path),
                                         "tgt_path": str(tgt_path)}
            log.info("%s/%s: %d lines", name, split, len(src))
        write_json(staging / "manifest.json", manifest)
        if out_dir.exists():
            shutil.rmtree(out_dir)
        os.replace(staging, out_dir)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise


def add_arguments_fetch(parser) -> None:
    parser.add_argument("--name", required=True, help="dataset name in the registry")
    parser.add_argument("--spec", required=True, help="the registry entry as JSON")
    parser.add_argument("--out-dir", required=True, help="folder for {split}.src/.tgt and manifest.json")
    parser.add_argument("--max-lines", type=int, help="keep only the first N lines of every split")


def run_fetch(args) -> None:
    spec = json.loads(args.spec)
    if spec["kind"] == "download":
        raise InputError(f"dataset {args.name} is a download dataset; the download stage is not built yet "
                         "(full-scale issue): use an embedded dataset or place the files yourself")
    fetch_embedded(args.name, spec, Path(args.out_dir), args.max_lines)
