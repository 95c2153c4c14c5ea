"""One C-like renderer for the GPU targets: loop IR ``GpuKernel``s -> kernel source text.
What differs between CUDA, HIP and Metal (qualifiers, thread indices, barriers, math
names, bit casts) is a ``Language`` table defined in each target's module, as tinygrad's
cstyle renderers do.

Semantics follow the CPU backend: integer ``//`` and ``%`` floor (0 for a zero divisor),
float min / max let a NaN through, shifts read their amount as unsigned and shift every
bit out past the width, float16 / bfloat16 values are computed in float and rounded to
their type after every operation (stored as 16-bit integers).
Example: ``render_kernels(stmt, args, "sl_C", CUDA)`` -> ``(source, [KernelInfo, ...])``.
"""
from __future__ import annotations

import math
import re
import struct

from ..algo import expr as E
from ..algo import types as T
from ..errors import CompileError
from ..lower import ir
from ..lower.simplify import _no_overflow


class Language:
    """What one GPU language spells differently. Templates take ``{}`` fields."""

    def __init__(self, name, *, prelude, kernel_prefix, buffer_param, scalar_param,
                 block_idx, thread_idx, barrier, shared, types, bits_float,
                 math, extra_params=(), has_float64=True, launch_bounds=None,
                 restrict="__restrict__", int64_suffix=("ll", "ull")):
        fields = dict(locals())
        del fields["self"], fields["name"]
        self.name, self._fields = name, fields
        self.__dict__.update(fields)

    def fields(self):
        """The keyword arguments this table was made from (to derive another language)."""
        return dict(self._fields)


class KernelInfo:
    """A rendered kernel: its symbol, parameters ``[(name, "buffer"|"scalar", dtype)]`` in
    call order (IR names), block threads (x, y, z), and its GpuKernel (grid extents)."""

    def __init__(self, symbol, params, threads, node, status):
        self.symbol, self.params, self.threads, self.node = symbol, params, threads, node
        self.status = status        # True when the kernel reports failed asserts


HALF_TYPES = (T.float16, T.bfloat16)

