"""The package's structure: the generated sync client is current, and the
package's modules import each other one way (no cycle)."""

from __future__ import annotations

import ast
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "src" / "withruntime"


def _generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("generate", ROOT / "scripts" / "generate.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules["generate"] = mod
    spec.loader.exec_module(mod)
    return mod


def test_sync_client_is_generated_from_async() -> None:
    gen = _generator()
    stale = gen.stale()
    assert not stale, f"withruntime/_sync is not what withruntime/_async gives ({', '.join(stale)}): run {gen.COMMAND}"


def test_generation_check_fails_on_an_edited_copy(tmp_path: Path) -> None:
    """The check above can fail: a generated file edited by hand is stale."""
    gen = _generator()
    gen.write(tmp_path)
    assert gen.stale(tmp_path) == []
    f = tmp_path / "_sync" / "_client.py"
    f.write_text(f.read_text() + "\n# edited\n")
    assert gen.stale(tmp_path) == ["_sync/_client.py"]


def module_name(path: Path) -> str:
    rel = path.relative_to(PACKAGE.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports(path: Path) -> set[str]:
    """The package's modules that ``path`` imports, those imported only for
    type checking included: a cycle through them is still two modules that
    each need the other."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    me = module_name(path)
    package = me if path.name == "__init__.py" else me.rpartition(".")[0]
    found: set[str] = set()

    def visit(nodes: list[ast.stmt]) -> None:
        for node in nodes:
            if isinstance(node, ast.Import):
                found.update(a.name for a in node.names if a.name.startswith("withruntime"))
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = package.split(".")
                    anchor = anchor[: len(anchor) - node.level + 1]
                    base = ".".join([*anchor, base] if base else anchor)
                if not base.startswith("withruntime"):
                    continue
                for a in node.names:
                    sub = f"{base}.{a.name}"
                    found.add(
                        sub
                        if (PACKAGE.parent / sub.replace(".", "/")).with_suffix(".py").exists()
                        or (PACKAGE.parent / sub.replace(".", "/")).is_dir()
                        else base
                    )
            for child in ast.iter_child_nodes(node):
                if isinstance(child, ast.stmt):
                    visit([child])

    visit(tree.body)
    found.discard(me)
    return found


def graph() -> dict[str, set[str]]:
    return {module_name(p): imports(p) for p in sorted(PACKAGE.rglob("*.py"))}


def cycle(g: dict[str, set[str]]) -> list[str] | None:
    """One import cycle of ``g``, as the modules around it, or None."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def walk(m: str) -> list[str] | None:
        state[m] = 1
        stack.append(m)
        for n in sorted(g.get(m, ())):
            if state.get(n) == 1:
                return [*stack[stack.index(n) :], n]
            if n not in state:
                found = walk(n)
                if found:
                    return found
        stack.pop()
        state[m] = 2
        return None

    for m in sorted(g):
        if m not in state:
            found = walk(m)
            if found:
                return found
    return None


def test_no_import_cycle() -> None:
    g = graph()
    assert {"withruntime._sync", "withruntime._async"} <= g["withruntime"], "the graph misses the package's face"
    assert "withruntime._sync._client" in g["withruntime._sync"]
    found = cycle(g)
    assert found is None, "an import cycle: " + " -> ".join(found or [])


def test_cycle_finder_finds_one() -> None:
    g = graph()
    g["withruntime._http"] = g["withruntime._http"] | {"withruntime._sync._client"}
    assert cycle(g) is not None
