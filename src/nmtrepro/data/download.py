"""Full-scale downloads: fetch a manifest entry into a shared cache, verify it, resume it, extract it.

The manifest (workflow/downloads.yaml) names every public file the study needs with its URL and a
checksum taken from a published source: a sha256 or md5 its owner published, or the git blob id GitHub
shows for a file at a pinned commit (SHA-1 of `blob <size>\0` + the bytes, what `git hash-object`
prints). A file with no checksum published anywhere is marked `trust_on_first_use`: its first download
records its SHA-256 in the cache (`<cache>/first-use/<name>.json`) and every later fetch is checked
against that record, so the bytes cannot change between runs unnoticed, and the download log and record
say that the checksum is our own. An entry with neither (one a user adds) is refused unless the user sets
`allow_unverified`, so a changed or hijacked upstream file never silently enters a result. Downloads go
to `<cache>/<name>/<file>.part` and are resumed with an HTTP Range request after a cut connection (within
a call, and again when Snakemake's `retries:` reruns the rule); only a verified file is renamed to its
final name. Archives are extracted once, beside the archive in the cache, so every dataset and every
later run shares them.
"""
from __future__ import annotations

import gzip
import hashlib
import http.client
import logging
import os
import shutil
import tarfile
import time
import urllib.error
import urllib.parse
import urllib.request
import zipfile
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

import yaml

from ..core.files import InputError, atomic_dir, file_digest, read_json, require_file, write_json

log = logging.getLogger("nmtrepro.data.download")

COMMANDS = {  # `nmtrepro` commands of this module (cli.declared_commands)
    "download": "fetch one download-manifest entry into the cache, verified and extracted",
}

DEFAULT_CACHE = "~/.cache/nmtrepro"
CHUNK = 1 << 20
TIMEOUT_S = 60
BACKOFF_S = 5  # seconds before attempt n+1, times n
# Errors after which a partial download is worth resuming: the connection, not the request, failed.
TRANSIENT = (http.client.IncompleteRead, ConnectionError, TimeoutError, urllib.error.URLError)
# The checksums a manifest entry may name, in the order preferred when it names several; hex digits each.
CHECKSUMS = {"sha256": 64, "md5": 32, "git_blob": 40}


@dataclass(frozen=True)
class Resource:
    name: str
    url: str
    sha256: str | None = None
    md5: str | None = None
    git_blob: str | None = None
    trust_on_first_use: bool = False
    size: int | None = None
    source: str = ""
    base: str = ""  # the manifest's folder, which a relative `file:` URL (a local mirror) is relative to

    @property
    def fetch_url(self) -> str:
        """The URL to open: `url`, with a relative `file:` path (the smoke scale's mirror of slices)
        resolved against the manifest's folder. The `url` as written stays the resource's identity, in
        messages and a first-use record, so a moved checkout still matches its records."""
        if self.url.startswith("file:") and not self.url.startswith("file:/"):
            return (Path(self.base) / self.url.removeprefix("file:")).resolve().as_uri()
        return self.url

    @property
    def filename(self) -> str:
        return self.url.rstrip("/").rsplit("/", 1)[-1].split("?", 1)[0]

    @property
    def checksum(self) -> tuple[str, str] | None:
        """(algorithm, hex digest) as published, or None when no checksum is published."""
        return next(((key, getattr(self, key)) for key in CHECKSUMS if getattr(self, key)), None)


def load_manifest(path: str | os.PathLike) -> dict[str, Resource]:
    entries = yaml.safe_load(require_file(path).read_text(encoding="utf-8")) or {}
    fields = set(Resource.__dataclass_fields__) - {"name", "base"}
    out = {}
    for name, entry in entries.items():
        unknown = set(entry) - fields
        if "url" not in entry or unknown:
            raise InputError(f"{path}: entry {name!r} needs a url and takes only {sorted(fields)}; "
                             f"got {sorted(entry)}")
        for key, digits in CHECKSUMS.items():
            value = entry.get(key)
            if value is not None and not isinstance(value, str):
                raise InputError(f"{path}: entry {name!r}: {key} must be a quoted string, not the "
                                 f"{type(value).__name__} {value!r} (YAML reads an unquoted all-digit "
                                 "checksum as a number)")
            if value is not None and (len(value) != digits or value.strip("0123456789abcdef")):
                raise InputError(f"{path}: entry {name!r}: {key} must be {digits} lower-case hex digits, "
                                 f"got {value!r}")
        if entry.get("trust_on_first_use") and any(entry.get(key) for key in CHECKSUMS):
            raise InputError(f"{path}: entry {name!r} has a published checksum, so trust_on_first_use "
                             "must go (it is only for files nobody published a checksum of)")
        out[name] = Resource(name=name, base=str(Path(path).parent), **{k: v for k, v in entry.items() if k in fields})
    return out


