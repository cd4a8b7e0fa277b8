"""Executes a job on a plan: the session as a stream of typed events, steering (override, pause,
stop) from other threads, the step loop, fallback to the CPU, checkpoints and resume, the history
row of a run, and its result (the `--json` schema).

A distributed run composes the same session with a rank strategy (distributed_session); nothing
else varies it.
"""
