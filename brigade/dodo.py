"""What a project's dodo.py imports: `from brigade.dodo import *` gives it brigade's tasks.

Importing this module under plain `doit` builds the tasks for the doit
variables of the command line (`doit manifest=PATH ...`, read with doit's
`get_var`): `DOIT_CONFIG` (brigade's reporter, doit's DB in the output
directory) and the task creators `task_plan`, `task_cell`, `task_grade`,
`task_summary` (and `task_collect` when a seat may run).
"""

from typing import Any

from brigade.front.tasks import plain_doit_namespace

_namespace: dict[str, Any] = plain_doit_namespace()
globals().update(_namespace)
__all__ = sorted(_namespace)
