"""Funcs and Inputs (SPEC §1); RDoms and inline reductions are in ``rdom.py``.

A Func has a pure definition and zero or more update definitions; each is a
``Definition`` (one schedulable stage). Example::

    f = Func("f"); f[x] = g[x]
    r = RDom((1, N - 1)); f[r] = f[r - 1] + g[r]     # a scan: update stage 1
"""
from __future__ import annotations

from ..deep_recursion import deep_recursion
from ..errors import AlgorithmError
from . import expr as E
from . import types as T
from .evaluate import evaluate
from .rdom import (IDENT, RDom, _check_name, _check_one_version_of_each_rdom,  # noqa: F401
                   _counter, _free, _predicate_vars, _settle_rdom_names, argmax, argmin,
                   maximum, minimum, product, reduce_identity, size_expr, sum,  # noqa: A004
                   within_arg_range)


def vars(names: str):
    """``i, j = sl.vars("i j")``: several pure Vars at once."""
    if not isinstance(names, str):
        raise AlgorithmError(f"sl.vars: give the names as one str, e.g. sl.vars(\"i j\"), got "
                             f"{names!r}")
    return tuple(E.Var(n) for n in names.replace(",", " ").split())


def _shape_size(x, owner):
    """A dimension of an Input's or Func's shape (``owner`` is "Input A" / "Func f"): a
    size expression of ints and symbolic sizes only. A kernel binds sizes from its
    arguments' shapes, never from scalar values, so a Param (or a Var) in a shape could
    never be bound."""
    size = size_expr(x, f"{owner} shape")
    others = []
    E.walk_expr(size, lambda n: others.append(n) if isinstance(n, E.Var)
                and not isinstance(n, E.SizeVar) else None)
    if others:
        v = others[0]
        what = f"the Param {v.name}" if isinstance(v, E.Param) else f"the Var {v.name}"
        raise AlgorithmError(f"{owner} shape: {x} uses {what}, which cannot set a size; sizes "
                             "are ints or str names of symbolic sizes, which a kernel binds from "
                             "its arguments' shapes (e.g. shape=(A.shape[0],) or shape=('N',))")
    return size


def index_exprs(args, what):
    """The integer index expressions of ``what[args]`` (``args`` a tuple; ``what`` the text
    naming what is read, e.g. ``"A"`` or ``"mirror(A)"``): a slice or a float index is an
    AlgorithmError naming it. Example: ``index_exprs((x, 1), "A")``."""
    out = []
    for a in args:
        if isinstance(a, slice):
            raise AlgorithmError(f"{what}[...]: slices are not indices; use Vars or integer "
                                 "expressions")
        e = E.to_expr(a)
        if not (e.dtype.is_int or e.dtype.is_bool):
            raise AlgorithmError(f"{what}[{', '.join(str(E.to_expr(x)) for x in args)}]: "
                                 f"index {e} has type {e.dtype}; indices must be integers "
                                 "(use sl.cast(sl.int32, ...))")
        out.append(E.fix_weak(e))
    return out


class Callable:
    """Shared behaviour of things that can be read at an index: Func and Input."""

    name: str
    dtype: T.DType

    def _index_args(self, args):
        return index_exprs(args if isinstance(args, tuple) else (args,), self.name)

    def __repr__(self):
        return f"{type(self).__name__}({self.name!r})"


class Input(Callable):
    """A kernel input buffer: ``A = sl.Input("A", sl.float32, ("M", "K"))``.

    Dims are ints or str names of symbolic sizes; ``A.shape[0]`` is an int64 expression.
    A 0-d Input (shape ``()``) takes a 0-d array or a numpy scalar and is read as ``A[()]``.
    """

    def __init__(self, name, dtype, shape):
        self.name = _check_name("Input", name)
        E.check_argument_name("Input", name)
        try:
            self.dtype = T.as_dtype(dtype)
        except AlgorithmError as e:
            raise AlgorithmError(f"Input {name}: {e}") from None
        if isinstance(shape, (int, str)):
            shape = (shape,)
        try:
            shape = tuple(shape)
        except TypeError:
            raise AlgorithmError(f"Input {name}: the shape must be a tuple of sizes (ints, or "
                                 f"strs naming symbolic sizes), got {shape!r}") from None
        self.shape = tuple(_shape_size(s, f"Input {name}") for s in shape)
        for x in self.shape:
            if isinstance(x, E.SizeVar):
                x.source = self

    @property
    def ndim(self):
        return len(self.shape)

    def __getitem__(self, args):
        args = self._index_args(args)
        if len(args) != len(self.shape):
            raise AlgorithmError(f"{self.name} has {len(self.shape)} dimensions but is indexed "
                                 f"with {len(args)}: {self.name}[{', '.join(map(str, args))}]")
        return E.FuncRef(self, args)


