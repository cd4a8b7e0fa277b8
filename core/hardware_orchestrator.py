"""The seed project's module name, kept working: `from hardware_orchestrator import HardwareOrchestrator`."""

from trainpilot.agent.orchestrator import AgentStep
from trainpilot.compat.orchestrator import HardwareOrchestrator
from trainpilot.predict.first_estimate import LOW_CPU_UTILIZATION

__all__ = ["HardwareOrchestrator", "AgentStep", "LOW_CPU_UTILIZATION"]
