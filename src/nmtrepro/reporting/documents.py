"""What the claims pages and the tables share in reading their `--inputs` document (claims_inputs.py,
table_inputs.py): the JSON object, its keys, its parts' types, each refused naming its key.

What crosses from the workflow into a reporting command crosses as one document the command reads with
one function, not as parallel flags keyed by the same names; these are that function's checks.
"""
from __future__ import annotations

import json

from ..core.files import InputError


def read_document(text: str, keys: tuple[str, ...]) -> dict:
    """The document's object, its keys among `keys` (the first, its main part, named in the error)."""
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as err:
        raise InputError(f"--inputs is not valid JSON: {err}") from None
    if not isinstance(doc, dict):
        raise InputError(f"--inputs wants an object {{\"{keys[0]}\": ...}}, got {doc!r}")
    unknown = sorted(set(doc) - set(keys))
    if unknown:
        raise InputError(f"--inputs: unknown key(s) {unknown}; it has {list(keys)}")
    return doc


def typed(value, kind, key: str, what: str):
    """`value`, the document's part at `key`, if it is a `kind`; else an error saying it wants `what`."""
    if not isinstance(value, kind):
        raise InputError(f"--inputs {key}: wants {what}, got {value!r}")
    return value


def paths(value, key: str) -> dict[str, str]:
    """A {NAME: JSON} of the document (a pool, a scale's claims)."""
    typed(value, dict, key, "an object {NAME: JSON path}")
    for name, path in value.items():
        typed(path, str, f"{key}.{name}", "a JSON path")
    return value


def notes(doc: dict) -> list[str]:
    """The document's paragraphs under the page or table (`notes`, none where left out)."""
    found = typed(doc.get("notes", []), list, "notes", "a list of paragraphs")
    for n, note in enumerate(found):
        typed(note, str, f"notes[{n}]", "a paragraph")
    return found
