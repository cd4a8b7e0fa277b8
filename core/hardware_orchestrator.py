"""The seed project's module name, kept working: `from hardware_orchestrator import HardwareOrchestrator`."""
from trainpilot.agent import AgentStep, HardwareOrchestrator
from trainpilot.estimate import LOW_CPU_UTILIZATION

__all__ = ["HardwareOrchestrator", "AgentStep", "LOW_CPU_UTILIZATION"]
