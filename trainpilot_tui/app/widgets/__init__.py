"""The panels and the small widgets they are built from."""
from .agent_panel import AgentPanel
from .hardware_panel import HardwarePanel
from .run_panel import RunPanel

__all__ = ["AgentPanel", "HardwarePanel", "RunPanel"]
