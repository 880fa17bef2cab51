"""The exit codes of ``elastic-idl`` and of the pod entrypoint: one table for both.

==========  =================================================================
code        meaning
==========  =================================================================
0           ok
1           invalid input: a task that does not decode or breaks a rule, a bad
            option value or env value, an unusable entrypoint, a path that
            cannot be written
2           usage: bad flags or arguments (what argparse, or torchrun's own
            parser, rejects)
3           the job failed: workers failed after every restart
4           the rendezvous never completed: too few nodes joined within
            ``join_timeout``
128 + N     stopped by signal N (130 SIGINT, 143 SIGTERM), as a shell reports it
200         the rendezvous store is unreachable because its host (worker-0) is
            gone, or the group lost a node while it ran and too few re-formed
            within ``join_timeout``: retryable (>= 128, which the operator's
            ExitCode policy retries) and never a signal (128 + N stops at 192)
==========  =================================================================

Torch-free; imports only the error types (`elastic_idl._errors`, stdlib only).
"""

from __future__ import annotations

import enum
import signal

from elastic_idl._errors import (
    LaunchFailedError,
    LaunchInterruptedError,
    PeerLostError,
    RendezvousIncompleteError,
    RendezvousStoreLostError,
)

__all__ = [
    "EXIT_CODES_TEXT",
    "EXIT_INTERRUPTED",
    "EXIT_INVALID",
    "EXIT_JOB_FAILED",
    "EXIT_OK",
    "EXIT_RENDEZVOUS",
    "EXIT_STORE_LOST",
    "EXIT_USAGE",
    "SIGNAL_BASE",
    "ExitCode",
    "exit_code_of",
    "signal_exit_code",
]

#: A process stopped by signal N exits with SIGNAL_BASE + N.
SIGNAL_BASE = 128


class ExitCode(enum.IntEnum):
    """Exit codes shared by the CLI and the pod entrypoint (see the module docs)."""

    OK = 0
    INVALID = 1
    USAGE = 2
    JOB_FAILED = 3
    RENDEZVOUS = 4
    #: 128 + SIGINT: interrupted (Ctrl-C).
    SIGINT = SIGNAL_BASE + signal.SIGINT
    #: 128 + SIGTERM: terminated.
    SIGTERM = SIGNAL_BASE + signal.SIGTERM
    #: The rendezvous store's host, or a node of the running group, is gone: retry the pod (not a signal: above 128 + 64).
    STORE_LOST = 200


#: The members under the short names the CLI and the pod entrypoint use (and export).
EXIT_OK = ExitCode.OK
EXIT_INVALID = ExitCode.INVALID
EXIT_USAGE = ExitCode.USAGE
EXIT_JOB_FAILED = ExitCode.JOB_FAILED
EXIT_RENDEZVOUS = ExitCode.RENDEZVOUS
EXIT_INTERRUPTED = ExitCode.SIGINT
EXIT_STORE_LOST = ExitCode.STORE_LOST

#: The table in one line, for --help epilogs.
EXIT_CODES_TEXT = (
    "Exit codes: 0 ok, 1 invalid input, 2 usage, 3 the job failed, 4 the rendezvous never completed, "
    "128+N stopped by signal N (130 SIGINT, 143 SIGTERM), 200 the rendezvous store's host or a running peer is gone (retry the pod)."
)


def signal_exit_code(signum: int) -> int:
    """The exit code of a process stopped by signal ``signum``."""
    return SIGNAL_BASE + int(signum)


def exit_code_of(exc: BaseException) -> int:
    """The exit code for an error a launch (or the steps before it) raised."""
    if isinstance(exc, KeyboardInterrupt):
        return ExitCode.SIGINT
    if isinstance(exc, LaunchInterruptedError):
        return signal_exit_code(exc.signal)
    if isinstance(exc, PeerLostError):  # before its base class: a lost node, not one that never came
        return ExitCode.STORE_LOST
    if isinstance(exc, RendezvousIncompleteError):
        return ExitCode.RENDEZVOUS
    if isinstance(exc, RendezvousStoreLostError):
        return ExitCode.STORE_LOST
    if isinstance(exc, LaunchFailedError):
        return ExitCode.JOB_FAILED
    return ExitCode.INVALID
