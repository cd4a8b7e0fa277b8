"""The seed project's API, kept working: `TrainingEnvironment` (environment) and, through the
top-level modules `hardware_orchestrator` and `train_orchestrated`, `HardwareOrchestrator`.
"""