# shared by the languages: C++ templates and 16-bit float conversions in terms of the
# language's bit casts (F2U / U2F), so float16 rounds the same on every target
COMMON_PRELUDE = r"""
template<typename X> SL_FN X sl_floordiv(X a, X b) {
  if (b == 0) return 0;
  if ((X)-1 < 0 && b == (X)-1) return (X)((sl_u64)0 - (sl_u64)a);  // MIN / -1 wraps
  X q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) q -= 1;
  return q;
}
template<typename X> SL_FN X sl_floormod(X a, X b) {
  if (b == 0 || ((X)-1 < 0 && b == (X)-1)) return 0;
  X r = a % b;
  if (r != 0 && ((r < 0) != (b < 0))) r += b;
  return r;
}
template<typename X> SL_FN X sl_fmod_py(X a, X b, X r) {
  if (r == 0) return (b < 0) ? -(X)0 : (X)0;
  return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
}
template<typename X> SL_FN X sl_fdiv_py(X a, X b, X r) {
  X q = a / b;
  if (b == 0) return q;
  X d = (a - r) / b;
  if (r != 0 && ((r < 0) != (b < 0))) d -= 1;
  if (d == 0) return (q < 0 || (q == 0 && (X)1 / q < 0)) ? -(X)0 : (X)0;
  if (!(d < (X)4503599627370496.0 && d > -(X)4503599627370496.0)) return d;
  X f = (X)(long long)d;
  if (f > d) f -= 1;
  return (d - f > (X)0.5) ? f + 1 : f;
}
template<typename W, typename F> SL_FN W sl_f2i(F x, F limit) {
  return (x >= -limit && x < limit) ? (W)x : (W)((sl_u64)1 << (8 * sizeof(W) - 1));
}
template<typename X> SL_FN X sl_fmin(X a, X b) { return (a < b || a != a) ? a : b; }
template<typename X> SL_FN X sl_fmax(X a, X b) { return (a > b || a != a) ? a : b; }
template<typename X> SL_FN X sl_imin(X a, X b) { return a < b ? a : b; }
template<typename X> SL_FN X sl_imax(X a, X b) { return a > b ? a : b; }
template<typename X, typename U> SL_FN X sl_shl(X a, U b) {
  sl_u64 n = (sl_u64)b & ((sizeof(U) == 8) ? ~(sl_u64)0 : (((sl_u64)1 << (8 * sizeof(U))) - 1));
  if (n >= 8 * sizeof(X)) return 0;
  return (X)((sl_u64)a << n);
}
template<typename X, typename U> SL_FN X sl_shr(X a, U b) {
  sl_u64 n = (sl_u64)b & ((sizeof(U) == 8) ? ~(sl_u64)0 : (((sl_u64)1 << (8 * sizeof(U))) - 1));
  if (n >= 8 * sizeof(X)) return (a < 0) ? (X)-1 : (X)0;
  return (X)(a >> n);
}
template<typename X> SL_FN X sl_ipow(X a, X b) {
  if (b < 0) return (a == 1) ? 1 : (a == (X)-1 ? ((b & 1) ? (X)-1 : 1) : 0);
  X r = 1;
  while (b) { if (b & 1) r = (X)((sl_u64)r * (sl_u64)a); a = (X)((sl_u64)a * (sl_u64)a); b >>= 1; }
  return r;
}
SL_FN unsigned short sl_f2h(float f) {
  unsigned int x = F2U(f), sign = (x >> 16) & 0x8000u;
  x &= 0x7fffffffu;
  if (x >= 0x7f800000u) return (unsigned short)(sign | (x > 0x7f800000u ? 0x7e00u : 0x7c00u));
  if (x >= 0x477ff000u) return (unsigned short)(sign | 0x7c00u);
  if (x < 0x38800000u) {
    if (x < 0x33000000u) return (unsigned short)sign;
    unsigned int m = (x & 0x7fffffu) | 0x800000u, shift = 126u - (x >> 23);
    unsigned int r = m >> shift, rem = m & ((1u << shift) - 1u), half = 1u << (shift - 1u);
    if (rem > half || (rem == half && (r & 1u))) r += 1u;
    return (unsigned short)(sign | r);
  }
  unsigned int r = (x - 0x38000000u) >> 13, rem = x & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (r & 1u))) r += 1u;
  return (unsigned short)(sign | r);
}
SL_FN float sl_h2f(unsigned short h) {
  unsigned int s = ((unsigned int)h & 0x8000u) << 16, e = ((unsigned int)h >> 10) & 0x1fu,
               m = (unsigned int)h & 0x3ffu;
  if (e == 0x1fu) return U2F(s | 0x7f800000u | (m << 13));
  if (e == 0u) { float v = (float)m * 5.9604644775390625e-8f; return s ? -v : v; }
  return U2F(s | ((e + 112u) << 23) | (m << 13));
}
SL_FN unsigned short sl_f2b(float f) {
  unsigned int x = F2U(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return (unsigned short)((x >> 16) | 0x40u);
  return (unsigned short)((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}
SL_FN float sl_b2f(unsigned short b) { return U2F((unsigned int)b << 16); }
SL_FN float sl_rh(float f) { return sl_h2f(sl_f2h(f)); }
SL_FN float sl_rb(float f) { return sl_b2f(sl_f2b(f)); }
"""


# words a Func or Input name must not become in the source: C++ keywords, the GPU languages'
# types, builtins and math functions the renderer calls (a parameter of that name would
# shadow them); names starting sl_ / SL_ / _ are the prelude's or the compiler's
_RESERVED = set("""
alignas alignof and and_eq asm auto bitand bitor bool break case catch char char8_t char16_t
char32_t class compl concept const consteval constexpr constinit const_cast continue co_await
co_return co_yield decltype default delete do double dynamic_cast else enum explicit export
extern false float for friend goto if inline int long mutable namespace new noexcept not not_eq
nullptr operator or or_eq private protected public register reinterpret_cast requires return
short signed sizeof static static_assert static_cast struct switch template this thread_local
throw true try typedef typeid typename union unsigned using virtual void volatile wchar_t while
xor xor_eq threadIdx blockIdx blockDim gridDim warpSize half bfloat uchar ushort uint ulong
kernel device threadgroup constant thread metal precise as_type F2U U2F fabs fabsf erf erff
rsqrt rsqrtf exp expf log logf sqrt sqrtf sin sinf cos cosf tanh tanhf floor floorf ceil ceilf
pow powf fmod fmodf min max abs""".split())


def _ident(name, taken):
    """A C identifier for an IR name (``C.s0.i.o`` -> ``C_s0_i_o``), unique in ``taken``."""
    base = re.sub(r"[^0-9A-Za-z_]", "_", name)
    if not base or base[0].isdigit() or base in _RESERVED or base[0] == "_" or \
            base[:3] in ("sl_", "SL_"):
        base = "v_" + base
    ident, n = base, 1
    while ident in taken.values() and taken.get(name) != ident:
        n += 1
        ident = f"{base}_{n}"
    taken[name] = ident
    return ident


