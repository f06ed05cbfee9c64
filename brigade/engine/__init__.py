"""The run engine: one run of a battery as a plain library object, no doit in it.

Options, the session (inputs, plan, scan), which cells a run is about, the
progress it tells and the run itself (lock, start, cells, scheduler, finish,
exit code). `brigade run` calls it directly; the doit tasks and reporter of
front/ are an adapter over it.
"""
