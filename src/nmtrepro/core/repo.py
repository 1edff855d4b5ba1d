"""Which commit made a result: git asked where there is one, so that what leaves a run (a claims export, a
model bundle) says the code it came from."""
from __future__ import annotations

import subprocess
from pathlib import Path


def git(args: list[str], cwd: str | Path = ".") -> str | None:
    """git's output, or None where there is no git or no repository (an unpacked tarball)."""
    try:
        done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def commit(cwd: str | Path = ".") -> str:
    """The checkout's short commit, `-dirty` where tracked files differ from it; "unknown" outside git."""
    found = git(["rev-parse", "--short=10", "HEAD"], cwd) or "unknown"
    return found + ("-dirty" if git(["status", "--porcelain", "--untracked-files=no"], cwd) else "")
