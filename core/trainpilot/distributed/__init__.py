"""Scale-out on torch.distributed: one training run over several processes (ranks), on one machine
(`headless run --nproc N`) or several (`torchrun ... -m trainpilot_tui headless run`).

Each rank trains the same model on its own share of every batch; DistributedDataParallel averages
the gradients. Shares follow each rank's measured speed (a slow rank gets fewer samples), with the
loss scaled so one step equals the single-process step on the whole batch. Rank 0 alone writes
checkpoints and the history; a rank that dies or hangs ends the run with an error, not a hang.

Modules: `ranks` (who am I, from the launcher's environment), `plan` (how a multi-rank plan is
written), `group` (the process group, its timeout, collectives that fail with a clear error),
`watchdog`, `speed` (measured per-rank speed -> shares), `trainer` (the DDP step), `session`
(the session as a rank), `launch` (N local ranks through torch's elastic launcher).
"""
