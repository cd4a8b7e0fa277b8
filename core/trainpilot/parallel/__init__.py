"""Every way one job uses several workers at once, each on its share of every batch.

In one process:
    split_backend   the `split` backend: CPU thread groups, or an accelerator beside the CPU
    split_runner    runs one step across those workers (shares follow predict/shares.py)
Across processes (torch.distributed):
    rank_env        which rank this process is, from the launcher's environment
    ddp_plan        how a multi-rank plan is written ("ddp-N")
    group           the process group, its timeout, collectives that fail with a clear error
    rank_speed      measured per-rank speed -> shares; watchdog: a hung rank ends the run
    step_clock      the DDP step's timing, the sharded loss and the gradient hook
    launch          N local ranks through torch's elastic launcher
Predicting scale-out before running it:
    link, loopback_probe   the link between ranks, measured or described
    launch_cost     what starting N ranks costs
    rank_plans      a multi-process plan's step and run time
    cluster         plans over several described machines

The split step's own cost is prediction and lives in predict/ (split_cost, step_cost, shares);
the distributed run itself is composed in run/ (distributed_session, distributed_trainer).
"""
