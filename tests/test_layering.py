"""The package layout of docs/architecture.md, checked: imports run one way, no circles, no facades, no long modules.

Layers, bottom to top (a module may import its own layer and the ones below, never one above):

0. foundation: ``deviate_cb`` itself, ``errors``, ``context``, ``variants``, and ``stats`` (pure maths)
1. files and facts: ``store``, ``fingerprint``, ``profiling``
2. ``capture`` (what the adapters drive) and ``audit.recording`` (the audit's side inside a replica)
3. ``launch``, ``report``, ``audit``, ``bench``, ``trackers``; inside ``report``, its wings run
   ``text`` < ``reading`` < ``answers`` < ``rendering`` < the package's top (``__init__``, ``study``)
4. ``cli`` and the framework adapters ``lightning``, ``keras`` and ``transformers``
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.helpers.import_graph import Edge, import_cycles, import_edges, module_files

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = "deviate_cb"

LAYERS = {
    "deviate_cb": 0,
    "deviate_cb.errors": 0,
    "deviate_cb.context": 0,
    "deviate_cb.variants": 0,
    "deviate_cb.stats": 0,
    "deviate_cb.store": 1,
    "deviate_cb.fingerprint": 1,
    "deviate_cb.profiling": 1,
    "deviate_cb.capture": 2,
    "deviate_cb.launch": 3,
    "deviate_cb.audit": 3,
    "deviate_cb.audit.recording": 2,  # runs inside the replica, beside capture
    "deviate_cb.report": 3,
    "deviate_cb.bench": 3,
    "deviate_cb.trackers": 3,
    "deviate_cb.cli": 4,
    "deviate_cb.lightning": 4,
    "deviate_cb.keras": 4,
    "deviate_cb.transformers": 4,
}
# What the root of the package may hold besides subpackages (the issue that set the layout lists them).
ROOT_MODULES = {"__init__.py", "lightning.py", "keras.py", "transformers.py", "errors.py", "context.py", "variants.py"}
# Modules whose job is to present names defined elsewhere: package __init__ files, and the adapters, whose
# users pass Predictions/Weights/ProfileWindow to the callback they import from there.
PRESENTERS = {"deviate_cb.lightning", "deviate_cb.keras", "deviate_cb.transformers"}


def layer_of(module: str, layers: dict[str, int] = LAYERS) -> int | None:
    """The layer of the longest entry of ``layers`` that is ``module`` or a package holding it."""
    parts = module.split(".")
    for k in range(len(parts), 0, -1):
        prefix = ".".join(parts[:k])
        if prefix in layers:
            return layers[prefix]
    return None


def upward_imports(edges: list[Edge], layers: dict[str, int] = LAYERS) -> list[str]:
    """One line per import of a higher layer by a lower one."""
    found = []
    for edge in edges:
        low, high = layer_of(edge.importer, layers), layer_of(edge.imported, layers)
        if low is not None and high is not None and high > low:
            found.append(
                f"{edge.path.relative_to(ROOT) if edge.path.is_relative_to(ROOT) else edge.path}:{edge.line}: "
                f"{edge.importer} (layer {low}) imports {edge.imported} (layer {high})"
            )
    return found


def reexported_names(path: Path) -> list[str]:
    """Names in a module's ``__all__`` that it does not define itself (it only imports them)."""
    tree = ast.parse(path.read_text())
    defined: set[str] = set()
    exported: list[str] = []
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            defined.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                if isinstance(target, ast.Name):
                    defined.add(target.id)
                    if target.id == "__all__" and isinstance(node.value, (ast.List, ast.Tuple)):
                        exported = [e.value for e in node.value.elts if isinstance(e, ast.Constant)]
    return [name for name in exported if name not in defined]


# --- the checks on a package made to break them: each must find what is wrong ---------------------------------


@pytest.fixture
def broken_package(tmp_path: Path) -> Path:
    pkg = tmp_path / "demo"
    (pkg / "low").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "low" / "__init__.py").write_text("")
    (pkg / "low" / "core.py").write_text("def f():\n    from demo.high import g\n    return g\n")
    (pkg / "high.py").write_text("from demo.low.core import f\n\ndef g():\n    return f\n")
    (pkg / "facade.py").write_text("from demo.high import g\n\n__all__ = ['g']\n")
    return tmp_path


def test_checks_find_an_upward_import_a_circle_and_a_facade(broken_package: Path) -> None:
    edges = import_edges(broken_package, "demo")
    layers = {"demo": 0, "demo.low": 0, "demo.high": 1, "demo.facade": 1}
    found = upward_imports(edges, layers)
    assert len(found) == 1 and "demo.low.core (layer 0) imports demo.high (layer 1)" in found[0]
    assert found[0].endswith("(layer 1)") and ":2:" in found[0]  # the line of the import inside f
    assert import_cycles(edges) == [["demo.high", "demo.low.core"]]
    assert reexported_names(broken_package / "demo" / "facade.py") == ["g"]
    assert reexported_names(broken_package / "demo" / "high.py") == []


def test_relative_imports_resolve_to_modules(tmp_path: Path) -> None:
    pkg = tmp_path / "demo"
    (pkg / "sub").mkdir(parents=True)
    for name in ("__init__.py", "sub/__init__.py", "base.py"):
        (pkg / name).write_text("")
    (pkg / "sub" / "mod.py").write_text("from .. import base\nfrom ..base import x\nimport demo.sub\n")
    imported = {(e.importer, e.imported) for e in import_edges(tmp_path, "demo")}
    assert imported == {("demo.sub.mod", "demo.base"), ("demo.sub.mod", "demo.sub")}


