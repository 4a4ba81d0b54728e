"""What a memory program may import. Shared by the static checker and the sandbox's run-time import."""

ALLOWED_IMPORTS = frozenset(
    {
        "__future__",
        "bisect",
        "collections",
        "dataclasses",
        "datetime",
        "difflib",
        "enum",
        "functools",
        "hashlib",
        "heapq",
        "itertools",
        "json",
        "math",
        "numpy",
        "operator",
        "random",
        "re",
        "sqlite3",
        "statistics",
        "string",
        "textwrap",
        "typing",
        "unicodedata",
    }
)

# Builtins that evaluate code, reach files or the interpreter's namespaces: absent from a program's
# builtins at run time and rejected by the checker.
FORBIDDEN_BUILTINS = frozenset(
    {"__import__", "eval", "exec", "compile", "open", "globals", "locals", "vars", "breakpoint", "input", "memoryview"}
)
