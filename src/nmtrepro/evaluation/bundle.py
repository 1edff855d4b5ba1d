"""A model bundle: one folder that translates by its path alone, as fairseq's hub and Hugging Face's
`save_pretrained` folders do, so that a model leaves the run that trained it.

    <bundle>/model.pt               the model file (spec, weights, its vocabularies' digests)
    <bundle>/dict.src.txt, .tgt.txt the vocabularies it was trained with
    <bundle>/bpe.codes              the BPE codes that segment its source
    <bundle>/bundle.json            languages, how raw text becomes its input (tokenizer, lowercasing),
                                    the annotations it reads, the workflow's decoding settings, provenance
    <bundle>/train.tgt.bin          only where its search reads an n-gram LM of the training targets (NPMT)

`load` refuses a bundle whose vocabularies are not the model's (their digests, checkpoint.py): a
bundle put together by hand from the wrong prepared folder fails here, not as fluent nonsense.
"""
from __future__ import annotations

import datetime
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from ..core import runtime
from ..core.files import InputError, atomic_dir, read_json, write_json
from ..core.repo import commit
from ..core.text import BPE
from ..core.vocab import Vocab
from ..models import configure
from ..training import checkpoint
from .options import DEFAULTS

FORMAT = "nmtrepro-bundle/1"
FILES = ("model.pt", "dict.src.txt", "dict.tgt.txt", "bpe.codes", "bundle.json")


def _link_or_copy(source: Path, target: Path) -> None:
    """A hard link where the file system allows one (a Big model is ~1 GB), else a copy."""
    try:
        os.link(source, target)
    except OSError:
        shutil.copyfile(source, target)


def write(model_file: str | Path, prepared: str | Path, out: str | Path, search: dict, max_source_len: int,
          provenance: dict) -> dict:
    """Make the bundle `out` of a model file and the prepared dataset it was trained on; its bundle.json.
    `search`: the workflow's decoding settings for the model (`options.DEFAULTS`' keys), `translate`'s
    defaults; `max_source_len`: the longest source in BPE pieces that training kept (prepare's
    max_len), past which `translate` splits a line; `provenance`: where it came from (experiment,
    dataset, scale). Written into a staging folder and renamed into place."""
    model_file, prepared, out = Path(model_file).resolve(), Path(prepared), Path(out)
    blob = checkpoint.load(model_file, mmap=True)
    vocabs = dict(zip(("src", "tgt"), Vocab.load_pair(prepared)))
    checkpoint.check_vocabularies(blob, model_file, vocabs, prepared)
    stats = read_json(prepared / "stats.json")
    meta = {
        "format": FORMAT,
        "src_lang": stats["src_lang"], "tgt_lang": stats["tgt_lang"],
        "preprocess": {"lowercase": stats.get("lowercase", False), "tokenized": stats.get("tokenized", False),
                       "bpe_merges": stats.get("bpe_merges"), "max_source_len": max_source_len},
        "family": blob["model_spec"].get("family", "transformer"),
        "annotations": list(configure({k: v for k, v in blob["model_spec"].items()
                                       if k not in ("src_vocab", "tgt_vocab")}).extra_inputs),
        "search": {key: search.get(key, DEFAULTS[key]) for key in DEFAULTS},
        "vocab": {side: vocab.digest for side, vocab in vocabs.items()},
        "provenance": {**provenance, "step": blob.get("step"), "model_file": str(model_file), "commit": commit(),
                       "created": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")},
    }
    with atomic_dir(out) as staging:
        _link_or_copy(model_file, staging / "model.pt")
        for name in ("dict.src.txt", "dict.tgt.txt", "bpe.codes"):
            shutil.copyfile(prepared / name, staging / name)
        if meta["search"]["lm_order"]:
            _link_or_copy(prepared / "train.tgt.bin", staging / "train.tgt.bin")
        write_json(staging / "bundle.json", meta)
    return meta


@dataclass
class Bundle:
    """A loaded bundle: the model in eval mode on its device, its vocabularies, BPE codes and bundle.json."""
    path: Path
    model: object
    src_vocab: Vocab
    tgt_vocab: Vocab
    bpe: BPE
    meta: dict
    device: object

    @property
    def search(self) -> dict:
        """The decoding settings the workflow used for this model: `translate`'s defaults."""
        return self.meta["search"]

    def target_lm(self):
        """The n-gram LM of the training targets that the search reads (NPMT's), or None."""
        order = self.search["lm_order"]
        if not order:
            return None
        from .generate import target_lm
        return target_lm(str(self.path), order)

def load(path: str | Path, device: str = "auto", threads: int = 0) -> Bundle:
    """The bundle folder `path`, its model on `device` (`auto`: a GPU where there is one, else the CPU),
    torch on `threads` CPU threads (0: torch's default)."""
    path = Path(path)
    if not path.is_dir():
        raise InputError(f"{path}: not a model bundle (a folder holding {', '.join(FILES)}; "
                         "the workflow writes one a model in results/<scale>/bundle/)")
    if missing := [name for name in FILES if not (path / name).is_file()]:
        raise InputError(f"{path}: not a complete model bundle, {', '.join(missing)} missing")
    meta = read_json(path / "bundle.json")
    if meta.get("format") != FORMAT:
        raise InputError(f"{path}/bundle.json: format {meta.get('format')!r}, this nmtrepro reads {FORMAT!r}")
    device = runtime.setup(threads, device)
    src_vocab, tgt_vocab = Vocab.load_pair(path)
    model = checkpoint.load_model(path / "model.pt", device, {"src": src_vocab, "tgt": tgt_vocab}, path)
    return Bundle(path, model, src_vocab, tgt_vocab, BPE(path / "bpe.codes"), meta, device)


def add_arguments_bundle(parser) -> None:
    parser.add_argument("--model", required=True, help="model file (averaged or final)")
    parser.add_argument("--prepared", required=True, help="the prepared dataset it was trained on")
    parser.add_argument("--max-len", type=int, required=True,
                        help="prepare's max_len: the longest source (BPE pieces) training kept")
    for key, default in DEFAULTS.items():
        parser.add_argument(f"--{key.replace('_', '-')}", type=type(default), default=default,
                            help="the workflow's decoding setting, recorded as translate's default")
    parser.add_argument("--experiment", help="provenance: the experiment's name")
    parser.add_argument("--dataset", help="provenance: the dataset's name")
    parser.add_argument("--scale", help="provenance: the scale")
    parser.add_argument("--out", required=True, help="the bundle folder")


def run_bundle(args) -> None:
    search = {key: getattr(args, key) for key in DEFAULTS}
    write(args.model, args.prepared, args.out, search, args.max_len,
          {"experiment": args.experiment, "dataset": args.dataset, "scale": args.scale})

