"""What a project's dodo.py imports: brigade's tasks and `DOIT_CONFIG` for plain `doit`.

`from brigade.dodo import *` gives the tasks of the manifest named on the
command line (`doit manifest=PATH ...`; else `manifests/demo.yaml`);
`globals().update(battery("evals/manifest.yaml"))` names the manifest the
project's own battery lives in (`brigade init` writes that dodo). Both read
doit's variables with `get_var`; the tasks are `task_plan`, `task_cell`,
`task_grade`, `task_summary` (and `task_collect` when a seat may run).
"""

from __future__ import annotations

import functools
from typing import Any

from brigade.front import tasks


def battery(manifest: str | None = None) -> dict[str, Any]:
    """Everything a dodo exposes for the battery of `manifest` (relative to the dodo's
    folder; `doit manifest=PATH` still names another, relative to the folder doit was run
    from)."""
    if tasks.asked_manifests is not None:  # brigade doit reading the dodo: nothing built
        tasks.asked_manifests.append(manifest)
        return {}
    return tasks.plain_doit_namespace(default_manifest=manifest)


@functools.cache
def _default() -> dict[str, Any]:
    return battery()


def __getattr__(name: str) -> Any:
    """`from brigade.dodo import *`: the default battery, built when first asked for (so
    that importing `battery` alone builds nothing)."""
    if name.startswith("__") and name != "__all__":
        raise AttributeError(name)
    if tasks.asked_manifests is not None:  # (brigade doit reading the dodo: nothing built)
        if name == "__all__":
            return []
        raise AttributeError(name)
    namespace = _default()
    if name == "__all__":
        return sorted(namespace)
    try:
        return namespace[name]
    except KeyError:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
