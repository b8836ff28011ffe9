"""The packages' layers, read from the source with ast (nothing is imported): no module
imports a package above its own, lazy imports inside functions included, and no two
packages import each other. docs/architecture.md draws the same order."""

from __future__ import annotations

import ast
from pathlib import Path

import mad_eval

PACKAGE = Path(mad_eval.__file__).resolve().parent

# Bottom to top. A module may import its own package and any layer below it; the packages
# of one layer are independent of each other. A top-level module is its own package.
LAYERS: list[set[str]] = [
    {"errors", "sanitize", "words", "children"},
    {"foreign"},  # files from others, read within bounds
    {"records", "progress"},
    {"registry"},  # the one registry of every extension point
    {"grading"},  # answers, kinds, the verifier: pure functions of text
    {"voting"},  # answer groups, scoring rules, maj@K estimators
    {"settings"},  # config, keywords, roster, templates
    {"data"},  # benchmarks and the hub
    {"store"},  # the run folder
    {"backends"},
    {"serving"},  # vllm serve processes mad-eval starts and stops
    {"protocols"},  # who reads whom, who votes
    {"debate"},  # engine, plan, execute, prompts, context, replay
    {"judging"},
    {"measure"},
    {"reporting"},
    {"training", "experiments", "viewer"},
    {"tracking"},  # runs sent to W&B, MLflow: reads reporting's numbers and the viewer's site
    {"api"},
    {"cli"},
    {"__init__", "__main__"},  # the package itself: mad_eval.api's calls, python -m mad_eval
]
LEVEL = {package: level for level, packages in enumerate(LAYERS) for package in packages}


def package_of(module: str) -> str:
    """mad_eval.debate.engine -> debate; mad_eval.api -> api; mad_eval -> __init__."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def modules() -> dict[str, Path]:
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = ["mad_eval", *path.relative_to(PACKAGE).with_suffix("").parts]
        if parts[-1] == "__init__" and len(parts) > 1:
            parts = parts[:-1]
        name = ".".join(parts) if path.name != "__main__.py" else "mad_eval.__main__"
        found[name] = path
    return found


def _type_checking_only(tree: ast.Module) -> set[int]:
    """Lines of imports under `if TYPE_CHECKING:`: they never run, so they may point up."""
    lines = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and ast.unparse(node.test).endswith("TYPE_CHECKING"):
            for inner in node.body:
                lines.update(range(inner.lineno, (inner.end_lineno or inner.lineno) + 1))
    return lines


def imports(module: str, path: Path) -> list[tuple[str, int]]:
    """The mad_eval modules `module` imports, each with its line, wherever the import is."""
    tree = ast.parse(path.read_text(), str(path))
    skip = _type_checking_only(tree)
    found = []
    for node in ast.walk(tree):
        if getattr(node, "lineno", None) in skip:
            continue
        if isinstance(node, ast.Import):
            found += [(alias.name, node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: resolved against this module's package
                here = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
                base = ".".join([*here[: len(here) - node.level + 1], *([base] if base else [])])
            # `from mad_eval import x` imports mad_eval.x when x is a module
            found += [(f"{base}.{alias.name}", node.lineno) for alias in node.names]
    return [(name, line) for name, line in found if name.split(".")[0] == "mad_eval"]


def arrows() -> list[tuple[str, str, str, int]]:
    """(importing package, imported package, importing module, line) between packages."""
    known = modules()
    out = []
    for module, path in known.items():
        for name, line in imports(module, path):
            while name not in known:  # mad_eval.store.folder.RunStore -> mad_eval.store.folder
                name = name.rpartition(".")[0]
            source, target = package_of(module), package_of(name)  # `import mad_eval`: the top
            if source != target:
                out.append((source, target, module, line))
    return out


def test_every_package_has_a_layer():
    missing = {package_of(module) for module in modules()} - set(LEVEL)
    assert not missing, f"add {sorted(missing)} to LAYERS (and to docs/architecture.md)"


def test_no_module_imports_a_package_above_its_own():
    upward = [
        f"{module}:{line} ({source}) imports {target}, a layer above it"
        for source, target, module, line in arrows()
        if LEVEL.get(target, -1) >= LEVEL.get(source, -1)
    ]
    assert not upward, "\n".join(upward)


def test_no_two_packages_import_each_other():
    edges: dict[str, set[str]] = {}
    for source, target, _, _ in arrows():
        edges.setdefault(source, set()).add(target)
    circles = []

    def visit(node: str, path: list[str]) -> None:
        for nxt in sorted(edges.get(node, ())):
            if nxt == path[0]:
                circles.append(" -> ".join([*path, nxt]))
            elif nxt not in path and nxt > path[0]:  # each circle once, from its least name
                visit(nxt, [*path, nxt])

    for start in sorted(edges):
        visit(start, [start])
    assert not circles, "\n".join(circles)


def test_the_layers_see_the_lazy_imports_inside_functions():
    """The check reads imports in function bodies: the CLI's lazy imports live there."""
    found = {target for source, target, _, _ in arrows() if source == "cli"}
    assert {"api", "store", "reporting"} <= found
