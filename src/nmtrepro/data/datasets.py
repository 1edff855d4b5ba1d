"""The dataset registry: materialise a named dataset's splits as plain aligned text files.

Two kinds of entry share one slot shape (config `datasets:`). `embedded` sets are plain files, the
repository's data/ or a corpus of one's own (docs/own-corpus.md), checked against the SHA256SUMS file
above them; `download` sets name entries of the download manifest (workflow/downloads.yaml), fetched
and verified by download.py. Both end the same way: {split}.src/.tgt files and a manifest.json, so the
later stages never see the difference. A test split with several references (NIST's four: config
`refs`) also gets {split}.tgt1, .tgt2, ...
"""
from __future__ import annotations

import itertools
import json
import logging
import os
import re
import shutil
from pathlib import Path

from ..core.files import InputError, atomic_dir, file_digest, iter_lines, require_file, write_json
from . import download
from .recipes import RECIPES

log = logging.getLogger("nmtrepro.data.datasets")

COMMANDS = {  # `nmtrepro` commands of this module (cli.declared_commands)
    "fetch": "materialise a dataset from the registry (embedded or downloaded)",
}

RECIPE = "recipe"  # split files named `recipe:<file>` come from the dataset's preparation recipe
_SEG = re.compile(r"<seg.*?>(.*)</seg>.*?")


def expected_checksum(path: Path) -> str:
    """The checksum listed for `path` in the nearest SHA256SUMS file of its parent folders."""
    path = path.resolve()
    for folder in path.parents:
        sums = folder / "SHA256SUMS"
        if sums.is_file():
            rel = path.relative_to(folder).as_posix()
            for line in sums.read_text(encoding="utf-8").splitlines():
                parts = line.split(maxsplit=1)
                name = parts[1].removeprefix("*").removeprefix("./") if len(parts) == 2 else None  # '*': `sha256sum -b`
                if name == rel and not line.startswith("#"):
                    return parts[0]
            raise InputError(f"{path} is not listed in {sums}")
    raise InputError(f"no SHA256SUMS file above {path}")


def verified(path: str) -> Path:
    """`path` once its content matches its listed checksum."""
    path = require_file(path)
    actual, expected = file_digest(path), expected_checksum(path)
    if actual != expected:
        raise InputError(f"checksum mismatch for {path}: sha256 {actual}, SHA256SUMS says {expected}")
    return path


def _lines(path: Path):
    """Lines of a plain, .gz or WMT .sgm file (the text of each <seg>, as sacrebleu extracts it)."""
    if not path.name.endswith((".sgm", ".sgm.gz")):
        yield from iter_lines(path)
        return
    for line in iter_lines(path):
        if line.startswith("<seg "):
            yield _SEG.sub(r"\1", line).strip()


def _write_split(pairs: list[tuple[Path, Path]], staging: Path, split: str, max_lines: int | None) -> int:
    """Stream aligned file pairs, one after another, into staging/{split}.{src,tgt}; the lines written.

    Every pair is read to its end, past `max_lines` too, so a misaligned pair is always refused.
    """
    written = 0
    with open(staging / f"{split}.src", "w", encoding="utf-8") as src_out, \
            open(staging / f"{split}.tgt", "w", encoding="utf-8") as tgt_out:
        for src_path, tgt_path in pairs:
            for src, tgt in itertools.zip_longest(_lines(src_path), _lines(tgt_path)):
                if src is None or tgt is None:
                    raise InputError(
                        f"parallel files differ in length: {src_path} has {sum(1 for _ in _lines(src_path))} "
                        f"lines, {tgt_path} has {sum(1 for _ in _lines(tgt_path))}")
                if max_lines is None or written < max_lines:
                    src_out.write(src + "\n")
                    tgt_out.write(tgt + "\n")
                    written += 1
    return written


def _write_references(name: str, split: str, srcs: list[Path], refs: list[Path], staging: Path,
                      max_lines: int | None) -> None:
    """A test split's further references (config `refs`; NIST's four: `tgt` is the first) into
    staging/{split}.tgt1, .tgt2, ...: each one file, as many lines as the split's source, cut as the
    source is by `max_lines`."""
    expected = sum(1 for src in srcs for _ in _lines(src))
    for k, ref in enumerate(refs, 1):
        rows = list(_lines(ref))
        if len(rows) != expected:
            raise InputError(f"dataset {name}, split {split}: reference {ref} (datasets.{name}.splits.{split}.refs, "
                             f"item {k}) has {len(rows)} lines, the source has {expected}")
        with open(staging / f"{split}.tgt{k}", "w", encoding="utf-8") as out:
            out.writelines(row + "\n" for row in rows[:max_lines])


def materialise(name: str, spec: dict, out_dir: Path, max_lines: int | None, resolve, tokenized: bool = False) -> None:
    """Write every split to out_dir/{split}.{src,tgt} with a manifest, atomically as a folder.

    `resolve` turns a split's file reference into a readable path (verifying it on the way); a split
    may list several files per side, which are concatenated in order (e.g. Europarl + News Commentary).
    `tokenized` (recorded in the manifest): the files are Moses-tokenized already, by a recipe.
    """
    with atomic_dir(out_dir) as staging:
        manifest = {"name": name, "src_lang": spec["src"], "tgt_lang": spec["tgt"], "tokenized": tokenized,
                    "splits": {}}
        for split, files in spec["splits"].items():
            srcs, tgts = _as_list(files["src"]), _as_list(files["tgt"])
            if len(srcs) != len(tgts):
                raise InputError(f"dataset {name}, split {split}: {len(srcs)} source files "
                                 f"but {len(tgts)} target files")
            pairs = [(resolve(s, staging), resolve(t, staging)) for s, t in zip(srcs, tgts)]
            lines = _write_split(pairs, staging, split, max_lines)
            manifest["splits"][split] = {"lines": lines, "src_path": _one_or_list([str(s) for s, _ in pairs]),
                                         "tgt_path": _one_or_list([str(t) for _, t in pairs])}
            if files.get("refs"):
                refs = [resolve(ref, staging) for ref in files["refs"]]
                _write_references(name, split, [src for src, _ in pairs], refs, staging, max_lines)
                manifest["splits"][split]["refs_path"] = [str(ref) for ref in refs]
            log.info("%s/%s: %d lines", name, split, lines)
        shutil.rmtree(staging / RECIPE, ignore_errors=True)
        write_json(staging / "manifest.json", manifest)


