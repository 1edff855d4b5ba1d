"""Build the `smoke` scale's download mirror: the paper scale's archives, in their real layout, holding
slices of the corpora that ship in data/ (README.md beside this file says which slice fills which file).

Run it from anywhere: `python data/smoke/build.py`. The archives are written byte-reproducibly (sorted
members, zeroed times and owners, gzip without a timestamp) into data/smoke/mirror/, and
workflow/downloads-smoke.yaml is written beside workflow/downloads.yaml: every entry a paper-scale run
fetches, under its name and with its kind of checksum (sha256 and size, md5, git blob id or trust on
first use), computed over the mirror's file. tests/test_smoke_mirror.py rebuilds both in a temporary
folder and compares them with the committed ones.
"""
from __future__ import annotations

import gzip
import hashlib
import io
import json
import sys
import tarfile
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "src"))

from nmtrepro.analyses.probing.tasks import derive  # noqa: E402
from nmtrepro.core.files import read_lines  # noqa: E402
from nmtrepro.data.trees import read_treebank  # noqa: E402

DATA = ROOT / "data"
MANIFEST = ROOT / "workflow" / "downloads.yaml"
N = 200  # lines per training file
PROBING_PER_SPLIT = {"tr": 200, "va": 50, "te": 50}


def lines(path: str, start: int, stop: int | None) -> list[str]:
    return read_lines(DATA / path)[start:stop]


def text(rows: list[str]) -> bytes:
    return "".join(row + "\n" for row in rows).encode("utf-8")


def gzipped(data: bytes) -> bytes:
    out = io.BytesIO()
    with gzip.GzipFile(fileobj=out, mode="wb", mtime=0, filename="") as handle:
        handle.write(data)
    return out.getvalue()


def tar(members: dict[str, bytes], compress: bool) -> bytes:
    """A tar archive of `members` whose bytes depend on their names and contents alone."""
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.GNU_FORMAT) as archive:
        for name in sorted(members):
            info = tarfile.TarInfo(name)
            info.size, info.mtime, info.mode = len(members[name]), 0, 0o644
            archive.addfile(info, io.BytesIO(members[name]))
    return gzipped(out.getvalue()) if compress else out.getvalue()


def multi30k(lang: str, start: int, stop: int) -> list[str]:
    return lines(f"multi30k/train.{lang}.gz", start, stop)


def europarl_like(prefix: str, start: int) -> dict[str, bytes]:
    """{prefix}.de-en.{en,de} and {prefix}.fr-en.{en,fr} from one Multi30k slice (the three languages align)."""
    return {f"{prefix}.{pair}.{lang}": text(multi30k(lang, start, start + N))
            for pair in ("de-en", "fr-en") for lang in pair.split("-")}


def sgm(rows: list[str], lang: str, side: str) -> bytes:
    body = "".join(f'<seg id="{i}">{row}</seg>\n' for i, row in enumerate(rows, 1))
    return (f'<{side}set setid="smoke" srclang="any" trglang="{lang}">\n<doc docid="smoke" genre="news">\n'
            f"{body}</doc>\n</{side}set>\n").encode("utf-8")


def tatoeba(split: str, lang: str, start: int, stop: int | None) -> list[str]:
    return lines(f"tatoeba-cmn/{split}.{lang}.gz", start, stop)


def iwslt14() -> dict[str, bytes]:
    """de-en/ as fairseq's de-en.tgz lays it out: TED-tagged training text and five XML dev/test sets."""
    members = {}
    for lang in ("de", "en"):
        talk = [f"<url>http://www.ted.com/talks/smoke{lang}</url>", "<talkid>1</talkid>",
                "<keywords>talks, smoke</keywords>", "<title>A smoke talk</title>",
                "<description>Slices of Multi30k in a TED archive's layout.</description>"]
        members[f"de-en/train.tags.de-en.{lang}"] = text(talk + multi30k(lang, 800, 800 + N))
        for k, name in enumerate(("IWSLT14.TED.dev2010", "IWSLT14.TEDX.dev2012", "IWSLT14.TED.tst2010",
                                  "IWSLT14.TED.tst2011", "IWSLT14.TED.tst2012")):
            segments = lines(f"multi30k/val.{lang}.gz", 20 * k, 20 * k + 20)
            members[f"de-en/{name}.de-en.{lang}.xml"] = (
                '<?xml version="1.0" encoding="UTF-8"?>\n<mteval>\n<doc docid="1">\n'
                + "".join(f'<seg id="{i}"> {row} </seg>\n' for i, row in enumerate(segments, 1))
                + "</doc>\n</mteval>\n").encode("utf-8")
    return members


