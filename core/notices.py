"""``notice(message)``: a warning about a run or an input that is usable but probably not what the user meant, as a
``LabWarning`` through Python's warnings (``core`` never prints); the CLI shows each as one ``warning:`` line."""
import warnings


class LabWarning(UserWarning):
    """Something worth a line to the user: training goes on."""


def notice(message: str) -> None:
    warnings.warn(message, LabWarning, stacklevel=2)