def settle_func_names(funcs, taken):
    """Name the unnamed Funcs of a pipeline, given in discovery order from its outputs:
    ``f``, else the first of ``f1``, ``f2``, ... that is not in ``taken`` (the pipeline's
    other names); the helper Func of an inline reduction in an unnamed Func is named after
    it (``f_sum0``). A process-wide counter would name them differently each time the
    algorithm is built, so ``str(schedule)`` would not replay onto the rebuilt algorithm.
    Each Func is named once, by the first Schedule."""
    taken = set(taken) | {f.name for f in funcs if not f.auto_named}
    for f in funcs:
        if not f.auto_named:
            continue
        hint = f.name_hint
        if isinstance(hint, tuple):      # a helper of another Func: that Func's name + suffix
            owner, suffix = hint
            hint = owner.name + suffix
        name, k = hint, 0
        while name in taken:
            k += 1
            name = f"{hint}{k}"
        taken.add(name)
        f.name, f.auto_named = name, False




# ------------------------------------------------------------------------------- Funcs

class Definition:
    """One stage of a Func: ``func[args] = value`` (stage 0 is the pure definition).

    ``loop_vars`` are the stage's loops before scheduling, outermost first: pure Vars in
    argument order, then reduction variables in RDom order.
    """

    def __init__(self, func, index, args, value, pure_vars, rvars, predicate):
        self.func, self.index, self.args, self.value = func, index, tuple(args), value
        self.pure_vars, self.rvars, self.predicate = list(pure_vars), list(rvars), predicate

    @property
    def loop_vars(self):
        return self.pure_vars + self.rvars

    @property
    def is_update(self):
        return self.index > 0

    @property
    def reductions(self):
        """The inline Reduce nodes of this stage (pure definition only), each once."""
        cached = self.__dict__.get("_reductions")
        if cached is not None and cached[0] is self.value:
            return list(cached[1])
        out, seen = [], set()

        def go(n):
            if id(n) in seen:
                return
            seen.add(id(n))
            if isinstance(n, E.Reduce):
                out.append(n)
                return
            for k in n.kids():
                go(k)
        go(self.value)
        self._reductions = (self.value, out)
        return list(out)

    def stage_name(self):
        return self.func.name if self.index == 0 else f"{self.func.name}.update({self.index - 1})"


def cached_on_definition(d, key, compute):
    """``compute()``, kept on the definition ``d`` under ``key`` while its args, value and
    predicate are the same objects: every Schedule of a pipeline (the autotuner builds
    dozens) walks the same definitions, and a large one's walks took seconds.
    Example: ``cached_on_definition(d, "_refs", lambda: walk(d))``."""
    hit = d.__dict__.get(key)
    if hit is not None and hit[0] is d.args and hit[1] is d.value and hit[2] is d.predicate:
        return hit[3]
    out = compute()
    d.__dict__[key] = (d.args, d.value, d.predicate, out)
    return out


def definition_exprs(d):
    """Every expression a definition depends on: arguments, value, predicate, and the
    bounds and predicates of the RDoms it reduces over."""
    return list(cached_on_definition(d, "_exprs", lambda: _definition_exprs(d)))


def _definition_exprs(d):
    out = list(d.args) + [d.value]
    if d.predicate is not None:
        out.append(d.predicate)
    rdoms = []
    for v in d.rvars:
        if all(v.rdom is not r for r in rdoms):
            rdoms.append(v.rdom)

    def find(n):
        if isinstance(n, E.Reduce) and all(n.rdom is not r for r in rdoms):
            rdoms.append(n.rdom)
    for e in list(out):
        E.walk_expr(e, find)
    for rd in rdoms:
        out.extend(x for b in rd.bounds for x in b)
        if rd.predicate is not None:
            out.append(rd.predicate)
    return out


