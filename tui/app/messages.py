"""The messages the app's threads post to its UI (post_message is thread-safe), with typed fields.

Workers only post these; the app turns them into state that the tabs watch.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from textual.message import Message

if TYPE_CHECKING:  # for the fields' types only: a message carries what the worker made
    from rooftop.models.calibrate import Calibration
    from rooftop.models.sample import Sample
    from rooftop.probes.plan import Progress
    from rooftop.probes.telemetry import Snapshot
    from rooftop.tui.services.measure import RunResult


@dataclass
class Telemetry(Message):
    """A snapshot from the sampler thread (post_message is thread-safe)."""

    snapshot: Snapshot


@dataclass
class MeasureStarted(Message):
    """The measuring worker sized its plan: `points` of `plan` on `device` (as the Live tab names it)."""

    plan: str
    points: int
    device: str


@dataclass
class SampleTaken(Message):
    """One more point measured."""

    progress: Progress
    sample: Sample
    calibration: Calibration  # the ceilings so far, computed in the worker


@dataclass
class MeasureFinished(Message):
    """The measurement ended (complete, cancelled or failed), with all it measured."""

    result: RunResult


@dataclass
class StoreProblem(Message):
    """The store could not keep what the measurement sent it: said once as a warning; measuring goes on."""

    message: str


@dataclass
class FileWritten(Message):
    """A tab's export (e / E) is written to `path`, or could not be (`error`, one line)."""

    path: str
    error: str
