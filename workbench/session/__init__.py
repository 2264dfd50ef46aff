"""Sessions: typed events in an append-only, crash-safe JSON-lines file."""

from workbench.session.events import Candidate, Control, Evaluation, Event, Message, SessionEnd, SessionStart
from workbench.session.log import SessionRead, SessionWriter, fork_session, read_session

__all__ = [
    "Candidate",
    "Control",
    "Evaluation",
    "Event",
    "Message",
    "SessionEnd",
    "SessionRead",
    "SessionStart",
    "SessionWriter",
    "fork_session",
    "read_session",
]