class Func(Callable):
    """A function defined over an integer domain: ``C = sl.Func("C", shape=(M, N))``.

    ``shape`` is required for outputs. ``C[i, j] = expr`` sets the pure definition; later
    assignments (including ``+=``) add update stages.
    """

    def __init__(self, name=None, shape=None):
        self.name = _check_name("Func", name if name is not None else f"f{next(_counter)}")
        # an unnamed Func is named when a Schedule first covers it (settle_func_names)
        self.auto_named = self.born_unnamed = name is None
        self.name_hint = "f"
        self.shape = None if shape is None else tuple(
            _shape_size(s, f"Func {self.name}") for s in (shape if isinstance(shape, (tuple, list))
                                               else (shape,)))
        self.definitions: list[Definition] = []
        self.helpers: list[Func] = []   # Funcs made from nested / extra inline reductions
        # Inputs that are kernel arguments of any pipeline holding this Func though it may
        # not read them (a frontend graph whose only read of an input is an empty slice)
        self.extra_inputs: list[Input] = []
        # the element type of a Func that is read before it is defined (``declare``)
        self.declared_dtype = None

    def declare(self, dtype):
        """Let this Func (which has a ``shape``) be read before its definition, which must
        then give ``dtype``: a frontend op builds its Funcs only when a pipeline needs
        them. A Schedule reaching it still undefined raises a ScheduleError.
        Example: ``f = sl.Func("f", shape=(4,)); f.declare(sl.float32); g[i] = f[i] + 1``."""
        if self.shape is None or self.definitions:
            raise AlgorithmError(f"Func {self.name}: only a Func with a shape= and no "
                                 "definition yet can be declared")
        self.declared_dtype = T.as_dtype(dtype)
        return self

    @property
    def dtype(self):
        if not self.definitions and self.declared_dtype is not None:
            return self.declared_dtype
        if not self.definitions:
            raise AlgorithmError(f"Func {self.name} is used before it is defined; define it with "
                                 f"{self.name}[...] = ... first")
        return self.definitions[0].value.dtype

    @property
    def defined(self):
        return bool(self.definitions)

    @property
    def ndim(self):
        return len(self.definitions[0].args) if self.definitions else (
            len(self.shape) if self.shape else None)

    @property
    def args(self):
        return self.definitions[0].args

    def __getitem__(self, args):
        args = self._index_args(args)
        declared = self.declared_dtype is not None
        if (self.definitions or declared) and len(args) != self.ndim:
            raise AlgorithmError(f"{self.name} has {self.ndim} dimensions but is indexed with "
                                 f"{len(args)}: {self.name}[{', '.join(map(str, args))}]")
        if not self.definitions and not declared:
            raise AlgorithmError(f"Func {self.name} is used before it is defined; define it with "
                                 f"{self.name}[...] = ... first")
        return E.FuncRef(self, args)

    @deep_recursion(AlgorithmError, "defining a Func")
    def __setitem__(self, args, value):
        if not isinstance(args, tuple):
            args = (args,)
        value = E.to_expr(value)
        self._check_distinct_names(args, value)
        if not self.definitions:
            self._define_pure(args, value)
        else:
            self._define_update(args, value)

    def _check_distinct_names(self, args, value):
        """Loops are named by their variables: a pure Var and a reduction variable, or the
        variables of two different RDoms, of one name in one definition would be one loop
        (wrong sums), and a directive naming it could reach either."""
        _settle_rdom_names(list(args) + [value])
        kinds = {}

        def visit(n):
            if isinstance(n, E.RVar):
                rdom = getattr(n.rdom, "origin", n.rdom)
                kinds.setdefault(n.name, {}).setdefault((id(rdom), n.dim), "an RDom variable")
            elif isinstance(n, E.Var) and not isinstance(n, (E.SizeVar, E.Param)):
                kinds.setdefault(n.name, {}).setdefault("var", "a Var")
        for e in list(args) + [value]:
            for part in (e.vars if isinstance(e, RDom) else [e]):
                E.walk_expr(E.to_expr(part), visit)
        for vname, found in kinds.items():
            if len(found) > 1:
                what = " and ".join(sorted(set(found.values()))) if len(set(found.values())) > 1 \
                    else "two different RDoms' variables"
                raise AlgorithmError(f"{self.name}: {what} are both named {vname!r} in one "
                                     "definition; give them different names (loops and schedule "
                                     "directives are named by them)")

    # -- pure definition
    def _define_pure(self, args, value):
        name = self.name
        for a in args:
            if isinstance(a, RDom) or isinstance(a, E.RVar):
                raise AlgorithmError(f"the first definition of {name} must use pure Vars, got the "
                                     f"reduction variable {E.to_expr(a)}; define {name}[x] = ... "
                                     "first, then add the update")
            if not isinstance(a, E.Var) or isinstance(a, (E.SizeVar, E.Param)):
                raise AlgorithmError(f"the first definition of {name} must use pure Vars as "
                                     f"arguments, got {E.to_expr(a)}")
        names = [a.name for a in args]
        if len(set(names)) != len(names):
            twice = next(n for n in names if names.count(n) > 1)
            same = [a for a in args if a.name == twice]
            if any(a is not same[0] for a in same[1:]):
                raise AlgorithmError(f"{name}[{', '.join(names)}]: two different Vars are both "
                                     f"named {twice}; give each Var its own name "
                                     "(sl.vars('x y'))")
            raise AlgorithmError(f"{name}[{', '.join(names)}]: each Var may appear once")
        if self.shape is not None and len(self.shape) != len(args):
            raise AlgorithmError(f"{name} has a shape of {len(self.shape)} dimension(s) but is "
                                 f"defined with {len(args)} argument(s); give one Var per "
                                 f"dimension, or change {name}'s shape=")
        value = E.fix_weak(value)
        for v in _free(value, E.Var):
            if isinstance(v, (E.SizeVar, E.Param)):
                continue
            if isinstance(v, E.RVar):
                raise AlgorithmError(f"{name}: the reduction variable {v.name} appears outside a "
                                     f"reduction over its RDom; wrap it in sl.sum(...) (or another "
                                     "reduction, or name it in over=) or write an update "
                                     "definition")
            if all(v.name != n for n in names):
                raise AlgorithmError(f"{name}[{', '.join(names)}] uses the Var {v.name}, which is "
                                     f"not one of its arguments; add {v.name} to the left-hand "
                                     f"side ({name}[{', '.join(names + [v.name])}] = ...), or "
                                     "reduce over an RDom instead of a Var (sl.sum(...))")
        for v in _predicate_vars(value):
            if all(v.name != n for n in names):
                raise AlgorithmError(f"{name}[{', '.join(names)}] uses the Var {v.name} in an "
                                     f"RDom's where(...) predicate, but {v.name} is not one of "
                                     f"its arguments")
        if self.declared_dtype is not None and value.dtype != self.declared_dtype:
            raise AlgorithmError(f"{name} was declared {self.declared_dtype.name} but is defined "
                                 f"with a {value.dtype.name} value; cast the value")
        value = self._split_reductions(value, names)
        rvars, pred = [], None
        reds = Definition(self, 0, args, value, [], [], None).reductions
        if reds:
            rd = reds[0].rdom
            rvars, pred = list(rd.vars), rd.predicate
        self.definitions.append(Definition(self, 0, args, value, list(args), rvars, pred))

    def _split_reductions(self, value, names):
        """Keep the reductions over the first RDom (not nested) in this stage; every other
        inline reduction becomes a helper Func computed at root."""
        primary, visited, memo = [], set(), {}

        def find(n):
            if id(n) in visited:
                return
            visited.add(id(n))
            if isinstance(n, E.Reduce):
                if not primary:
                    primary.append(n.rdom)
                return
            for k in n.kids():
                find(k)
        find(value)

        def go(n, top):
            key = (id(n), top)      # shared sub-expressions are rewritten once
            if key in memo:
                return memo[key]
            if isinstance(n, E.Reduce):
                body = go(n.body, False)
                if top and primary and n.rdom is primary[0]:
                    out = n if body is n.body else E.Reduce(n.op, body, n.rdom, n.dtype)
                else:
                    out = self._helper(E.Reduce(n.op, body, n.rdom, n.dtype))
            else:
                kids = n.kids()
                out = n if not kids else n.with_kids(tuple(go(k, top) for k in kids))
            memo[key] = out
            return out
        return go(value, True)

    def _helper(self, red, names=None):
        """Make a helper Func computing ``red`` at every point of the variables it uses
        (pure Vars, and reduction variables of enclosing reductions)."""
        own = {id(v) for v in red.rdom.vars}
        free, seen = [], set()
        used = all_nodes(red.body, E.Var)
        if red.rdom.predicate is not None:
            used += all_nodes(red.rdom.predicate, E.Var)
        for v in used:
            if isinstance(v, (E.SizeVar, E.Param)) or id(v) in own or v.name in seen:
                continue
            seen.add(v.name)
            free.append(v)
        hvars = [E.Var(v.name) for v in free]
        suffix = f"_{red.op}{len(self.helpers)}"
        h = Func(self.name + suffix)
        h.born_unnamed = True   # no user variable holds it: str(schedule) names it by string
        h.helper_of = (self, red.op)    # errors about it name the user's Func
        if self.auto_named:     # named after this Func once it has its settled name
            h.auto_named, h.name_hint = True, (self, suffix)
        body = E.substitute(red.body, {v.name: hv for v, hv in zip(free, hvars)})
        h[tuple(hvars)] = E.Reduce(red.op, body, red.rdom, red.dtype)
        self.helpers.append(h)
        if red.op in ("argmax", "argmin"):
            return within_arg_range(E.FuncRef(h, free), red.rdom)
        return E.FuncRef(h, free)

    # -- update definitions
    def _define_update(self, args, value):
        name = self.name
        stage = f"{name} update {len(self.definitions) - 1}"
        if len(args) != self.ndim:
            raise AlgorithmError(f"{stage}: {name} has {self.ndim} dimensions but the update "
                                 f"assigns {name}[{', '.join(str(E.to_expr(a)) for a in args)}]")
        args = self._index_args(args)
        value = E.to_expr(value)
        dt = self.dtype
        if E.is_weak(value):
            value = E._literal_as(value, dt, "assignment", f"Func {name}")
        if value.dtype.element() != dt:
            if not T.can_represent(dt, value.dtype):
                hint = ""
                init = self.definitions[0].value
                if value.dtype.is_float and not dt.is_float and isinstance(init, E.Const):
                    # the usual slip: f[i] = 0, then f[i] += A[i, r] with float A
                    hint = (f"; or, if {name} should hold floats, give its first definition a "
                            f"float value: {name}[...] = {float(init.value)!r} (not "
                            f"{init.value!r})")
                raise AlgorithmError(f"{stage}: storing a {value.dtype} value into {name}, a {dt} "
                                     f"Func, would lose precision; wrap it in sl.cast({dt}, ...)"
                                     + hint)
            value = E.cast(dt, value)
        pure_vars, rvars, rdoms = [], [], []
        for pos, a in enumerate(args):
            if isinstance(a, E.Var) and not isinstance(a, (E.RVar, E.SizeVar, E.Param)):
                if any(a.name == p.name for p in pure_vars):
                    raise AlgorithmError(f"{stage}: the pure Var {a.name} appears twice on the "
                                         "left-hand side")
                pure_vars.append(a)
        exprs = list(args) + [value]
        for e in list(args) + [value]:
            for v in _free(e, E.RVar):
                if v.rdom.predicate is not None and all(v.rdom.predicate is not x for x in exprs):
                    exprs.append(v.rdom.predicate)
        for e in exprs:
            for v in _free(e, E.Var):
                if isinstance(v, E.RVar):
                    if all(v is not r for r in rvars):
                        rvars.append(v)
                    if all(v.rdom is not r for r in rdoms):
                        rdoms.append(v.rdom)
                elif not isinstance(v, (E.SizeVar, E.Param)) and all(v is not p for p in pure_vars):
                    if all(v.name != p.name for p in pure_vars):
                        raise AlgorithmError(f"{stage}: the Var {v.name} is used but is not a bare "
                                             f"argument of the left-hand side {name}[...]; pure Vars "
                                             "in an update must appear as arguments")
        for v in _predicate_vars(value):
            if all(v.name != p.name for p in pure_vars):
                raise AlgorithmError(f"{stage}: the Var {v.name} is used in an RDom's where(...) "
                                     f"predicate but is not a bare argument of the left-hand side "
                                     f"{name}[...]; pure Vars in an update must appear as arguments")
        _check_one_version_of_each_rdom(rdoms, stage)
        # pure vars keep their position in every self-reference (so they carry no dependence)
        for ref in all_nodes(value, E.FuncRef):
            if ref.func is self:
                for pos, a in enumerate(args):
                    if isinstance(a, E.Var) and any(a is p for p in pure_vars):
                        b = ref.args[pos]
                        if not (isinstance(b, E.Var) and b.name == a.name):
                            raise AlgorithmError(
                                f"{stage}: the pure Var {a.name} is argument {pos} on the left but "
                                f"{name} is read at [{', '.join(map(str, ref.args))}]; a pure Var "
                                "must stay in the same position in every self-reference")
        value = self._split_reductions_update(value, [p.name for p in pure_vars])
        ordered_rvars = [v for rd in rdoms for v in rd.vars if any(v is r for r in rvars)]
        preds = [rd.predicate for rd in rdoms if rd.predicate is not None]
        pred = None
        for p in preds:
            pred = p if pred is None else E.binary("and", pred, p)
        self.definitions.append(Definition(self, len(self.definitions), args, value, pure_vars,
                                           ordered_rvars, pred))

    def _split_reductions_update(self, value, names):
        def go(n):
            if isinstance(n, E.Reduce):
                self._refuse_reduction_of_self(n)
                return self._helper(E.Reduce(n.op, go(n.body), n.rdom, n.dtype))
            kids = n.kids()
            return n if not kids else n.with_kids(tuple(go(k) for k in kids))
        return go(value)

    def _refuse_reduction_of_self(self, red):
        """An inline reduction in an update is a helper Func computed before the update; one
        that reads this Func would read the values the update itself produces (a cycle)."""
        parts = [red.body] + ([red.rdom.predicate] if red.rdom.predicate is not None else [])
        if not any(ref.func is self for p in parts for ref in all_nodes(p, E.FuncRef)):
            return
        name = self.name
        raise AlgorithmError(
            f"{name} update {len(self.definitions) - 1}: the inline sl.{red.op}(...) reads "
            f"{name} itself; an inline reduction is computed as its own Func before the update, "
            f"so it would read the values this update produces (a cycle). Give the values it "
            f"reduces their own Func ({name}0[...] = ...; {name}[...] = {name}0[...]) and reduce "
            f"over that, or fold it into this update over the RDom (e.g. "
            f"{name}[i, 0] = sl.max({name}[i, 0], {name}[i, r]))")

    def stage(self, n):
        return self.definitions[n]


