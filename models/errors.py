"""The one base of bad input: an error whose message tells the user what is wrong with what they gave.

Every layer's domain errors that mean "the input cannot be used" (an op spec, a device id, a trace
file, a plan name, a store file, an option's value) subclass `BadInput`, so the CLI's exit map knows
them all by one class: their message, made safe to print once there, on one line, exit status 2. A
command lets them pass; it re-raises only to add what the message lacks (the option it came from).

`BadInput` is an `Exception`, not a `ValueError`: a subclass keeps the builtin base it had
(`class SpecError(BadInput, ValueError)`), so no `except ValueError` catches more than it did.
"""

from __future__ import annotations


class BadInput(Exception):
    """Input that cannot be used; the message is one line naming what is wrong and what is allowed."""


class BadValue(BadInput, ValueError):
    """A value out of range or of no known kind (a dtype name, a parallel degree): bad input and a ValueError."""


class ModelError(BadInput, ValueError):
    """A model config the model layer cannot use (its shape, its attention, its weight format); one line
    naming the missing or bad key."""