def lingeval97() -> bytes:
    """lingeval97.json's shape from DistilLingEval's subject-verb set. DistilLingEval has no distance:
    the one given is the index of the first word where the contrastive variant differs, a placeholder
    that fills the distance bins, not a measurement."""
    folder = "distil-lingeval/subj_verb_agreement.mt"
    src, good, bad = (lines(f"{folder}/{name}.gz", 0, 100)
                      for name in ("src.en", "tgt.correct.de", "tgt.incorrect.de"))
    sentences = []
    for s, g, b in zip(src, good, bad):
        differs = next((i for i, (x, y) in enumerate(zip(g.split(), b.split())) if x != y), 0)
        sentences.append({"source": s, "reference": g,
                          "errors": [{"type": "subj_verb_agreement", "contrastive": b, "distance": differs}]})
    return json.dumps(sentences, ensure_ascii=False, indent=1).encode("utf-8")


def senteval() -> dict[str, bytes]:
    """SentEval's data/probing/<task>.txt format (split, label, sentence) from the PTB-derived tasks."""
    out = {}
    for task, examples in derive(read_treebank(DATA / "ptb-sample/treebank.zip")).items():
        kept = [ex for split, cap in PROBING_PER_SPLIT.items() for ex in [e for e in examples if e.split == split][:cap]]
        out[f"{task}.txt"] = text([f"{ex.split}\t{ex.label}\t{ex.sentence}" for ex in kept])
    return out


def files() -> dict[str, bytes]:
    """Every mirror file by its name (the real file's name, as the manifest's URL ends)."""
    nc9 = {f"training/news-commentary-v9.{pair}.{lang}": text(lines(f"wmt/newstest2012-{'src' if lang == 'en' else 'ref'}.{lang}.txt.gz", 0, N))
           for pair in ("de-en", "fr-en") for lang in pair.split("-")}
    out = {
        "training-parallel-europarl-v7.tgz": tar({f"training/{k}": v for k, v in europarl_like("europarl-v7", 0).items()}, True),
        "training-parallel-commoncrawl.tgz": tar(europarl_like("commoncrawl", N), True),
        "training-parallel-nc-v9.tgz": tar(nc9, True),
        "training-parallel-un.tgz": tar({f"un/undoc.2000.fr-en.{lang}": text(multi30k(lang, 2 * N, 3 * N))
                                         for lang in ("en", "fr")}, True),
        "training-giga-fren.tar": tar({f"giga-fren.release2.fixed.{lang}.gz": gzipped(text(multi30k(lang, 3 * N, 4 * N)))
                                       for lang in ("en", "fr")}, False),
        "training-parallel-nc-v12.tgz": tar({f"training/news-commentary-v12.zh-en.{lang}": text(tatoeba("train", lang, 0, N))
                                             for lang in ("zh", "en")}, True),
        "UNv1.0.en-zh.tar.gz": tar({f"en-zh/UNv1.0.en-zh.{lang}": text(tatoeba("train", lang, N, 2 * N))
                                    for lang in ("zh", "en")}, True),
        "dev.tgz": tar({"dev/newsdev2017-zhen-src.zh.sgm": sgm(tatoeba("valid", "zh", 0, 100), "zh", "src"),
                        "dev/newsdev2017-zhen-ref.en.sgm": sgm(tatoeba("valid", "en", 0, 100), "en", "ref")}, True),
        "test.tgz": tar({"test/newstest2017-zhen-src.zh.sgm": sgm(tatoeba("test", "zh", 0, 100), "zh", "src"),
                         "test/newstest2017-zhen-ref.en.sgm": sgm(tatoeba("test", "en", 0, 100), "en", "ref")}, True),
        "de-en.tgz": tar(iwslt14(), True),
        "lingeval97.json": lingeval97(),
    }
    out.update(senteval())
    return out


NIST_REFS = 4  # NIST's references per set: nist0X.en0 .. en3


