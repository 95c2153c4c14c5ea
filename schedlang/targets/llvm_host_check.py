"""Can this machine run code compiled for another x86 CPU (``llvm:<cpu>``)?

LLVM does not list the features a named CPU implies, so the check reads the kernel's own
assembly: each instruction family below needs one CPU feature, and the first one whose
feature this machine lacks is reported. Running such a kernel would stop the process with
an illegal-instruction signal; the Kernel raises ``CompileError`` instead.
Example: ``missing_feature(asm, "+avx2,+fma,-avx512f")`` -> ``("vaddps %zmm..", "avx512f")``.
"""
from __future__ import annotations

import re

# (pattern on one line of AT&T assembly, the feature it needs), most specific first; a
# line is charged to the first pattern it matches.
# one operand of an AT&T instruction: a memory operand's commas are inside its parentheses
_OPERAND = r"\s*(?:[^,(\s]|\([^)]*\))+\s*"
# integer instructions whose legacy forms have two operands (imul has a legacy
# three-operand form only with an immediate first)
_INT_OP = r"((add|sub|and|or|xor|adc|sbb|shl|shr|sar|rol|ror|rcl|rcr|cmov[a-z]+)[bwlq]?\s|imul[wlq]?\s(?!\s*\$))"

_FAMILIES = [
    # APX (Intel Advanced Performance Extensions): the extended registers r16-r31, the
    # no-flags prefix, three-operand integer forms ("new data destination"), push2/pop2
    (r"%r(1[6-9]|2\d|3[01])[dwb]?\b", "egpr"),
    (r"\{nf\}", "nf"),
    (rf"^{_INT_OP}{_OPERAND},{_OPERAND},{_OPERAND}$|^(neg|not|inc|dec)[bwlq]?\s{_OPERAND},"
     rf"{_OPERAND}$", "ndd"),
    (r"\b(push2|pop2)p?\b", "push2pop2"),
    (r"\b(pushp|popp)\b", "ppx"),
    (r"\bc(cmp|test)[a-z]+[bwlq]?\b", "ccmp"),
    (r"\bcfcmov[a-z]+[bwlq]?\b", "cf"),
    (r"\bsetzu[a-z]+\b", "zu"),
    (r"\bv(dpbf16ps|cvtne2ps2bf16|cvtneps2bf16)\b", "avx512bf16"),
    (r"\btile(loadd|loaddt1|stored|zero|release)\b|\bldtilecfg\b|\btdp\w+\b", "amx-tile"),
    (r"\{vex\}\s*vpdp(bus|ws)ds?\b", "avxvnni"),
    (r"\bvpdp(bus|ws)ds?\b", "avx512vnni"),
    (r"\bv(cvtph2ps|cvtps2ph)\b", "f16c"),
    (r"\bv[a-z0-9]+(ph|sh)\b", "avx512fp16"),
    (r"\bvpmadd52[lh]uq\b", "avx512ifma"),
    (r"\bvperm[it]2b\b|\bvpermb\b|\bvpmultishiftqb\b", "avx512vbmi"),
    (r"\bvp(compress|expand)[bw]\b|\bvpsh[lr]dv?[wdq]\b", "avx512vbmi2"),
    (r"\bvpopcnt[bw]\b|\bvpshufbitqmb\b", "avx512bitalg"),
    (r"\bvpopcnt[dq]\b", "avx512vpopcntdq"),
    (r"\bv?gf2p8\w+\b", "gfni"),
    (r"\bvaes\w+\b", "vaes"),
    (r"\bvpclmulqdq\b.*%[yz]mm", "vpclmulqdq"),
    (r"\bvp(conflict|lzcnt)[dq]\b", "avx512cd"),
    (r"\bvpmullq\b|\bvcvt\w*qq2\w+\b|\bvcvt\w+2u?qq\b|\bv(extract|insert|broadcast)[fi]"
     r"(64x2|32x8)\b|\bvfpclass\w+\b|\bvrange\w+\b|\bvreduce\w+\b|\bkmovb\b|\bkadd[bw]\b",
     "avx512dq"),
    (r"\bk\w+[dq]\b\s+%k|\bvp\w*(b|w|maddwd)\b.*%zmm", "avx512bw"),
    # EVEX on 128/256-bit registers (a mask, an embedded broadcast, xmm16-31); a line
    # with a zmm register is left to avx512f
    (r"^(?!.*%zmm).*(%[xy]mm(1[6-9]|2\d|3[01])\b|\{%k\d\}|\{1to\d+\})", "avx512vl"),
    (r"%zmm\d|%k[1-7]\b", "avx512f"),
    (r"\bv(p)?gather\w+\b|\bvperm(ps|d|q|pd)\b|\bvpbroadcast\w+\b|\bvinserti128\b|"
     r"\bvextracti128\b|\bvperm2i128\b|^\s*vp\w+\s.*%ymm", "avx2"),
    (r"\bvfn?m(add|sub)\w+\b", "fma"),
    (r"%ymm\d", "avx"),
    (r"\b(shlx|shrx|sarx|rorx|bzhi|pdep|pext|mulx)[lq]?\b", "bmi2"),
    (r"\b(andn|bextr|blsi|blsr|blsmsk|tzcnt)[lq]?\b", "bmi"),
    (r"\blzcnt[wlq]?\b", "lzcnt"),
    (r"\bpopcnt[wlq]?\b", "popcnt"),
    (r"\bmovbe[wlq]?\b", "movbe"),
]
_COMPILED = [(re.compile(p), f) for p, f in _FAMILIES]


def host_feature_set(features: str) -> set:
    """The enabled features of an LLVM feature string (``"+avx2,-avx512f"`` -> ``{"avx2"}``)."""
    return {f[1:] for f in features.split(",") if f.startswith("+")}


def missing_feature(asm: str, host_features: str):
    """``(instruction line, feature)`` of the first instruction in ``asm`` that needs a
    feature missing from ``host_features`` (an LLVM feature string), or None."""
    have = host_feature_set(host_features)
    if not have:
        return None        # this platform cannot list its features: nothing to compare
    for line in asm.splitlines():
        text = line.split("#", 1)[0].strip()
        if not text or text.startswith(".") or text.endswith(":"):
            continue
        for pattern, feature in _COMPILED:
            if pattern.search(text):
                if feature not in have:
                    return text, feature
                break
    return None


__all__ = ["missing_feature", "host_feature_set"]
