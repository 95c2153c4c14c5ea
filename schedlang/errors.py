"""The error hierarchy every user mistake is reported through.

Each error names the Func / directive / argument at fault, in the user's own names,
and says what to do, e.g. ``sl.ScheduleError("vectorize(k) on C: k is a reduction
variable; use rfactor first")``.
"""


class SchedlangError(Exception):
    """Base class of every error schedlang raises for a user mistake."""


class AlgorithmError(SchedlangError):
    """An algorithm is ill-formed: bad types, bad indices, reads outside an Input."""


class ScheduleError(SchedlangError):
    """A schedule directive is illegal for the stage it is applied to."""


class CompileError(SchedlangError):
    """A legal schedule cannot be compiled for the requested target."""


class ArgumentError(SchedlangError):
    """A compiled kernel was called with arguments that do not fit it."""


class OutOfMemoryError(ArgumentError, MemoryError):
    """A kernel's arguments need a buffer larger than memory (or a 64-bit byte count) holds:
    an output, a contiguous copy of an input, or an intermediate Func's storage."""


class NameClashError(AlgorithmError, ScheduleError):
    """Two different Funcs or Inputs of one pipeline share a name. The algorithm is at fault,
    but the clash is found when a Schedule first covers both, so it is caught as either."""