def is_offline(flag: bool = False) -> bool:
    return flag or os.environ.get("NMTREPRO_OFFLINE", "") not in ("", "0")


def cache_root(path: str | None) -> Path:
    return Path(os.path.expanduser(path or DEFAULT_CACHE))


def archive_path(resource: Resource, cache: Path) -> Path:
    return cache / resource.name / resource.filename


def digest(path: Path, algorithm: str) -> str:
    """The hex digest of a file; `git_blob` is git's object id of it (SHA-1 over `blob <size>\0` + bytes)."""
    if algorithm != "git_blob":
        return file_digest(path, algorithm)
    blob = hashlib.sha1(b"blob %d\0" % path.stat().st_size)
    with open(path, "rb") as handle:
        return hashlib.file_digest(handle, lambda: blob).hexdigest()


def first_use_path(resource: Resource, cache: Path) -> Path:
    """The record of a trust-on-first-use file's SHA-256, beside (not inside) its own cache folder, so
    clearing the folder to download again still checks the new bytes against the first ones."""
    return cache / "first-use" / f"{resource.name}.json"


def first_use_record(resource: Resource, cache: Path) -> dict | None:
    """The SHA-256 recorded at the first download of a trust-on-first-use file, or None before it."""
    path = first_use_path(resource, cache)
    if not resource.trust_on_first_use or not path.is_file():
        return None
    try:
        record = read_json(path)
    except ValueError:
        record = None
    if not isinstance(record, dict) or not {"url", "sha256", "recorded"} <= set(record):
        raise InputError(f"{path}: not a first-use record (url, sha256, recorded); delete it to record the "
                         f"next download of {resource.name} afresh")
    if record["url"] != resource.url:
        raise InputError(f"{path}: the SHA-256 was recorded for {record['url']}, but the manifest now names "
                         f"{resource.url}; delete the record to trust the new URL's first download")
    return record


def expected_checksum(resource: Resource, cache: Path) -> tuple[str, str] | None:
    """What a file is checked against: its published checksum, or the SHA-256 recorded at first use."""
    record = first_use_record(resource, cache)
    return ("sha256", record["sha256"]) if record else resource.checksum


def provenance(resource: Resource, cache: Path) -> str:
    """Where the checksum a file was verified against comes from, for the download log and record."""
    record = first_use_record(resource, cache)
    if record:
        return f"no published checksum; SHA-256 recorded at first download on {record['recorded']}"
    if resource.checksum:
        return f"{resource.checksum[0]} published: {resource.source or 'source not named'}"
    return "no published checksum; accepted unverified (allow_unverified)"


def _stamp(path: Path, checksum: tuple[str, str] | None) -> str:
    stat = path.stat()
    return f"{stat.st_size} {stat.st_mtime_ns} {checksum}"


def _already_verified(path: Path, checksum: tuple[str, str] | None) -> bool:
    """A cached file verified earlier against the same checksum and unchanged since, so not hashed again."""
    marker = path.with_name(path.name + ".verified")
    return path.is_file() and marker.is_file() and marker.read_text() == _stamp(path, checksum)