class _Renderer:
    def __init__(self, lang, buffer_types):
        self.lang = lang
        self.buffer_types = buffer_types      # buffer name -> element dtype
        self.names = {}
        self.lines = []
        self.indent = 1
        self.status = False

    # ------------------------------------------------------------------ names, types
    def name(self, n):
        return self.names.get(n) or _ident(n, self.names)

    def ctype(self, dt):
        dt = dt.element()
        if dt in HALF_TYPES:
            return "float"
        if dt == T.float64 and not self.lang.has_float64:
            raise CompileError(f"{self.lang.name} has no 64-bit floats: cast the float64 values "
                               "of this pipeline to float32, or compile for cuda or hip")
        return self.lang.types[dt.name]

    def storage_type(self, dt):
        dt = dt.element()
        return "unsigned short" if dt in HALF_TYPES else self.ctype(dt)

    def emit(self, text):
        self.lines.append("  " * self.indent + text)

    # ------------------------------------------------------------------ expressions
    def expr(self, e):
        if e.dtype.lanes != 1:
            raise CompileError("a vector expression reached the GPU renderer; this is a "
                               "schedlang bug, please report it")
        m = getattr(self, "e_" + type(e).__name__, None)
        if m is None:
            raise CompileError(f"the GPU targets cannot render a {type(e).__name__} expression")
        return m(e)

    def round_to(self, text, dt):
        """``text`` (a float value) rounded to ``dt`` when dt is a 16-bit float."""
        if dt.element() == T.float16:
            return f"sl_rh({text})"
        if dt.element() == T.bfloat16:
            return f"sl_rb({text})"
        return text

    def e_Const(self, e):
        dt, v = e.dtype.element(), e.value
        if dt.is_bool:
            return "true" if v else "false"
        if dt.is_float:
            v = float(v)
            if dt == T.float64:
                if math.isfinite(v):
                    return repr(v)
                bits = struct.unpack("<Q", struct.pack("<d", v))[0]
                return self.lang.bits_float[64].format(f"{bits}{self.lang.int64_suffix[1]}")
            f32 = struct.unpack("<f", struct.pack("<f", v))[0] if math.isfinite(v) else v
            if math.isfinite(f32):
                return repr(f32) + "f"
            bits = struct.unpack("<I", struct.pack("<f", v))[0]
            return self.lang.bits_float[32].format(f"{bits}u")
        v = int(v)
        c = self.ctype(dt)
        if dt.bits == 64:
            signed, unsigned = self.lang.int64_suffix
            if dt.is_unsigned:
                return f"{v}{unsigned}"
            if v == -(1 << 63):
                return f"({c})(-9223372036854775807{signed} - 1)"
            return f"{v}{signed}"
        return f"({c}){v}" if v >= 0 else f"({c})({v})"

    def e_Var(self, e):
        return self.name(e.name)

    e_SizeVar = e_Param = e_RVar = e_Var

    def e_Load(self, e):
        text = f"{self.name(e.buffer)}[{self.expr(e.index)}]"
        dt = e.dtype.element()
        if dt == T.float16:
            return f"sl_h2f({text})"
        if dt == T.bfloat16:
            return f"sl_b2f({text})"
        return text

    def e_Cast(self, e):
        dst = e.dtype.element()
        v = self.expr(e.value)
        if dst.is_bool:
            return f"({v} != 0)"
        if dst in HALF_TYPES:
            return self.round_to(f"(float)({v})", dst)
        if e.value.dtype.is_float and dst.is_int:
            v = self.float_to_int(v, e.value.dtype.element(), dst)
        return f"(({self.ctype(dst)})({v}))"

    def float_to_int(self, v, src, dst):
        """A float toward zero into ``dst`` as the CPU backend (and numpy on x86) converts:
        through a signed conversion of ``float_conversion_width`` bits whose most negative
        value stands for NaN and out-of-range values (a GPU's own conversion saturates and
        gives 0 for NaN), unsigned types of that width shifted by 2**(w-1)."""
        w = E.float_conversion_width(dst)
        wide = self.ctype(T.int64 if w == 64 else T.int32)
        limit = self.expr(E.Const(float(2 ** (w - 1)), T.float64 if src == T.float64
                                  else T.float32))
        signed = f"sl_f2i<{wide}>({v}, {limit})"
        if dst.is_unsigned and dst.bits == w:
            top = f"(({wide})((sl_u64)1 << {w - 1}))"
            return (f"(({v}) >= {limit} ? (sl_f2i<{wide}>(({v}) - {limit}, {limit}) ^ {top}) "
                    f": {signed})")
        return signed

    def e_Select(self, e):
        return f"({self.expr(e.cond)} ? {self.expr(e.t)} : {self.expr(e.f)})"

    def e_UnOp(self, e):
        a, dt = self.expr(e.a), e.dtype.element()
        if e.op == "neg":
            if dt.is_float:
                return f"(-{a})"
            u = self.wrapping(e)
            if u:
                return f"(({self.ctype(dt)})(({u})0 - ({u}){a}))"
            return f"(({self.ctype(dt)})(-{a}))"
        if dt.is_bool:
            return f"(!{a})"
        return f"(({self.ctype(dt)})(~{a}))"

    def e_BinOp(self, e):
        op, dt = e.op, e.dtype.element()
        a, b = self.expr(e.a), self.expr(e.b)
        if op in E.CMP_OPS or op in E.BOOL_OPS:
            return f"({a} {E.SYMBOL[op]} {b})"
        c = self.ctype(dt)
        if dt.is_float:
            if op in ("add", "sub", "mul", "div"):
                return self.round_to(f"({a} {E.SYMBOL[op]} {b})", dt)
            if op in ("min", "max"):
                return f"sl_f{op}({a}, {b})"
            # numpy's float // and % (as the CPU backend): the exact remainder fmod(a, b)
            # decides, so inf // 3 is nan and 2 // -inf is -1 (floor(a / b) gives inf, -0)
            fmod = self.math_name("fmod", dt)
            if op in ("floordiv", "mod"):
                fn = "sl_fdiv_py" if op == "floordiv" else "sl_fmod_py"
                return self.round_to(f"{fn}({a}, {b}, {fmod}({a}, {b}))", dt)
        if op in ("add", "sub", "mul") and self.wrapping(e):
            u = self.wrapping(e)
            return f"(({c})(({u}){a} {E.SYMBOL[op]} ({u}){b}))"
        if op in ("add", "sub", "mul", "bitand", "bitor", "bitxor"):
            if dt.bits >= 32 or dt.is_bool:
                return f"({a} {E.SYMBOL[op]} {b})"
            return f"(({c})({a} {E.SYMBOL[op]} {b}))"       # C computes narrow ints as int
        if op in ("div", "floordiv"):
            return f"sl_floordiv<{c}>({a}, {b})"
        if op == "mod":
            return f"sl_floormod<{c}>({a}, {b})"
        if op in ("min", "max"):
            return f"sl_i{op}<{c}>({a}, {b})"
        if op in ("shl", "shr"):
            return f"sl_{op}<{c}, {self.ctype(e.b.dtype)}>({a}, {b})"
        raise CompileError(f"the GPU targets cannot render the operation {op} on {dt.name}")

    def wrapping(self, e):
        """The unsigned C type to compute integer ``e``'s + - * in, or None: signed overflow
        (and a narrow int's, promoted to int) is undefined in C, and compilers use that
        (nvcc folds ``A[i] + 1 > A[i]`` to true), while the CPU wraps. Index math over loop
        variables and sizes is assumed not to overflow, as lowering does."""
        dt = e.dtype.element()
        if not dt.is_int or dt.is_bool or (dt.is_unsigned and dt.bits >= 32) or \
                _no_overflow(e):
            return None
        return self.ctype(T.uint64 if dt.bits == 64 else T.uint32)

    def math_name(self, name, dt):
        dt = dt.element()
        width = 64 if dt == T.float64 else 32
        try:
            return self.lang.math[(name, width)]
        except KeyError:
            raise CompileError(f"{name} on {dt.name} is not available on {self.lang.name}") \
                from None

    def e_Call(self, e):
        dt = e.dtype.element()
        args = [self.expr(a) for a in e.args]
        if not dt.is_float:
            c = self.ctype(dt)
            if e.name == "abs":
                u = self.wrapping(e) or c
                return f"(({c})({args[0]} < 0 ? ({u})0 - ({u}){args[0]} : ({u}){args[0]}))"
            if e.name == "pow":
                return f"sl_ipow<{c}>({args[0]}, {args[1]})"
            raise CompileError(f"{e.name} of an integer is not available on {self.lang.name}")
        return self.round_to(f"{self.math_name(e.name, dt)}({', '.join(args)})", dt)

    def e_VectorReduce(self, e):
        raise CompileError("a vector reduction reached the GPU renderer; this is a schedlang "
                           "bug, please report it")

    # ------------------------------------------------------------------ statements
    def stmt(self, s):
        if s is None:
            return
        m = getattr(self, "s_" + type(s).__name__, None)
        if m is None:
            raise CompileError(f"the GPU targets cannot render a {type(s).__name__} statement")
        m(s)

    def s_Block(self, s):
        for c in s.stmts:
            self.stmt(c)

    def block(self, body):
        self.indent += 1
        self.stmt(body)
        self.indent -= 1

    def s_LetStmt(self, s):
        self.emit("{")
        self.indent += 1
        self.emit(f"const {self.ctype(s.value.dtype)} {self.name(s.var)} = {self.expr(s.value)};")
        self.stmt(s.body)
        self.indent -= 1
        self.emit("}")

    def s_Store(self, s):
        dt = self.buffer_types.get(s.buffer, s.value.dtype).element()
        v = self.expr(s.value)
        if dt == T.float16:
            v = f"sl_f2h({v})"
        elif dt == T.bfloat16:
            v = f"sl_f2b({v})"
        self.emit(f"{self.name(s.buffer)}[{self.expr(s.index)}] = {v};")

    def s_IfThenElse(self, s):
        self.emit(f"if ({self.expr(s.cond)}) {{")
        self.block(s.then)
        if s.else_ is not None:
            self.emit("} else {")
            self.block(s.else_)
        self.emit("}")

    def s_Evaluate(self, s):
        self.emit(f"(void)({self.expr(s.value)});")

    def s_FlatPrefetch(self, s):
        pass        # a CPU cache hint: GPUs have their own

    def s_Barrier(self, s):
        self.emit(self.lang.barrier)

    def s_Assert(self, s):
        self.status = True
        self.emit(f"if (!({self.expr(s.cond)})) sl_status[0] = {int(s.code)};")

    def s_Allocate(self, s):
        count = 1
        for x in s.extents:
            count *= int(x.value)
        if s.memory == "shared":
            self.shared[s.buffer] = max(self.shared.get(s.buffer, 0), count)
            self.buffer_types[s.buffer] = s.dtype
            self.stmt(s.body)
            return
        self.buffer_types[s.buffer] = s.dtype
        self.emit("{")
        self.indent += 1
        self.emit(f"{self.storage_type(s.dtype)} {self.name(s.buffer)}[{count}];")
        self.stmt(s.body)
        self.indent -= 1
        self.emit("}")

    def s_TensorOp(self, s):
        raise CompileError(f"tensorize with {s.intrinsic.name}, a CPU instruction, on a GPU "
                           "target; tensorize onto it only when compiling for llvm")

    def index_plus(self, t, index, lo):
        text = f"({t}){index}"
        return text if isinstance(lo, E.Const) and lo.value == 0 else f"{text} + {self.expr(lo)}"

    def s_For(self, s):
        v, t = self.name(s.var), self.ctype(s.min.dtype)
        lo = self.expr(s.min)
        if s.kind == "gpu_block":
            block = self.lang.block_idx["xyz"[s.gpu_dim]]
            self.emit(f"{{ const {t} {v} = {self.index_plus(t, block, s.min)};")
            self.stmt(s.body)
            self.emit("}")
            return
        if s.kind == "gpu_thread":
            tid = self.lang.thread_idx["xyz"[s.gpu_dim]]
            conds = [f"({t}){tid} < {self.expr(s.extent)}"]
            if id(s) in self.roots:
                used = set()
                ir.walk_stmt(s, lambda n: used.add(n.gpu_dim) if isinstance(n, ir.For)
                             and n.kind == "gpu_thread" else None)
                conds += [f"{self.lang.thread_idx[d]} == 0" for i, d in enumerate("xyz")
                          if i not in used and self.threads[i] > 1]
            self.emit(f"if ({' && '.join(conds)}) {{")
            self.indent += 1
            self.emit(f"const {t} {v} = {self.index_plus(t, tid, s.min)};")
            self.stmt(s.body)
            self.indent -= 1
            self.emit("}")
            return
        end = self.name(s.var + ".end")
        if s.kind in ("unrolled", "vectorized"):
            self.emit("#pragma unroll")
        self.emit(f"for ({t} {v} = {lo}, {end} = {lo} + {self.expr(s.extent)}; {v} < {end}; "
                  f"{v}++) {{")
        self.block(s.body)
        self.emit("}")


