"""The package's layers, as the tree shows them, are the layers its imports obey.

Lower layers never import higher ones (not even inside a function), no two
modules import each other in a cycle, and the pure core touches neither the
disk nor processes.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "brigade"

# lowest first; a module may import its own layer and the ones before it
LAYERS = (
    "errors",
    "core",
    "fs",
    "adapters",
    "inputs",
    "outdir",
    "run",
    "report",
    "engine",
    "front",
    "dodo",
)
# the package itself (its version) and its top-level leaf modules
SHARED = {"brigade"}
# the pure core: values in, values out
CORE_FORBIDDEN = {
    "subprocess",
    "tempfile",
    "shutil",
    "signal",
    "fcntl",
    "socket",
    "threading",
    "multiprocessing",
    "sqlite3",
}


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> dict[str, Path]:
    return {module_name(path): path for path in sorted(PACKAGE.rglob("*.py"))}


def layer_of(name: str) -> str | None:
    parts = name.split(".")
    if len(parts) < 2:
        return None
    return parts[1]


def _dynamic_import(node: ast.AST) -> str | None:
    """The module a call imports by name (`importlib.import_module("x")`, `import_module`,
    `__import__`), when it is named by a string constant."""
    if not isinstance(node, ast.Call) or not node.args:
        return None
    func = node.func
    name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
    first = node.args[0]
    if name in ("import_module", "__import__") and isinstance(first, ast.Constant):
        return str(first.value) if isinstance(first.value, str) else None
    return None


def imports(path: Path) -> list[tuple[str, int]]:
    """Every module imported anywhere in the file (functions and TYPE_CHECKING included,
    and by name through importlib)."""
    found: list[tuple[str, int]] = []
    package = module_name(path).rsplit(".", 1)[0] if path.name != "__init__.py" else None
    for node in ast.walk(ast.parse(path.read_text("utf-8"))):
        dynamic = _dynamic_import(node)
        if dynamic is not None:
            found.append((dynamic, node.lineno))  # type: ignore[attr-defined]
        if isinstance(node, ast.Import):
            found.extend((alias.name, node.lineno) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = (package or module_name(path)).split(".")
                base = ".".join(anchor[: len(anchor) - node.level + 1] + ([base] if base else []))
            # `from brigade.x import y` may name a module y (importing a submodule of a
            # package is not an import of what the package's __init__ holds)
            named = [f"{base}.{alias.name}" for alias in node.names]
            submodules = [
                target
                for target in named
                if (PACKAGE.parent / target.replace(".", "/")).with_suffix(".py").exists()
            ]
            found.extend((target, node.lineno) for target in submodules)
            if len(submodules) < len(named):
                found.append((base, node.lineno))
    return found


def internal_edges() -> dict[str, set[str]]:
    known = modules()
    edges: dict[str, set[str]] = {name: set() for name in known}
    for name, path in known.items():
        for target, _ in imports(path):
            if target in known and target != name and target not in SHARED:
                edges[name].add(target)
    return edges


def test_every_module_is_in_a_layer() -> None:
    for name in modules():
        if name in SHARED:
            continue
        assert layer_of(name) in LAYERS, f"{name} is in no layer; put it in one of {LAYERS}"


@pytest.mark.parametrize("name", sorted(modules()))
def test_imports_go_down(name: str) -> None:
    if name in SHARED:
        return
    own = LAYERS.index(layer_of(name) or "")
    for target, line in imports(modules()[name]):
        if not target.startswith("brigade.") or target not in modules():
            continue
        other = layer_of(target)
        if other is None:
            continue
        assert LAYERS.index(other) <= own, (
            f"{name}:{line} imports {target}: layer {other!r} is above {LAYERS[own]!r}"
        )


def test_no_import_cycles() -> None:
    edges = internal_edges()
    # strongly connected components (Tarjan): a component of two or more modules is a cycle
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []
    counter = 0

    def visit(node: str) -> None:
        nonlocal counter
        index[node] = low[node] = counter
        counter += 1
        stack.append(node)
        on_stack.add(node)
        for target in edges[node]:
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                item = stack.pop()
                on_stack.discard(item)
                component.append(item)
                if item == node:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for node in edges:
        if node not in index:
            visit(node)
    assert cycles == [], f"import cycles: {cycles}"


@pytest.mark.parametrize("name", sorted(n for n in modules() if layer_of(n) == "core"))
def test_core_does_no_io(name: str) -> None:
    path = modules()[name]
    for target, line in imports(path):
        root = target.split(".")[0]
        assert root not in CORE_FORBIDDEN, f"{name}:{line} imports {target} (core is pure)"
        assert target != "os", f"{name}:{line} imports os (core is pure)"
    for node in ast.walk(ast.parse(path.read_text("utf-8"))):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            assert node.func.id != "open", f"{name}:{node.lineno} opens a file (core is pure)"
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            assert node.func.attr not in FILE_METHODS, (
                f"{name}:{node.lineno} calls .{node.func.attr}() (core touches no file)"
            )


# what a path does to the disk (pathlib's, and the file objects'); core calls none of them
FILE_METHODS = frozenset(
    {
        "open",
        "read_text",
        "read_bytes",
        "write_text",
        "write_bytes",
        "mkdir",
        "rmdir",
        "unlink",
        "touch",
        "rename",
        "symlink_to",
        "hardlink_to",
        "chmod",
        "iterdir",
        "glob",
        "rglob",
    }
)
# what starts a process; only run/proc.py does (the one place that spawns processes)
SPAWNING_MODULES = frozenset(
    {"subprocess", "multiprocessing", "pty", "concurrent.futures", "webbrowser"}
)
SPAWNING_CALLS = frozenset(
    {"system", "popen", "fork", "forkpty", "posix_spawn", "posix_spawnp"}
    | {f"exec{suffix}" for suffix in ("l", "le", "lp", "lpe", "v", "ve", "vp", "vpe")}
    | {f"spawn{suffix}" for suffix in ("l", "le", "lp", "lpe", "v", "ve", "vp", "vpe")}
)
PROC = "brigade.run.proc"


@pytest.mark.parametrize("name", sorted(n for n in modules() if n != PROC))
def test_only_proc_spawns_processes(name: str) -> None:
    path = modules()[name]
    for target, line in imports(path):
        root = target.split(".")[0]
        assert target not in SPAWNING_MODULES and root not in {"subprocess", "pty"}, (
            f"{name}:{line} imports {target}: only run/proc.py starts processes"
        )
        if layer_of(name) != "run":
            assert target != PROC or _only_ends_processes(path), (
                f"{name}:{line} imports run/proc outside run/: it may end or wait for "
                "processes (end_process, terminate_all), never start one"
            )
    for node in ast.walk(ast.parse(path.read_text("utf-8"))):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            owner = node.func.value
            if isinstance(owner, ast.Name) and owner.id == "os":
                assert node.func.attr not in SPAWNING_CALLS, (
                    f"{name}:{node.lineno} calls os.{node.func.attr}: only run/proc.py "
                    "starts processes"
                )


# what a module outside run/ may use of proc: the end of the process, a stop of the seats,
# and handing a URL to the user's browser (`brigade view --open`; webbrowser starts it)
PROC_OUTSIDE_RUN = frozenset({"end_process", "terminate_all", "on_stop", "stopping", "open_url"})


def _only_ends_processes(path: Path) -> bool:
    """Whether a module uses nothing of proc but what ends processes (`proc.X` or
    `from brigade.run.proc import X`)."""
    tree = ast.parse(path.read_text("utf-8"))
    used: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            if node.value.id == "proc":
                used.add(node.attr)
        if isinstance(node, ast.ImportFrom) and node.module == PROC:
            used.update(alias.name for alias in node.names)
    return used <= PROC_OUTSIDE_RUN


# doit's internals brigade once leaned on; a doit release may change any of them silently
DOIT_PRIVATE = (
    "_CMDLINE_VARS",
    "_getframe",
    "__code__",
    "_non_default_keys",
    "dep_manager",
    "f_locals",
)


@pytest.mark.parametrize("name", sorted(modules()))
def test_doit_only_through_its_public_api(name: str) -> None:
    source = modules()[name].read_text("utf-8")
    for private in DOIT_PRIVATE:
        assert private not in source, f"{name} uses {private} (doit's public API only)"
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("doit"):
            for alias in node.names:
                assert not alias.name.startswith("_"), f"{name}:{node.lineno} imports {alias.name}"


# the layers that know nothing of doit: the run engine is a plain library object, and the
# doit tasks and reporter above it (front/) are an adapter over it
WITHOUT_DOIT = LAYERS[: LAYERS.index("engine") + 1]


@pytest.mark.parametrize("name", sorted(n for n in modules() if layer_of(n) in WITHOUT_DOIT))
def test_the_engine_and_below_import_no_doit(name: str) -> None:
    for target, line in imports(modules()[name]):
        assert target.split(".")[0] != "doit", f"{name}:{line} imports {target}"


def test_the_checks_see_what_they_are_about(tmp_path: Path) -> None:
    call = ast.parse('importlib.import_module("brigade.front.cli")').body[0]
    assert _dynamic_import(call.value) == "brigade.front.cli"  # type: ignore[attr-defined]
    assert _dynamic_import(ast.parse("__import__('brigade.run')").body[0].value) == (  # type: ignore[attr-defined]
        "brigade.run"
    )
    spawner = tmp_path / "spawner.py"
    spawner.write_text("from brigade.run import proc\nproc.capture_bytes(['git'])\n")
    assert not _only_ends_processes(spawner)
    ender = tmp_path / "ender.py"
    ender.write_text("from brigade.run import proc\nproc.end_process(0)\n")
    assert _only_ends_processes(ender)
