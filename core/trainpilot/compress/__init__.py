"""Hardware-aware compression (the method of patent US20250371349A1).

A configuration determiner (`target`) reads the target machine and which sparsity patterns pay
there; a reinforcement-learning agent (`search`, over the gymnasium env in `env`) gives every
prunable layer (`layers`) a sparsity from that layer's embedding; `prune` removes the channels for
real (torch-pruning), `cycles` times the result (measured here, predicted for a described machine),
`reward` says whether the accuracy threshold and the target cycle reduction were reached, and
`deploy` exports the best model only when both hold. `baselines` are what the agent must beat.

The heavy libraries (torch-pruning, gymnasium, stable-baselines3) are imported by the modules that
use them, so `import trainpilot` stays light; they come with the `compress` extra.
"""

from __future__ import annotations

from trainpilot.compress.job import CompressConfig, CompressionReport, run_compression

__all__ = ["CompressConfig", "CompressionReport", "run_compression"]