def _phase_roots(body):
    """The gpu_thread loops that start a nest of their own: each phase's outermost, and a
    shared-memory fill's inside a phase (not directly inside another thread loop)."""
    roots = []

    def walk(n, in_chain):
        if n is None:
            return
        if isinstance(n, ir.For) and n.kind == "gpu_thread":
            if not in_chain:
                roots.append(n)
            walk(n.body, True)
            return
        for c in ir.child_stmts(n):
            walk(c, in_chain and isinstance(n, ir.LetStmt))
    walk(body, False)
    return roots


def kernel_params(node, buffer_types):
    """The free buffers and scalars of GpuKernel ``node``: [(name, kind, dtype)], buffers
    first (each in first-use order), then scalars by name."""
    bound, allocated = set(), set()
    buffers, scalars = {}, {}

    def see_expr(e):
        def fn(n):
            if isinstance(n, ir.Load):
                buffers.setdefault(n.buffer, buffer_types[n.buffer])
            elif isinstance(n, E.Var):
                scalars.setdefault(n.name, n.dtype)
        E.walk_expr(e, fn)

    def walk(s):
        if s is None:
            return
        if isinstance(s, (ir.For, ir.LetStmt)):
            bound.add(s.var)
        if isinstance(s, ir.Allocate):
            allocated.add(s.buffer)
        if isinstance(s, ir.Store):
            buffers.setdefault(s.buffer, buffer_types[s.buffer])
        for e in ir.stmt_exprs(s):
            see_expr(e)
        for c in ir.child_stmts(s):
            walk(c)
    walk(node.body)
    params = [(n, "buffer", d) for n, d in buffers.items() if n not in allocated]
    params += [(n, "scalar", d) for n, d in sorted(scalars.items()) if n not in bound]
    return params