def other_translations(split: str) -> list[list[str]]:
    """Per line of a Tatoeba split, the line's English and then every other English translation that
    Tatoeba gives its Chinese sentence in the split (the splits keep a sentence's pairs together), in
    file order."""
    zh, en = tatoeba(split, "zh", 0, None), tatoeba(split, "en", 0, None)
    by_zh: dict[str, list[str]] = {}
    for z, e in zip(zh, en):
        if e not in by_zh.setdefault(z, []):
            by_zh[z].append(e)
    return [[e] + [other for other in by_zh[z] if other != e] for z, e in zip(zh, en)]


def local_corpus() -> dict[str, bytes]:
    """The licensed NIST Zh-En folder's files (config `local_data`), from Tatoeba: train, NIST02-06 with
    four references each: en0 the line's own translation, en1..en3 the other Tatoeba translations of its
    Chinese sentence where there are any, else en0 again (most sentences have one)."""
    out = {f"train.{lang}": text(tatoeba("train", lang, 2 * N, 3 * N)) for lang in ("zh", "en")}
    translations = {split: other_translations(split) for split in ("valid", "test")}
    for k, name in enumerate(("nist02", "nist03", "nist04", "nist05", "nist06")):
        split = "valid" if name in ("nist02", "nist06") else "test"
        out[f"{name}.zh"] = text(tatoeba(split, "zh", 100 + 50 * k, 150 + 50 * k))
        rows = translations[split][100 + 50 * k:150 + 50 * k]
        for ref in range(NIST_REFS):
            out[f"{name}.en{ref}"] = text([row[ref] if ref < len(row) else row[0] for row in rows])
    return out


def fetched_at_paper_scale(mirror: dict[str, bytes]) -> set[str]:
    """The manifest entries a paper-scale run downloads: the datasets' archives, LingEval97, SentEval."""
    config = yaml.safe_load((ROOT / "config.yaml").read_text(encoding="utf-8"))
    names = {name for spec in config["datasets"].values() for name in spec.get("downloads", [])}
    return names | {"lingeval97"} | {f"senteval_{name[:-4]}" for name in mirror if name.endswith(".txt")}


def manifest(mirror: dict[str, bytes]) -> str:
    """The smoke manifest: each real entry whose file the mirror holds, with the mirror file's checksum
    of the same kind as the real one's."""
    out = ["# The `smoke` scale's download manifest, written by data/smoke/build.py: every entry of",
           "# workflow/downloads.yaml that a paper-scale run fetches, under the same name and with the same kind",
           "# of checksum, over the mirror's slice in data/smoke/mirror/ (data/smoke/README.md). A relative",
           "# file: URL is relative to this manifest's folder.", ""]
    fetched = fetched_at_paper_scale(mirror)
    for name, entry in yaml.safe_load(MANIFEST.read_text(encoding="utf-8")).items():
        if name not in fetched:
            continue
        filename = entry["url"].rsplit("/", 1)[-1]
        data = mirror[filename]
        sums = {"sha256": hashlib.sha256(data).hexdigest(), "md5": hashlib.md5(data).hexdigest(),
                "git_blob": hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest(), "size": len(data),
                "trust_on_first_use": "true"}
        out += [f"{name}:", f"  url: file:../data/smoke/mirror/{filename}"]
        out += [f"  {key}: {value}" for key, value in sums.items() if entry.get(key)]
        out += [f"  source: data/smoke/build.py, a slice standing in for {entry['url']}"]
    return "\n".join(out) + "\n"


def build(data_dir: Path, workflow_dir: Path) -> None:
    """The mirror into data_dir/smoke/mirror, the NIST folder into data_dir/smoke/ldc_zh_en, the manifest
    into workflow_dir/downloads-smoke.yaml."""
    mirror = files()
    for folder, contents in (("mirror", mirror), ("ldc_zh_en", local_corpus())):
        (data_dir / "smoke" / folder).mkdir(parents=True, exist_ok=True)
        for name, data in contents.items():
            (data_dir / "smoke" / folder / name).write_bytes(data)
    (workflow_dir / "downloads-smoke.yaml").write_text(manifest(mirror), encoding="utf-8")


if __name__ == "__main__":
    build(DATA, ROOT / "workflow")