# --- the checks on deviate_cb -----------------------------------------------------------------------------------


def test_every_module_has_a_layer() -> None:
    unplaced = [m for m in module_files(ROOT, PACKAGE) if layer_of(m) is None]
    where = "tests/test_layering.py and docs/architecture.md"
    assert unplaced == [], f"place these modules in a layer ({where}): {unplaced}"


def test_imports_run_one_way() -> None:
    found = upward_imports(import_edges(ROOT, PACKAGE))
    assert found == [], "imports against the layering of docs/architecture.md:\n" + "\n".join(found)


# Packages of one layer that must not import each other: a report reads the store, never the launcher.
FORBIDDEN = [("deviate_cb.report", "deviate_cb.launch")]


def forbidden_imports(edges: list[Edge], pairs: list[tuple[str, str]] = FORBIDDEN) -> list[str]:
    """One line per import by a module of a pair's first package of a module of its second."""
    return [
        f"{edge.importer} imports {edge.imported} (line {edge.line})"
        for edge in edges
        for importer, imported in pairs
        if _inside(edge.importer, importer) and _inside(edge.imported, imported)
    ]


def _inside(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def test_forbidden_pairs_do_not_import_each_other() -> None:
    found = forbidden_imports(import_edges(ROOT, PACKAGE))
    assert found == [], "imports between packages kept apart:\n" + "\n".join(found)


# report/'s wings, bottom to top: each imports its own wing and those below, never the package's top (its
# __init__ and study.py, which compose the three for Python and notebooks).
REPORT_WINGS = {
    "deviate_cb.report.text": 0,
    "deviate_cb.report.reading": 1,
    "deviate_cb.report.answers": 2,
    "deviate_cb.report.rendering": 3,
    "deviate_cb.report": 4,
}


def test_report_wings_import_down() -> None:
    edges = [
        edge
        for edge in import_edges(ROOT, PACKAGE)
        if _inside(edge.importer, "deviate_cb.report") and _inside(edge.imported, "deviate_cb.report")
    ]
    assert edges, "no import inside report/ found: the check reads nothing"
    found = upward_imports(edges, REPORT_WINGS)
    assert found == [], "report/ wings importing a wing above them:\n" + "\n".join(found)


def test_every_report_module_is_in_a_wing() -> None:
    top = {"deviate_cb.report", "deviate_cb.report.study"}
    outside = [m for m in module_files(ROOT, PACKAGE) if _inside(m, "deviate_cb.report") and m not in top]
    outside = [m for m in outside if layer_of(m, REPORT_WINGS) == REPORT_WINGS["deviate_cb.report"]]
    assert outside == [], f"report/ modules outside text/, reading/, answers/, rendering/: {outside}"


def test_no_import_circle() -> None:
    assert import_cycles(import_edges(ROOT, PACKAGE)) == []


def test_root_holds_only_the_adapters_the_foundation_and_subpackages() -> None:
    root = ROOT / PACKAGE
    files = {p.name for p in root.iterdir() if p.is_file() and p.suffix == ".py"}
    extra = files - ROOT_MODULES
    assert not extra, f"modules at the root of {PACKAGE}/ that belong in a subpackage: {sorted(extra)}"
    for folder in (p for p in root.iterdir() if p.is_dir() and p.name != "__pycache__"):
        assert (folder / "__init__.py").is_file(), f"{folder.name}/ is not a package"


def test_no_module_name_repeats_a_prefix_of_its_neighbours() -> None:
    repeated = []
    for folder in [ROOT / PACKAGE, *(p for p in (ROOT / PACKAGE).rglob("*") if p.is_dir())]:
        names = [p.stem for p in folder.iterdir() if p.suffix == ".py" and not p.stem.startswith("__")]
        names += [p.name for p in folder.iterdir() if p.is_dir() and (p / "__init__.py").is_file()]
        prefixes: dict[str, list[str]] = {}
        for name in names:
            if "_" in name.strip("_"):
                prefixes.setdefault(name.strip("_").split("_")[0], []).append(name)
        for prefix, members in prefixes.items():
            clash = sorted({*members, *(n for n in names if n.strip("_") == prefix)})
            if len(clash) > 1:
                repeated.append(f"{folder.relative_to(ROOT)}: {clash}")
    assert repeated == [], "a repeated prefix is a folder waiting to exist: " + "; ".join(repeated)


def test_only_package_inits_and_the_adapters_present_names_from_elsewhere() -> None:
    facades = {}
    for module, path in module_files(ROOT, PACKAGE).items():
        if path.name == "__init__.py" or module in PRESENTERS:
            continue
        names = reexported_names(path)
        if names:
            facades[module] = names
    assert facades == {}, f"import these from the modules that define them: {facades}"


MAX_MODULE_LINES = 500  # issue 46: a module of one responsibility fits in 100-400 lines; past 500 it is two


def long_modules(root: Path, limit: int = MAX_MODULE_LINES) -> list[str]:
    """One line per module under ``root`` longer than ``limit`` lines."""
    found = []
    for path in sorted(root.rglob("*.py")):
        lines = len(path.read_text().splitlines())
        if lines > limit:
            found.append(f"{path.relative_to(root.parent)}: {lines} lines (at most {limit})")
    return found


def test_long_modules_finds_a_long_one(tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "short.py").write_text("x = 1\n" * 10)
    (package / "long.py").write_text("x = 1\n" * 12)
    assert long_modules(package, limit=11) == ["pkg/long.py: 12 lines (at most 11)"]


def test_no_module_over_500_lines() -> None:
    assert long_modules(ROOT / PACKAGE) == []
