"""Group coordination: the pure partition assignor and its handoff plan."""

from ems.coordination.assignor import Move, assign, moves

__all__ = ["Move", "assign", "moves"]