def _transfer(resource: Resource, part: Path) -> None:
    """One HTTP request appending to `part`, resuming from its current size with a Range request."""
    have = part.stat().st_size if part.exists() else 0
    request = urllib.request.Request(resource.fetch_url, headers={"User-Agent": "nmtrepro"})
    if have:
        request.add_header("Range", f"bytes={have}-")
    try:
        response = urllib.request.urlopen(request, timeout=TIMEOUT_S)
    except urllib.error.HTTPError as err:
        if err.code == 416 and have:  # the partial file is already whole
            return
        if err.code >= 500:  # the server's trouble, not the request's: worth another attempt
            raise ConnectionError(f"HTTP {err.code} {err.reason}") from None
        raise InputError(f"download of {resource.name} failed: HTTP {err.code} {err.reason} "
                         f"for {resource.url}") from None
    except urllib.error.URLError as err:
        if urllib.parse.urlsplit(resource.url).scheme == "file":  # a local mirror: no connection to retry
            raise InputError(f"download of {resource.name} failed: {err.reason} for {resource.fetch_url}") from None
        raise
    with response:
        resumed = have and response.status == 206
        if have and not resumed:
            log.info("%s: server ignored the Range request; starting over", resource.name)
        with open(part, "ab" if resumed else "wb") as out:
            shutil.copyfileobj(response, out, CHUNK)
        expected = response.headers.get("Content-Length")
        if expected is not None and part.stat().st_size - (have if resumed else 0) < int(expected):
            raise http.client.IncompleteRead(b"", int(expected))


def _verify(resource: Resource, path: Path, cache: Path, allow_unverified: bool) -> None:
    if resource.size is not None and path.stat().st_size != resource.size:
        raise InputError(f"size mismatch for {resource.url}: {path.stat().st_size} bytes, "
                         f"manifest says {resource.size}")
    expected = expected_checksum(resource, cache)
    if expected is None and resource.trust_on_first_use:
        _record_first_use(resource, path, cache)
        return
    if expected is None:
        if not allow_unverified:  # checked before downloading too; kept here for files placed by hand
            raise InputError(_unverified_message(resource))
        log.warning("%s: no published checksum; sha256 of the download is %s", resource.name,
                    file_digest(path, "sha256"))
        return
    algorithm, want = expected
    actual = digest(path, algorithm)
    if actual != want:
        said = ("the first download's record " + str(first_use_path(resource, cache))
                if resource.trust_on_first_use else "manifest")
        raise InputError(f"checksum mismatch for {resource.url}: {algorithm} {actual}, {said} says {want}")