def all_nodes(e, cls):
    """Every distinct node of class ``cls`` in ``e``, bound or not, in first-seen order
    (left to right). Example: ``all_nodes(value, E.FuncRef)``."""
    seen, out = set(), []

    def go(n):
        if id(n) in seen:
            return
        seen.add(id(n))
        if isinstance(n, cls):
            out.append(n)
        for k in n.kids():
            go(k)
    go(e)
    return out


ASSUMPTIONS: list = []


def assume(cond):
    """``sl.assume(A.shape[0] % 16 == 0)``: a fact about sizes / Params the compiler may rely
    on in every pipeline that mentions all of its variables; checked when a kernel is called.
    Returns the condition."""
    cond = check_fact(cond, "sl.assume", AlgorithmError)
    ASSUMPTIONS.append(cond)
    return cond


def check_fact(cond, where, error):
    """``cond`` as a bool expression about sizes and Params, or ``error`` saying what is
    wrong with it: a fact about a loop Var, or one with no variable, cannot be checked
    when a kernel is called (and a constant one is always or never true)."""
    cond = E.to_expr(cond)
    if not cond.dtype.is_bool:
        raise error(f"{where}({cond}): the fact must be a bool expression (a comparison)")
    loop_vars, facts_vars = [], []

    def visit(n):
        if isinstance(n, (E.SizeVar, E.Param)):
            facts_vars.append(n)
        elif isinstance(n, E.Var):
            loop_vars.append(n)
    E.walk_expr(cond, visit)
    if loop_vars:
        raise error(f"{where}({cond}): {loop_vars[0].name} is a loop variable; a fact is about "
                    "sizes (A.shape[0]) and Params, checked when the kernel is called. To keep "
                    "an index in bounds, clamp it or read through a boundary condition")
    if not facts_vars:
        # constant sizes turn A.shape[1] % 4 == 0 into 16 % 4 == 0: true, it changes nothing
        # (so one schedule serves fixed and symbolic sizes); false, it can never hold
        if not bool(evaluate(cond, {}, exact=True)):
            raise error(f"{where}({cond}): the fact is false (it mentions no size or Param "
                        "that a call could change: the sizes in it are constants); state a "
                        "fact that holds, or make the sizes symbolic (str names in the shape)")
    return cond
