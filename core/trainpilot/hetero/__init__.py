"""Heterogeneous execution: several workers (CPU thread groups, CPU + an accelerator, several
ranks or machines) training one model together, each on its share of every batch.

    shares.py   how a batch is divided: equal predicted finish time per worker (StarPU dmda)
"""
