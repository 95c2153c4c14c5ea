"""Readable text for expressions, in the user's names (never mangled ones).

Example: ``expr_to_str(A[i, k] * 2)`` gives ``'A[i, k] * 2'`` for an int32 ``A`` and
``'A[i, k] * 2.0'`` for a float32 one (a weak literal prints as the type it took).
"""
from __future__ import annotations

import keyword

from . import expr as E

_PREC = {"or": 1, "and": 2, "eq": 3, "ne": 3, "lt": 3, "le": 3, "gt": 3, "ge": 3,
         "bitor": 4, "bitxor": 5, "bitand": 6, "shl": 7, "shr": 7, "add": 8, "sub": 8,
         "mul": 9, "div": 9, "floordiv": 9, "mod": 9}


def expr_to_str(e, prec=0) -> str:
    """Print an expression (algorithm or loop IR) as compact pseudocode. An expression
    whose shared sub-expressions would repeat (a DAG printed as a tree grows exponentially
    with its depth) names them: ``x * x where %0 = A[i] + 1``."""
    names = shared_names([e])
    body = _text(e, prec, False, names)
    return body + _where(names) if names else body


def user_text(e) -> str:
    """``expr_to_str`` without the integer widenings the language inserts itself, so a
    fact reads as the user wrote it: ``user_text(p <= M)`` gives ``'p <= M'``, not
    ``'int64(p) <= M'``."""
    names = shared_names([e])
    body = _text(e, 0, True, names)
    return body + _where(names, True) if names else body


# A DAG prints as-is until its tree would be this many nodes and several times its size
_TREE_LIMIT = 2000
_SHARED_MIN_SIZE = 8        # shared sub-expressions smaller than this are printed in place


def shared_names(exprs):
    """The sub-expressions of ``exprs`` to print once under a name (``%0``, ``%1``, ...,
    children before parents), as ``{id(node): (name, node)}``: the ones that occur more
    than once and are not small, when printing the expressions as trees would repeat
    much. Empty for ordinary expressions. Example: ``shared_names([e])``."""
    size, refs, order, expanding = {}, {}, [], set()
    for root in exprs:
        refs[id(root)] = refs.get(id(root), 0) + 1
        stack = [(root, False)]
        while stack:
            n, expanded = stack.pop()
            if expanded:
                size[id(n)] = min(1 + sum(size[id(k)] for k in n.kids()), 1 << 60)
                order.append(n)
            elif id(n) not in size and id(n) not in expanding:
                expanding.add(id(n))
                stack.append((n, True))
                for k in n.kids():
                    refs[id(k)] = refs.get(id(k), 0) + 1
                    stack.append((k, False))
    tree = sum(size[id(r)] for r in exprs)
    if tree <= max(_TREE_LIMIT, 4 * len(order)):
        return {}
    shared = [n for n in order if refs[id(n)] > 1 and size[id(n)] >= _SHARED_MIN_SIZE]
    return {id(n): (f"%{k}", n) for k, n in enumerate(shared)}


def named_text(e, names, hide_widening=False):
    """``e`` printed with the sub-expressions in ``names`` (from ``shared_names``) as their
    names."""
    return _text(e, 0, hide_widening, names)


def named_definitions(names, hide_widening=False):
    """``[(name, text), ...]`` of the sub-expressions in ``names`` (from ``shared_names``),
    each printed with the names before it."""
    return [(name, _text(n, 0, hide_widening, names, defining=n)) for name, n in names.values()]


def _where(names, hide_widening=False):
    defs = ", ".join(f"{name} = {text}" for name, text in named_definitions(names, hide_widening))
    return f" where {defs}"


def _is_implicit_widening(e):
    a, b = e.value.dtype, e.dtype
    return (a.is_int and b.is_int and b.lanes == a.lanes and b.bits > a.bits
            and (b.is_signed or not a.is_signed))


