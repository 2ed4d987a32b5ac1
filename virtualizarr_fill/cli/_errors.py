"""Exit codes of the command and the errors that carry them (codes listed in the package
docstring)."""

from __future__ import annotations

from virtualizarr_fill.errors import StoreReadError, VirtualizarrFillError

__all__ = [
    "EXIT_BAD_INPUT",
    "EXIT_INTERNAL",
    "EXIT_INTERRUPTED",
    "EXIT_IO",
    "EXIT_MISMATCH",
    "EXIT_OK",
    "EXIT_USAGE",
    "PROG",
    "CliError",
    "FileError",
    "classify_error",
]

#: The command's name, as errors and commit messages show it.
PROG = "virtualizarr-fill"
EXIT_OK = 0
EXIT_MISMATCH = 1
EXIT_USAGE = 2
EXIT_BAD_INPUT = 3
EXIT_IO = 4
EXIT_INTERNAL = 5
EXIT_INTERRUPTED = 130


class CliError(Exception):
    """An error reported as one line, with the exit code it maps to."""

    def __init__(self, message: str, exit_code: int) -> None:
        super().__init__(message)
        self.exit_code = exit_code


class FileError(CliError):
    """A file that cannot be handled, with the traceback of where it failed (which may be
    in a worker process), shown under ``--debug``."""

    def __init__(self, message: str, exit_code: int, worker_traceback: str | None) -> None:
        super().__init__(message, exit_code)
        self.worker_traceback = worker_traceback


def classify_error(error: BaseException) -> int:
    """The exit code of an error raised while handling input."""
    if isinstance(error, StoreReadError | OSError):
        return EXIT_IO
    if isinstance(error, VirtualizarrFillError):
        return EXIT_BAD_INPUT
    return EXIT_INTERNAL
