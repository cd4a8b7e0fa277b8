"""A training loop someone else owns — a Lightning or Hugging Face Trainer — as TrainPilot sees it:
the plan it runs and the agent's prediction for that plan (`plan_rows`), the clock of its training
(`clock`), its row in the history, kept as a TrainPilot run keeps its own (`record`), and the
agent's last decision per model with the callback class built on the host's base (`decisions`).

`trainpilot.lightning` and `trainpilot.huggingface` are thin adapters over these: what differs
between them is only how the host loop is told what to run and where its hooks are.
"""
