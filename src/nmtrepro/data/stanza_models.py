"""stanza's English models in the download cache: fetched and verified by `nmtrepro stanza-models`.

The `stanza` parse backend needs the models of every processor its pipeline runs (`PROCESSORS`) plus
their dependencies (pretrained embeddings, character LMs), as stanza's resources.json lists them for
the installed stanza. `stanza.download` fetches each file and checks its md5 against that list; this
module says which files that list requires (`required_files`), so that a missing or corrupt model is
named before a parse starts and offline runs can check the cache without the network. The workflow
runs the command as rule `stanza_models` at every scale whose `parse_backend` is stanza, and the
parse stage takes its record as input.
"""
from __future__ import annotations

import logging
import os
from pathlib import Path

from ..core.files import InputError, file_digest, write_json
from .download import is_offline

log = logging.getLogger("nmtrepro.data.stanza_models")

COMMANDS = {  # `nmtrepro` commands of this module (cli.declared_commands)
    "stanza-models": "fetch and verify stanza's English models (the stanza parse backend)",
}

LANG = "en"
# What `nlp` runs: POS tags and dependencies (analyse) beside the constituency trees (parse).
PROCESSORS = "tokenize,pos,lemma,depparse,constituency"
HOW_TO_FETCH = ("fetch them with `nmtrepro stanza-models --dir DIR --out RECORD.json` online (the workflow's "
                "rule stanza_models, at a scale whose parse_backend is stanza)")


def import_stanza():
    """stanza, imported on first use: it is heavy and only the stanza backend needs it."""
    try:
        import stanza
    except ImportError as err:
        raise InputError("the stanza backend needs stanza, which is not installed: "
                         "pip install -r envs/requirements.txt") from err
    return stanza


def required_files(directory: str | os.PathLike) -> list[tuple[Path, str]]:
    """(path, md5) of every model file the pipeline loads, read from `directory`'s resources.json,
    resolved the way `stanza.download` and `stanza.Pipeline` resolve the default English package."""
    root = Path(directory)
    if not (root / "resources.json").is_file():
        raise InputError(f"stanza English models not found: no {root / 'resources.json'}; {HOW_TO_FETCH}")
    import_stanza()
    from stanza.resources import common

    resources = common.load_resources_json(str(root))
    _, _, package, processors = common.process_pipeline_parameters(LANG, str(root), "default", PROCESSORS)
    wanted = common.maintain_processor_list(resources, LANG, package, processors, allow_pretrain=True)
    wanted = common.flatten_processor_list(common.add_dependencies(resources, LANG, wanted))
    return sorted((root / LANG / kind / f"{name}.pt", resources[LANG][kind][name]["md5"])
                  for kind, name in wanted)


def missing_files(directory: str | os.PathLike) -> list[Path]:
    """The required model files not on disk (existence only: the download verified their md5)."""
    return [path for path, _ in required_files(directory) if not path.is_file()]


def check_present(directory: str | os.PathLike) -> None:
    """Fail naming every missing model file and how to fetch them."""
    missing = missing_files(directory)
    if missing:
        raise InputError(f"stanza English models incomplete in {directory}: missing "
                         f"{', '.join(map(str, missing))}; {HOW_TO_FETCH}")


def verified(directory: str | os.PathLike) -> list[dict]:
    """Every required file with its size, md5 (checked against resources.json) and sha256."""
    check_present(directory)
    files = []
    for path, md5 in required_files(directory):
        actual = file_digest(path, "md5")
        if actual != md5:
            raise InputError(f"{path}: md5 {actual}, stanza's resources.json says {md5} (a partial or "
                             f"corrupt download: delete it and run `nmtrepro stanza-models` again)")
        files.append({"path": str(path.relative_to(directory)), "size": path.stat().st_size,
                      "md5": md5, "sha256": file_digest(path, "sha256")})
    return files


def download(directory: Path) -> None:
    """stanza's own download of resources.json and the models into `directory`, md5-checked by stanza."""
    stanza = import_stanza()
    import requests

    try:
        stanza.download(lang=LANG, model_dir=str(directory), processors=PROCESSORS, logging_level="WARN")
    except (requests.exceptions.RequestException, OSError, ValueError) as err:
        raise InputError(f"downloading stanza's English models into {directory} failed ({err}); run again "
                         "online, or copy a complete stanza resources folder there and pass --offline") from err


def add_arguments_stanza_models(parser) -> None:
    parser.add_argument("--dir", required=True, help="stanza models folder (resources.json, en/), e.g. in the download cache")
    parser.add_argument("--out", required=True, help="JSON record: folder, stanza version, files with md5 and sha256")
    parser.add_argument("--offline", action="store_true",
                        help="only verify what is on disk, never touch the network (also NMTREPRO_OFFLINE=1)")


def run_stanza_models(args) -> None:
    directory = Path(os.path.expanduser(args.dir))
    offline = is_offline(args.offline)
    if not offline:
        download(directory)
    try:
        files = verified(directory)
    except InputError as err:
        raise InputError(f"offline (NMTREPRO_OFFLINE or config offline: true): {err}" if offline else str(err)) from None
    stanza = import_stanza()
    write_json(args.out, {"dir": str(directory), "lang": LANG, "processors": PROCESSORS,
                          "stanza": stanza.__version__, "resources_version": stanza.__resources_version__,
                          "resources_json_sha256": file_digest(directory / "resources.json", "sha256"),
                          "files": files})
    log.info("stanza models verified in %s: %d files", directory, len(files))
