"""What a command prints when an exception reaches it: one line and an exit code, never a traceback.

Known failures name what to fix (`UserError` carries its own message; a model call failure its
category). The rest are translated by class: a file the system refused (OSError names it), text that is
not UTF-8, input nested too deeply for the parsers, a request cache that cannot be opened. Anything else
is a bug in decoevo: one line that says so (exit 1); `DECOEVO_DEBUG=1` shows the traceback instead.
"""

from __future__ import annotations

import functools
import os
import re
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NoReturn

import typer
from pydantic import ValidationError

from ..errors import UserError, validation_summary
from ..lm import LMError
from ..redact import redact, register_environment_secrets

DEBUG_ENV = "DECOEVO_DEBUG"
# typer's own exits and usage errors pass through. typer >= 0.22 bundles its own click and older ones use
# click's; both raise typer.Exit/typer.Abort, and BadParameter's bases name the ClickException of either, so
# click itself (not a dependency of ours) is never imported.
_TYPER_EXITS: tuple[type[BaseException], ...] = (
    typer.Exit, typer.Abort, *(c for c in typer.BadParameter.__mro__ if c.__name__ == "ClickException"))


@dataclass(frozen=True)
class Failure:
    message: str
    code: int  # 2: input, configuration or state the user can fix; 1: a model failure or a bug


# What a terminal acts on instead of showing: C0/C1 controls (ESC starts a sequence that can clear the
# screen or retitle the window), DEL, and the bidirectional overrides that reorder what is shown.
_UNPRINTABLE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\u2028\u2029]")


def printable(text: str) -> str:
    """`text` with every control character a terminal would act on written as its escape (`\\x1b`);
    line breaks and tabs stay (a message is made one line where that matters)."""
    return _UNPRINTABLE.sub(lambda m: m.group().encode("unicode_escape").decode("ascii"), text)


# A message quotes what it was given: a key, a model name, a path. Given 100 KB of it (a pasted file, a
# runaway script), the quote is cut so the message stays readable; what is kept still says which input.
LONGEST_WORD = 400
LONGEST_MESSAGE = 4000
_LONG_WORD = re.compile(rf"\S{{{LONGEST_WORD + 1},}}")


def _cut(text: str, keep: int) -> str:
    return f"{text[:keep]}… [{len(text) - keep:,} more characters]"


def shortened(text: str) -> str:
    """`text` with each run of more than LONGEST_WORD non-space characters cut, and the whole cut at
    LONGEST_MESSAGE characters: an echo of a huge input never floods the terminal."""
    text = _LONG_WORD.sub(lambda m: _cut(m.group(), LONGEST_WORD - 40), text)
    return text if len(text) <= LONGEST_MESSAGE else _cut(text, LONGEST_MESSAGE - 100)


def failure_label(exc: LMError) -> str:
    """The kind of a model call's failure as a user names it: a refused key is not an infrastructure fault."""
    from ..lm.errors import CredentialError

    return "credentials" if isinstance(exc, CredentialError) else str(exc.category)


def describe(exc: BaseException) -> Failure:
    failure = _describe(exc)
    register_environment_secrets()  # a credential in the environment is masked even if nothing read it yet
    # no key, URL password or token is printed, nor a control character from the data the message quotes
    failure = Failure(printable(redact(failure.message)), failure.code)
    if "\n" in failure.message or "\r" in failure.message:  # one line, whatever a parser or the data said
        return Failure(" ".join(failure.message.split()), failure.code)
    return failure


def _describe(exc: BaseException) -> Failure:
    if isinstance(exc, UserError):
        return Failure(str(exc), 2)
    if isinstance(exc, LMError):
        return Failure(f"a model call failed ({failure_label(exc)}): {exc}",
                       2 if exc.category == "infrastructure" else 1)
    if isinstance(exc, UnicodeDecodeError):
        return Failure(f"an input file is not valid UTF-8 ({exc.reason} at byte {exc.start}); re-save it as UTF-8", 2)
    if isinstance(exc, UnicodeEncodeError):
        return Failure(f"a text holds characters that are not valid Unicode ({exc.reason}: "
                       f"{exc.object[exc.start:exc.end]!a}); fix the input that carries it", 2)
    if isinstance(exc, ValidationError):  # a value the user gave that no command checked first; never its input
        return Failure(f"invalid value: {validation_summary(exc)}", 2)
    if isinstance(exc, RecursionError):
        return Failure("an input is nested too deeply to read (JSON or YAML nesting in the thousands); "
                       "flatten it", 2)
    if isinstance(exc, OSError):
        where = f"{exc.filename}: " if exc.filename else ""
        return Failure(f"{where}{exc.strerror or exc}", 2)
    if isinstance(exc, sqlite3.Error):
        return Failure(f"the request cache cannot be used ({exc}); check DECOEVO_CACHE or lm.cache_path "
                       "(a writable file path), or pass --no-cache", 2)
    return Failure(f"internal error, a bug in decoevo ({type(exc).__name__}: {exc}); please report it; "
                   f"set {DEBUG_ENV}=1 to see the traceback", 1)


def _redact_chain(exc: BaseException | None) -> None:
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        exc.args = tuple(redact(a) if isinstance(a, str) else a for a in exc.args)
        exc = exc.__cause__ or exc.__context__


def debug() -> bool:
    return os.environ.get(DEBUG_ENV, "") not in ("", "0")


def run_guarded(fn: Callable[[], Any], fail: Callable[[str, int], NoReturn]) -> None:
    """Run a command's body; any exception ends in `fail(message, code)` (typer's own exits pass)."""
    try:
        fn()
    except _TYPER_EXITS:
        raise
    except KeyboardInterrupt:  # commands with more to say (run, sweep, eval) catch it themselves first
        fail("interrupted (Ctrl-C); run the same command again to continue: answers already paid for come "
             "from the cache", 130)
    except Exception as exc:
        if debug():
            _redact_chain(exc)  # the traceback Python prints shows messages without secrets
            raise
        failure = describe(exc)
        fail(failure.message, failure.code)


def command_boundary(fail: Callable[[str, int], NoReturn]) -> Callable[[Any], Any]:
    """A decorator for typer commands: the body runs under `run_guarded`; the signature stays typer's."""

    def decorate(command: Any) -> Any:
        @functools.wraps(command)
        def wrapper(*args: Any, **kwargs: Any) -> None:
            run_guarded(lambda: command(*args, **kwargs), fail)

        return wrapper

    return decorate
