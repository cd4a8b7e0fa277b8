"""The cost model: a calibrated roofline for cold predictions, corrected by a history of real runs.

Modules, one concept each:
  features     what a step's time depends on, read from a workload profile
  microbench   real micro-benchmark networks, trained and timed like the trainer trains
  contention   a real busy-loop load, and a meter for other processes' CPU use
  fit          non-negative least squares
  calibrate    run the micro-benchmarks per plan and CPU state, fit the step-time model
  calibration  the stored result, one JSON file per machine
  derive       a calibration derived from a described machine's figures
  roofline     the cold prediction, adjusted for observed CPU load
  history      the SQLite run history (WAL, retries, damaged files set aside)
  learning     warm corrections and measured error from the history
  drift        how far this machine's last runs strayed from their warm predictions
  compile_cost what torch.compile costs and gives here, and a compiled plan's time
  confidence   P(chosen plan is fastest) from the margin and the measured error
  model        `CostModel`, the `Predictor` the agent uses
  auto         quick calibration the first time a machine is seen
  planning     plan a job without training (`trainpilot headless plan`)
"""

from __future__ import annotations

from trainpilot.predict.auto import ensure_calibrated, open_calibrated
from trainpilot.predict.calibration import Calibration
from trainpilot.predict.history import History, RunRecord
from trainpilot.predict.model import DESCRIBED_MARK, CostModel

__all__ = ["Calibration", "CostModel", "DESCRIBED_MARK", "History", "RunRecord", "ensure_calibrated", "open_calibrated"]