def _text(e, prec, hide_widening, names=None, defining=None):
    if names and e is not defining and id(e) in names:
        return names[id(e)][0]

    def text(x, p=0):
        return _text(x, p, hide_widening, names)
    if isinstance(e, E.Const):
        if e.dtype.is_bool:
            return "true" if e.value else "false"
        if e.dtype.is_float:
            s = repr(e.value)
            return s if e.dtype.name in ("float32",) or e.weak else f"{e.dtype.name}({s})"
        return str(e.value)
    if isinstance(e, E.Var):
        return e.name
    if isinstance(e, E.BinOp):
        if e.op in ("min", "max"):
            return f"{e.op}({text(e.a)}, {text(e.b)})"
        p = _PREC[e.op]
        s = f"{text(e.a, p)} {E.SYMBOL[e.op]} {text(e.b, p + 1)}"
        return f"({s})" if p < prec else s
    if isinstance(e, E.UnOp):
        sym = "-" if e.op == "neg" else ("!" if e.dtype.is_bool else "~")
        return f"{sym}{text(e.a, 10)}"
    if isinstance(e, E.Select):
        return f"select({text(e.cond)}, {text(e.t)}, {text(e.f)})"
    if isinstance(e, E.Cast):
        if hide_widening and _is_implicit_widening(e):
            return text(e.value, prec)
        return f"{e.dtype.element().name}({text(e.value)})"
    if isinstance(e, E.Call):
        return f"{e.name}({', '.join(text(a) for a in e.args)})"
    if isinstance(e, E.FuncRef):
        return f"{e.func.name}[{', '.join(text(a) for a in e.args)}]"
    if isinstance(e, E.Reduce):
        return f"{e.op}({text(e.body)} over {e.rdom.name})"
    custom = getattr(e, "to_str", None)
    if custom is not None:
        return custom(text)
    return f"<{type(e).__name__}>"


_PYOP = {"add": "+", "sub": "-", "mul": "*", "div": "/", "floordiv": "//", "mod": "%",
         "bitand": "&", "bitor": "|", "bitxor": "^", "shl": "<<", "shr": ">>", "eq": "==",
         "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">=", "and": "&", "or": "|"}


def _plain_name(name):
    return name.isidentifier() and name.isascii() and not keyword.iskeyword(name) \
        and name not in ("sl", "name")


def _operand_python(e, other):
    """``expr_to_python`` of an operand; a constant of the other operand's type prints as
    a plain literal, which takes that type back (``W % 8``, not ``W % sl.cast(sl.int64, 8)``)."""
    if isinstance(e, E.Const) and not isinstance(other, E.Const) and e.dtype == other.dtype \
            and not e.dtype.is_bool and repr(e.value) not in ("nan", "inf", "-inf"):
        return repr(e.value)
    return expr_to_python(e)


def expr_to_python(e) -> str:
    """Python source that rebuilds a (size / Param) expression with ``sl`` and the names of
    its Vars in scope. Example: ``expr_to_python(M % 16 == 0)`` gives ``'((M % 16) == 0)'``."""
    p = expr_to_python
    if isinstance(e, E.Const):
        v = repr(e.value)
        return v if e.weak or e.dtype.name in ("int32", "float32", "bool") else \
            f"sl.cast(sl.{e.dtype.name}, {v})"
    if isinstance(e, E.Var):
        # a name that is not a plain identifier (a Param "my-alpha", a size "lambda") is
        # quoted, so the printed fact parses back (schedule/fact_text.py)
        return e.name if _plain_name(e.name) else f"name({e.name!r})"
    if isinstance(e, E.BinOp):
        a, b = _operand_python(e.a, e.b), _operand_python(e.b, e.a)
        if e.op in ("min", "max"):
            return f"sl.{e.op}({a}, {b})"
        return f"({a} {_PYOP[e.op]} {b})"
    if isinstance(e, E.UnOp):
        return f"(-{p(e.a)})" if e.op == "neg" else f"(~{p(e.a)})"
    if isinstance(e, E.Select):
        return f"sl.select({p(e.cond)}, {p(e.t)}, {p(e.f)})"
    if isinstance(e, E.Cast):
        return f"sl.cast(sl.{e.dtype.name}, {p(e.value)})"
    if isinstance(e, E.Call):
        return f"sl.{e.name}({', '.join(p(a) for a in e.args)})"
    raise ValueError(f"cannot print {expr_to_str(e)} as Python")
