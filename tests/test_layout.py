"""Package layout: a stage imports only its own stage and the stages below it, and no modules import each
other in a cycle. Every import counts, also the ones inside functions (a lazy import is still a dependency).
"""
from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import nmtrepro

PACKAGE = Path(nmtrepro.__file__).parent
# Lowest first. The study (the resolved config) reads the options of the stages below it; planning reads the
# study; cli sits on top of every stage, with the fork server (forks/), which runs cli's commands as cli
# hands them to it: its room counts as the top's own.
STAGES = ["core", "data", "models", "training", "evaluation", "study", "planning", "reporting", "analyses", "top"]
TOP_ROOMS = {"forks"}


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def stage(module: str) -> str:
    parts = module.split(".")
    if len(parts) > 1 and parts[1] in TOP_ROOMS:
        return "top"
    return parts[1] if len(parts) > 2 or (len(parts) == 2 and parts[1] in STAGES) else "top"


MODULES = {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def imports(module: str) -> set[str]:
    """The package's modules that `module` imports, relative imports resolved."""
    path = MODULES[module]
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[:len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            # `from pkg import mod` imports the module pkg.mod; `from mod import name` imports mod
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in MODULES else base for a in node.names]
        else:
            continue
        found |= {t for t in targets if t in MODULES and t != module}
    return found


GRAPH = {module: imports(module) for module in MODULES}


def test_stages_import_only_their_own_stage_or_lower_ones():
    wrong = [f"{module} ({stage(module)}) imports {target} ({stage(target)})"
             for module, targets in GRAPH.items() for target in sorted(targets)
             if STAGES.index(stage(target)) > STAGES.index(stage(module))]
    assert not wrong, "imports from a higher stage:\n" + "\n".join(wrong)


def test_modules_import_each_other_in_no_cycle():
    def cycle_from(start: str) -> list[str] | None:
        """A path start -> ... -> start, depth first, or None."""
        stack, seen = [(start, [start])], set()
        while stack:
            node, path = stack.pop()
            for target in sorted(GRAPH[node]):
                if target == start:
                    return path + [start]
                if target not in seen:
                    seen.add(target)
                    stack.append((target, path + [target]))
        return None

    cycles = [" -> ".join(c) for c in map(cycle_from, sorted(GRAPH)) if c]
    assert not cycles, "import cycles:\n" + "\n".join(cycles)


def test_the_layout_check_sees_relative_lazy_and_package_imports():
    """Guards the checks above against passing because they saw nothing."""
    assert "nmtrepro.core.files" in GRAPH["nmtrepro.cli"]                        # from .core.files import
    assert "nmtrepro.data.nlp" in GRAPH["nmtrepro.analyses.contrastive"]          # lazy, from ..data import nlp
    assert stage("nmtrepro.planning.plan") == "planning" and stage("nmtrepro.analyses.probing.tasks") == "analyses"
    assert stage("nmtrepro.models") == "models" and stage("nmtrepro.study") == "study"
    assert stage("nmtrepro.cli") == "top" and stage("nmtrepro.forks.server") == "top"
    assert "nmtrepro.study.config" in GRAPH["nmtrepro.planning.plan"]             # from ..study.config import


def test_every_module_in_models_is_imported_with_the_registry():
    """A new family is one new file in models/: importing the registry imports (registers) it. It does
    not import sacremoses, whose import (~0.3 s) every training, averaging and decoding job paid."""
    script = "import sys, nmtrepro.models; print(' '.join(sys.modules))"
    loaded = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stdout.split()
    files = {f"nmtrepro.models.{p.stem}" for p in (PACKAGE / "models").glob("*.py") if p.stem != "__init__"}
    assert files <= set(loaded), f"not imported by nmtrepro.models: {sorted(files - set(loaded))}"
    assert "sacremoses" not in loaded
