"""Fault-injection helpers shared by tests/reliability and benchmarks/faults.py.

procs:   run the real CLI in a subprocess and read its --jsonl events as they happen.
doubles: a backend that fails on cue (test double; lives in tests/ only).
corpus:  malformed variants of every kind of file TrainPilot reads.
"""
