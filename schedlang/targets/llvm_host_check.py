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

# AVX-512 mnemonics with no VEX encoding (LLVM turns every other EVEX instruction into its
# VEX form unless it needs a mask, a broadcast, xmm16-31 or zmm, which the patterns below
# see in the operands)
_EVEX_SCALAR = (r"\bv(cvtusi2s[sd]|cvtt?s[sd]2usi|rndscales[sd]|scalefs[sd]|getexps[sd]|"
                r"getmants[sd]|fixupimms[sd]|rcp14s[sd]|rsqrt14s[sd]|rcp28s[sd]|rsqrt28s[sd])"
                r"[lq]?\b")
_EVEX_VECTOR = (r"\bvpternlog[dq]\b|\bvp(min|max)[su]q\b|\bvpabsq\b|\bvpsrav?q\b|"
                r"\bvpro[lr]v?[dq]\b|\bvpmov(s|us)?(qd|qw|qb|dw|db|wb)\b|"
                r"\bvpmov(m2[bwdq]|[bwdq]2m)\b|\bvptestn?m[bwdq]\b|\bvperm[it]2(w|d|q|ps|pd)\b|"
                r"\bvpermw\b|\bvalign[dq]\b|\bvp?(compress|expand)(ps|pd|d|q)\b|"
                r"\bvcvtt?\w*2u(dq|qq|si)\w*\b|\bvcvtu(dq|qq|si)2\w+\b|\bvrndscalep[sd]\b|"
                r"\bvscalefp[sd]\b|\bvgetexpp[sd]\b|\bvgetmantp[sd]\b|\bvfixupimmp[sd]\b|"
                r"\bv(rcp|rsqrt)(14|28)p[sd]\b|\bvexp2p[sd]\b|\bv(p)?blendm[bwdq]?(ps|pd)?\b|"
                r"\bvshuf[fi](32x4|64x2)\b|\bv(extract|insert|broadcast)[fi](32x4|64x4|32x2)\b|"
                r"\bvmovdq[au](8|16|32|64)\b|\bvpcmpu?[bwdq]\b|\bvpbroadcastm\w+\b|"
                r"\bvpbroadcast[bwdq]\s+%(?![xyz]mm)|\bvps(ll|rl|ra)vw\b|\bvdbpsadbw\b|"
                r"\bvp?scatter\w+\b|\bv(gather|scatter)pf\w+\b")

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
    # FP16 arithmetic (vaddph), conversions (vcvtps2phx, vcvtph2psx, vcvtsh2ss), vmovw
    (r"\bv[a-z0-9]+(ph|sh)\b|\bvcvt\w*(ph|sh)2\w+\b|\bvcvt\w+2(ph|sh)\w*\b|\bvmovw\b",
     "avx512fp16"),
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
    # AVX-512 instructions without a VEX form, on scalars (AVX512F) and on 128/256-bit
    # registers (AVX512VL): LLVM uses them on xmm0-15 / ymm0-15 without masks (vpminsq
    # %ymm1, %ymm2, %ymm3 for an int64 min), where the register names alone look like AVX2
    # (and 512-bit narrowing conversions from memory, whose only register is a ymm one:
    # vcvtpd2ps (%rax), %ymm0 converts 8 doubles; AVX's 256-bit form writes an xmm)
    (rf"{_EVEX_SCALAR}|\{{r[nduz]-sae\}}|\{{sae\}}|\{{evex\}}|"
     r"\bvcvtt?pd2u?(ps|dq)[xyz]?\s.*,\s*%ymm\d+$", "avx512f"),
    (rf"^(?!.*%zmm).*({_EVEX_VECTOR})", "avx512vl"),
    (r"%zmm\d|%k[0-7]\b", "avx512f"),
    (r"\bv(p)?gather\w+\b|\bvperm(ps|d|q|pd)\b|\bvpbroadcast\w+\b|\bvinserti128\b|"
     r"\bvextracti128\b|\bvperm2i128\b|^\s*vp\w+\s.*%ymm", "avx2"),
    # AMD Bulldozer's FMA4 (four operands, no 132/213/231 in the name) and XOP
    (r"\bvfn?m(add|sub)(sub|add)?(ps|pd|ss|sd)\b", "fma4"),
    (r"\bvp(cmov|perm|rot[bwdq]|sh[la][bwdq]|macs\w+|madcs\w+|haddu?(bw|bd|bq|wd|wq|dq)|"
     r"hsub(bw|wd|dq)|com(lt|le|gt|ge|eq|neq|false|true)?u?[bwdq])\b|\bvfrcz\w+\b|"
     r"\bvpermil2p[sd]\b", "xop"),
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