def _as_list(value) -> list[str]:
    return [value] if isinstance(value, str) else list(value)


def _one_or_list(values: list[str]):
    """A single path as a string (as embedded manifests always had it), several as a list."""
    return values[0] if len(values) == 1 else values


def fetch_embedded(name: str, spec: dict, out_dir: Path, max_lines: int | None) -> None:
    """Verify and decompress every split of a dataset shipped in data/."""
    materialise(name, spec, out_dir, max_lines, lambda ref, staging: verified(ref))


def fetch_download(name: str, spec: dict, out_dir: Path, max_lines: int | None, manifest: dict, cache: Path,
                   local_data: dict | None = None, **options) -> None:
    """Fetch a download dataset's files (see download.py), run its recipe, then materialise its splits.

    A split file is `<source>:<path inside it>`, where the source is one of the dataset's `downloads`
    (its extracted folder), one of its `local` corpora (a folder the user names in config
    `local_data`, for licensed LDC/NIST data), or `recipe` (the output of its preparation recipe). A
    plain path is a file shipped in data/, verified like an embedded one.
    """
    folders = {source: _local_folder(name, source, local_data or {}) for source in spec.get("local", [])}
    folders.update(download.ensure_all(spec.get("downloads", []), manifest, cache, **options))

    def resolve(ref: str, staging: Path) -> Path:
        source, sep, inner = ref.partition(":")
        if not sep:
            return verified(ref)
        if source == RECIPE:
            if not (staging / RECIPE).is_dir():
                if spec.get("recipe") not in RECIPES:
                    raise InputError(f"dataset {name}: {ref} names the recipe output but the dataset has no "
                                     f"recipe (known: {', '.join(RECIPES)})")
                RECIPES[spec["recipe"]].run(folders, staging / RECIPE)
            folder = staging / RECIPE
        elif source in folders:
            folder = folders[source]
        else:
            raise InputError(f"dataset {name}: {ref} names {source!r}, which is not among its downloads, "
                             f"local corpora or recipe")
        return require_file(folder / inner)

    materialise(name, spec, out_dir, max_lines, resolve, _recipe_tokenizes(name, spec))


def _recipe_tokenizes(name: str, spec: dict) -> bool:
    """Whether the dataset's recipe writes tokenized text; if so every split must come from it, since the
    manifest says for the whole dataset whether `prepare` tokenizes."""
    recipe = RECIPES.get(spec.get("recipe"))
    if recipe is None or not recipe.tokenized:
        return False
    others = [ref for files in spec["splits"].values() for ref in _as_list(files["src"]) + _as_list(files["tgt"])
              if not ref.startswith(f"{RECIPE}:")]
    if others:
        raise InputError(f"dataset {name}: recipe {spec['recipe']} writes tokenized text, so every split must "
                         f"come from it (recipe:<file>), not {', '.join(others)}")
    return True


def check_user_data(config: dict, dataset: str, manifest: str | Path) -> None:
    """What only the user can provide for `dataset`, checked before any job runs (the workflow calls it
    for each dataset a target fetches): each licensed folder named in `local_data` and, offline, each
    download in the cache. Without it the fetch job would fail hours into a run."""
    spec = config["datasets"][dataset]
    for source in spec.get("local", []):
        _local_folder(dataset, source, config.get("local_data", {}))
    if spec.get("downloads") and download.is_offline(config.get("offline", False)):
        resources = download.manifest_entries(spec["downloads"], download.load_manifest(manifest))
        download.require_cached(resources, download.cache_root(config.get("download_cache")))


def _local_folder(dataset: str, source: str, local_data: dict) -> Path:
    """A user-provided folder for licensed data, or an error that says how to provide it."""
    if source not in local_data:
        raise InputError(f"dataset {dataset} needs the licensed corpus {source!r}, which cannot be downloaded: "
                         f"set local_data: {{{source}: /path/to/folder}} in the config (see the dataset's entry "
                         "for the files it reads)")
    folder = Path(os.path.expanduser(local_data[source]))
    if not folder.is_dir():
        raise InputError(f"local_data.{source} = {local_data[source]} is not a folder (dataset {dataset})")
    return folder


def add_arguments_fetch(parser) -> None:
    parser.add_argument("--name", required=True, help="dataset name in the registry")
    parser.add_argument("--spec", required=True, help="the registry entry as JSON")
    parser.add_argument("--out-dir", required=True, help="folder for {split}.src/.tgt and manifest.json")
    parser.add_argument("--max-lines", type=int, help="keep only the first N lines of every split")
    parser.add_argument("--local-data", default="{}", help="config local_data as JSON (licensed corpora)")
    download.add_download_options(parser)


def run_fetch(args) -> None:
    spec = json.loads(args.spec)
    if spec["kind"] == "download":
        fetch_download(args.name, spec, Path(args.out_dir), args.max_lines, download.load_manifest(args.manifest),
                       download.cache_root(args.cache), json.loads(args.local_data),
                       **download.download_options(args))
    else:
        fetch_embedded(args.name, spec, Path(args.out_dir), args.max_lines)
