from .events import RunEvent
from .gate import Gate, GateResponse
from .iteration import Iteration
from .node import NodeRun
from .provider import Conversation, ProviderConfig
from .run import Run

__all__ = [
    "Run",
    "NodeRun",
    "Iteration",
    "Gate",
    "GateResponse",
    "RunEvent",
    "ProviderConfig",
    "Conversation",
]
