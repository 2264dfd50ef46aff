"""A session event as it is written: no host path in what the workbench wrote into it (`hostpaths`).
Its own module because the events carry listings, which read files through `hostpaths`."""

from __future__ import annotations

from typing import Any

from workbench.session.events import (
    Control,
    Evaluation,
    Event,
    Message,
    RepairMark,
    SessionEnd,
    SessionStart,
)
from workbench.session.hostpaths import Scrubber, portable_result, public_model


def _changed(event: Event, **fields: Any) -> Event:
    """`event` with `fields` where they differ (an unchanged field stays unset, as an export wants it)."""
    update = {name: value for name, value in fields.items() if getattr(event, name) != value}
    return event.model_copy(update=update) if update else event


def portable_event(event: Event, scrubber: Scrubber | None = None) -> Event:
    """A session event as it is written: no host path in what the workbench wrote into it.

    A verdict, the model's name (`scripted:FILE`), the settings and every note are made portable; the
    messages the workbench wrote are scrubbed; what a model or a person wrote (answers, kernels) is
    kept as it is: a kernel's hash is its provenance.
    """
    scrubber = scrubber or Scrubber()
    if isinstance(event, Evaluation):
        return _changed(event, result=portable_result(event.result, scrubber))
    if isinstance(event, SessionStart):
        return _changed(event, model=public_model(event.model), settings=scrubber.value(event.settings))
    if isinstance(event, Message) and event.source == "workbench":
        return _changed(event, content=scrubber.text(event.content))
    if isinstance(event, SessionEnd | Control | RepairMark):
        return _changed(event, note=scrubber.text(event.note))
    return event
