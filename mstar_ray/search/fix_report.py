"""What a runtime fix is told of a program's violation. The violation happened while the program read the
fitness questions, and everything it produced then (an exception's message, a traceback it could forge, a class
it named at run time) may carry those questions: handing it on would show a reflector what only the fitness may
see. So the host rebuilds the report from what it knows itself: the phase and kind (host enums), the exception's
type only if it is Python's or a class the source defines, and the program's innermost frame, its line read from
the source the reflector is fixing anyway. The program's own text is withheld.
"""

from __future__ import annotations

import builtins
import re

from mstar_ray.results import RuntimeViolation

# A frame line of the runner's traceback (``sandbox.runner``): program.py is the only file a program frame has.
_FRAME = re.compile(r'^\s*File "program\.py", line (\d+), in ([A-Za-z_][A-Za-z0-9_]*|<module>)\s*$', re.MULTILINE)
_EXCEPTION = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)(?::|$)")
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_PYTHON_EXCEPTIONS = frozenset(name for name, value in vars(builtins).items()
                               if isinstance(value, type) and issubclass(value, BaseException))
# What each kind means, in the host's words: the message the program's run produced is not passed on.
_MEANING = {
    "exception": "the program raised an exception",
    "timeout": "a call ran past its time limit",
    "memory": "the program ran out of memory",
    "cpu": "the program used up its CPU time",
    "recursion": "the program recursed too deeply",
    "read_too_long": "read() returned more text than the limit allows",
    "llm_budget": "the program made more toolkit LLM calls than one call allows",
    "embed_budget": "the program embedded more text than one call allows",
    "requests": "the program sent more toolkit requests than one call allows",
    "file_size": "a file grew past its size limit",
    "disk": "the program's folder ran out of space",
    "forbidden": "the program used something the sandbox forbids",
    "thread": "the program left a thread running",
    "tasks": "the program started more processes or threads than allowed",
    "protocol": "the program sent the host something malformed",
    "contract": "the program broke the memory-program contract",
    "crashed": "the sandbox process died",
    "prompt_refused": "a toolkit LLM prompt was too large for the model",
}
_PHASES = frozenset({"load", "write", "read", "feedback"})
WITHHELD = "(the program's own message is withheld: it ran on questions the reflector may not see)"


def fix_report(violation: RuntimeViolation, source: str) -> str:
    """The violation as the runtime-fix request states it: nothing the program's run wrote reaches it."""
    meaning = _MEANING.get(violation.kind, "the program broke the contract")
    found = _EXCEPTION.match(violation.message)
    defined = set(_IDENTIFIER.findall(source))
    exception = found.group(1) if found and (found.group(1) in _PYTHON_EXCEPTIONS or found.group(1) in defined) else None
    lines = source.splitlines()
    frames = [(int(m.group(1)), m.group(2)) for m in _FRAME.finditer(violation.traceback)
              if 0 < int(m.group(1)) <= len(lines) and (m.group(2) == "<module>" or m.group(2) in defined)]
    phase = violation.phase if violation.phase in _PHASES else "a call"
    kind = violation.kind if violation.kind in _MEANING else "violation"
    text = f"during {phase}: [{kind}] {meaning}" + (f" ({exception})" if exception else "")
    if frames:
        number, function = frames[-1]
        text += f'\nat File "program.py", line {number}, in {function}:\n    {lines[number - 1].strip()}'
    return f"{text}\n{WITHHELD}"