def render_kernels(stmt, args, prefix, lang):
    """Source text holding every GpuKernel of host statement ``stmt`` and their KernelInfos.
    ``args``: the pipeline's KernelArgs (its buffers' dtypes)."""
    buffer_types = {a.name: a.dtype for a in args if a.kind == "buffer"}
    ir.walk_stmt(stmt, lambda n: buffer_types.setdefault(n.buffer, n.dtype)
                 if isinstance(n, ir.Allocate) else None)
    kernels = []
    ir.walk_stmt(stmt, lambda n: kernels.append(n) if isinstance(n, ir.GpuKernel) else None)
    written = set()
    ir.walk_stmt(stmt, lambda n: written.add(n.buffer) if isinstance(n, ir.Store) else None)
    parts, infos = [lang.prelude.replace("COMMON_PRELUDE", COMMON_PRELUDE)], []
    for node in kernels:
        symbol = f"{prefix}_{node.name}"
        params = kernel_params(node, buffer_types)
        r = _Renderer(lang, dict(buffer_types))
        r.threads = node.threads
        r.shared = {}
        r.roots = {id(x) for x in _phase_roots(node.body)}
        r.stmt(node.body)
        body = r.lines
        decl = []
        for i, (n, kind, dt) in enumerate(params):
            ident = r.name(n)
            if kind == "buffer":
                const = "const " if n not in written else ""
                decl.append(lang.buffer_param.format(const=const, type=r.storage_type(dt),
                                                     name=ident, index=i,
                                                     restrict=lang.restrict))
            else:
                decl.append(lang.scalar_param.format(type=r.ctype(dt), name=ident, index=i))
        if r.status:
            decl.append(lang.buffer_param.format(const="", type="int", name="sl_status",
                                                 index=len(params), restrict=lang.restrict))
        decl += list(lang.extra_params)
        nthreads = node.threads[0] * node.threads[1] * node.threads[2]
        bounds = lang.launch_bounds.format(nthreads) if lang.launch_bounds else ""
        head = f"{lang.kernel_prefix}{bounds}void {symbol}({', '.join(decl)}) {{"
        shared = [f"  {lang.shared} {r.storage_type(buffer_types[n])} {r.name(n)}[{c}];"
                  for n, c in r.shared.items()]
        parts.append("\n".join([head] + shared + body + ["}"]))
        infos.append(KernelInfo(symbol, params, node.threads, node, r.status))
    return "\n\n".join(parts) + "\n", infos
