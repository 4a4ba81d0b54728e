"""The process exit codes of ``mstar-ray``, in one place for the CLI and the driver it runs, and the exceptions
that mean exit 2 (``InputError``) and exit 3 (``InfrastructureError``).

``InputError`` is raised where input is read (a config key, a data file, an argument), with a message naming
the file, key or argument. Anything else that escapes a command is an internal failure (exit 3, its traceback
kept), so a typo and a bug never look alike. It is a ``ValueError`` (``MissingInput`` a ``FileNotFoundError``
too) so that callers catching those keep working.
"""

EXIT_OK = 0
EXIT_PROGRAM = 1  # the program broke the contract (statically, or at run time)
EXIT_INPUT = 2  # bad arguments, a config error, a missing or malformed data file: an InputError
EXIT_ENDPOINT = 3  # an unusable LLM endpoint, a sandbox layer this machine cannot give, a run that cannot go on
EXIT_INTERNAL = 3  # any other exception: a bug, reported with its component and its traceback kept
EXIT_BUDGET = 4  # the budget is spent
EXIT_SIGINT = 130  # stopped by Ctrl-C (128 + SIGINT); resumable
EXIT_SIGTERM = 143  # stopped by SIGTERM (128 + SIGTERM, as `ray job stop` sends); resumable

# What each code means, as `mstar-ray --help` and the CLI reference say it.
MEANINGS = {
    EXIT_OK: "success",
    EXIT_PROGRAM: "the program broke the contract",
    EXIT_INPUT: "bad input (arguments, a config key, a data file), named",
    EXIT_ENDPOINT: "an endpoint, sandbox layer, served model or environment that cannot be used, a run that cannot "
                   "go on, or an internal error (its traceback kept in error.log)",
    EXIT_BUDGET: "the budget is spent",
    EXIT_SIGINT: "stopped by Ctrl-C (finished work kept: resume with --resume)",
    EXIT_SIGTERM: "stopped by SIGTERM, as `ray job stop` sends (finished work kept: resume with --resume)",
}


def exit_codes_text() -> str:
    return "; ".join(f"{code} {meaning}" for code, meaning in MEANINGS.items())


class InputError(ValueError):
    """Input the user gave that cannot be used; the message says which and why."""


class InfrastructureError(RuntimeError):
    """What the run stands on failed, not a candidate: an endpoint gone after its retries, a sandbox layer this
    machine cannot give, a fork server that cannot start, a task environment this machine cannot run. Each such
    error is one of these, raised as itself across the actor edge (Ray re-raises a worker's exception as its
    own class), so the search policy tells it from a candidate's failure by its class alone and stops the run;
    a command exits 3 on it."""


class MissingInput(InputError, FileNotFoundError):
    """A file or directory the user named (or a task needs) that is not there."""


class Terminated(KeyboardInterrupt):
    """SIGTERM (as ``ray job stop`` and most supervisors send), raised like Ctrl-C's ``KeyboardInterrupt`` so
    that both stop a command the same way; only the exit code differs."""


# Noted on an interrupt once the run has said how to resume (so the command does not say it twice).
ANNOUNCED = "mstar-ray: the resume line was printed"


def resume_line(what: str, run_dir: object) -> str:
    return f"stopped by {what}; finished work is kept: resume with  mstar-ray run --resume {run_dir}"