def _record_first_use(resource: Resource, path: Path, cache: Path) -> None:
    record = {"name": resource.name, "url": resource.url, "sha256": file_digest(path, "sha256"),
              "size": path.stat().st_size, "recorded": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")}
    write_json(first_use_path(resource, cache), record)
    log.warning("%s: no published checksum; SHA-256 %s recorded at first download on %s in %s; every later "
                "fetch is checked against it", resource.name, record["sha256"], record["recorded"],
                first_use_path(resource, cache))


def _unverified_message(resource: Resource) -> str:
    return (f"{resource.name} ({resource.url}) has no published checksum in the download manifest (nor "
            "trust_on_first_use); set allow_unverified: true to accept it on trust (its sha256 is logged so it "
            "can be recorded)")


def fetch(resource: Resource, cache: Path, offline: bool = False, allow_unverified: bool = False,
          attempts: int = 3) -> Path:
    """The verified archive in the cache, downloading (and resuming) it if needed."""
    final = archive_path(resource, cache)
    if _already_verified(final, expected_checksum(resource, cache)):
        return final
    if final.is_file():
        _verify(resource, final, cache, allow_unverified)
    else:
        if offline and not resource.url.startswith("file:"):  # a local mirror needs no network
            raise InputError(f"offline: {resource.name} is not in the cache; needed {final} from {resource.url}")
        if resource.checksum is None and not resource.trust_on_first_use and not allow_unverified:
            raise InputError(_unverified_message(resource))
        final.parent.mkdir(parents=True, exist_ok=True)
        part = final.with_name(final.name + ".part")
        for attempt in range(1, attempts + 1):
            try:
                _transfer(resource, part)
                break
            except TRANSIENT as err:
                log.warning("%s: attempt %d/%d interrupted (%s); %d bytes kept", resource.name, attempt,
                            attempts, err, part.stat().st_size if part.exists() else 0)
                if attempt == attempts:
                    raise InputError(f"download of {resource.url} was interrupted {attempts} times; the partial "
                                     f"file {part} is kept and the next run resumes it") from None
                time.sleep(BACKOFF_S * attempt)
        try:
            _verify(resource, part, cache, allow_unverified)
        except InputError as err:
            part.unlink()
            raise InputError(f"{err}; the download was removed") from None
        os.replace(part, final)
    final.with_name(final.name + ".verified").write_text(_stamp(final, expected_checksum(resource, cache)))
    log.info("%s: verified %s", resource.name, final)
    return final


def extract(archive: Path, dest: Path) -> Path:
    """Unpack a tar/tgz/zip (or gunzip a .gz) into `dest` once, atomically as a folder; other files are copied."""
    if dest.is_dir():
        return dest
    with atomic_dir(dest) as staging:
        name = archive.name
        if tarfile.is_tarfile(archive):
            with tarfile.open(archive) as tar:
                tar.extractall(staging, filter="data")  # refuses absolute paths and links out of the folder
        elif zipfile.is_zipfile(archive):
            with zipfile.ZipFile(archive) as zf:
                zf.extractall(staging)
        elif name.endswith(".gz"):
            with gzip.open(archive, "rb") as src, open(staging / name[:-3], "wb") as out:
                shutil.copyfileobj(src, out, CHUNK)
        else:
            shutil.copy2(archive, staging / name)
    return dest


def ensure(resource: Resource, cache: Path, **options) -> Path:
    """The extracted folder of a verified resource (named by its checksum, so a new version never mixes in)."""
    archive = fetch(resource, cache, **options)
    log.info("%s: checksum: %s", resource.name, provenance(resource, cache))  # in every run's log, cached or not
    checksum = expected_checksum(resource, cache)
    version = checksum[1][:12] if checksum else "unverified"
    return extract(archive, archive.parent / f"extracted-{version}")


def manifest_entries(names: list[str], manifest: dict[str, Resource]) -> list[Resource]:
    """The manifest's entries of these names; an unknown one is an error naming it."""
    unknown = [n for n in names if n not in manifest]
    if unknown:
        raise InputError(f"not in the download manifest: {', '.join(unknown)}")
    return [manifest[n] for n in names]


def require_cached(resources: list[Resource], cache: Path) -> None:
    """Offline, every entry must be in the cache or a local mirror (`file:`): all that would need the
    network are named at once, before anything runs."""
    missing = [f"{r.name} ({r.url} -> {archive_path(r, cache)})" for r in resources
               if not archive_path(r, cache).is_file() and not r.url.startswith("file:")]
    if missing:
        raise InputError("offline (NMTREPRO_OFFLINE or config offline: true) and not in the cache "
                         f"{cache}:\n  " + "\n  ".join(missing) + "\nfetch them where there is a network (into "
                         "the same download_cache), or set offline: false")


def ensure_all(names: list[str], manifest: dict[str, Resource], cache: Path, offline: bool = False,
               **options) -> dict[str, Path]:
    """Extracted folders by name; offline, every missing file is named at once before anything runs."""
    resources = manifest_entries(names, manifest)
    if offline:
        require_cached(resources, cache)
    return {r.name: ensure(r, cache, offline=offline, **options) for r in resources}


def add_download_options(parser) -> None:
    """Options shared by `download` and `fetch`."""
    parser.add_argument("--manifest", default="workflow/downloads.yaml", help="download manifest (YAML)")
    parser.add_argument("--cache", help=f"download cache shared across runs (default {DEFAULT_CACHE})")
    parser.add_argument("--offline", action="store_true", help="never touch the network (also NMTREPRO_OFFLINE=1)")
    parser.add_argument("--allow-unverified", action="store_true",
                        help="accept files the manifest gives no checksum (and no trust_on_first_use)")
    parser.add_argument("--attempts", type=int, default=3, help="resumed attempts within one call")


def download_options(args) -> dict:
    return {"offline": is_offline(args.offline), "allow_unverified": args.allow_unverified,
            "attempts": args.attempts}


def add_arguments_download(parser) -> None:
    parser.add_argument("--name", required=True, help="manifest entry to fetch")
    parser.add_argument("--out", required=True, help="JSON record: archive, extracted folder, checksum")
    add_download_options(parser)


def run_download(args) -> None:
    manifest, cache = load_manifest(args.manifest), cache_root(args.cache)
    folder = ensure_all([args.name], manifest, cache, **download_options(args))[args.name]
    resource = manifest[args.name]
    checksum = expected_checksum(resource, cache)
    write_json(args.out, {"name": args.name, "url": resource.url, "archive": str(archive_path(resource, cache)),
                          "extracted": str(folder), "checksum": checksum and list(checksum),
                          "checksum_source": provenance(resource, cache)})
