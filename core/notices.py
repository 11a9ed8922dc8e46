"""Warnings about a run or an input that is usable but probably not what the user meant.

``core`` raises them with ``notice(message)`` (a ``LabWarning`` through Python's warnings), never
prints; the CLI shows each as one ``warning: ...`` line, and tests can catch them with
``pytest.warns(LabWarning)``.
"""
import warnings


class LabWarning(UserWarning):
    """Something worth a line to the user: training goes on."""


def notice(message: str) -> None:
    warnings.warn(message, LabWarning, stacklevel=2)
