"""Pass: merge the prefetches of one straight-line block that fetch the same cache lines.
Runs after the final simplify, which folds away the Lets of unrolled iterations.

The ``prefetch`` directive puts a fetch beside each read of its source in the loop body;
unrolling then copies that fetch once per unrolled iteration. A register tile of a
convolution unrolled over 7 columns and 2 vectors of channels reads one row of the image 14
times, at offsets a few elements apart: 14 fetches of the same one or two lines, issued
every few cycles, which took a load slot from the tile's own loads (0.36 ms against 0.25 ms
without them). After unrolling, the fetches of one block whose indices differ by a
constant are one group; the group keeps one fetch per cache line of the span it covers, at
its lowest offset, every line further on, and its highest offset (the span may cross a line
boundary, wherever the buffer's alignment puts it). Example: fetches of ``X[b + 55]``,
``X[b + 57]`` ... ``X[b + 67]`` (fp32) become ``X[b + 55]`` and ``X[b + 67]``.
"""
from __future__ import annotations

from ..algo import expr as E
from . import ir
from .simplify import difference, simplify

_LINE_BYTES = 64


def merge_prefetches(stmt, ctx):
    """Merge the scalar prefetches of every Block that touch the same lines."""
    def stmt_fn(s):
        if isinstance(s, ir.Block):
            return ir.make_block(_merged([ir.map_stmt(x, stmt_fn) for x in s.stmts]))
        return None
    return ir.map_stmt(stmt, stmt_fn)


class _Group:
    """Prefetches of one buffer at ``base`` plus constant offsets."""

    def __init__(self, first):
        self.first, self.offsets = first, [0]

    def fetches(self):
        line = max(1, _LINE_BYTES // self.first.elem_bytes)
        offsets = sorted(set(self.offsets))
        kept = [offsets[0]]
        for o in offsets[1:]:
            if o >= kept[-1] + line:
                kept.append(o)
        if offsets[-1] > kept[-1]:
            kept.append(offsets[-1])
        base = self.first.index
        return [self.first if o == 0 else self.first.replace(
            index=simplify(base + E.Const(o, base.dtype))) for o in kept]


def _merged(stmts):
    out, groups = [], {}
    for s in stmts:
        if not (isinstance(s, ir.FlatPrefetch) and s.index.dtype.lanes == 1
                and s.index.dtype.is_int):
            out.append(s)
            continue
        for g in groups.setdefault(s.buffer, []):
            d = difference(s.index, g.first.index)
            if isinstance(d, int):
                g.offsets.append(d)
                break
        else:
            g = _Group(s)
            groups[s.buffer].append(g)
            out.append(g)
    return [x for s in out for x in (s.fetches() if isinstance(s, _Group) else [s])]


__all__ = ["merge_prefetches"]
