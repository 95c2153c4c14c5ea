"""Tuning for a named CPU (SPEC §4, ``target='llvm:<cpu>'``): the search's start points were
sized by this machine's vectors and registers whatever the target, so on an AVX-512 machine
``autotune(C, target='llvm:haswell')`` seeded 16-lane, 32-register tiles that spill on
Haswell's 16 ymm registers (and an AVX2 machine seeded 8-lane tiles for skylake-avx512)."""
import platform
import re

import pytest

import schedlang as sl
from schedlang.autotune import search
from schedlang.autotune.templates import seed_schedules
from schedlang.targets.host_cpu import target_features, vector_lanes

from .conftest import check_matmul, matmul

# named x86 CPUs: only LLVM's code generation is asked, so any x86-64 host can run these
x86_only = pytest.mark.skipif(platform.machine() not in ("x86_64", "AMD64"),
                              reason="names x86 CPUs")


def _vectorize_widths(s):
    return {int(w) for w in re.findall(r"vectorize\('[^']+', (\d+)\)", str(s))}


@x86_only
@pytest.mark.parametrize("cpu,lanes", [("haswell", 8), ("skylake-avx512", 16), ("x86-64", 4)])
def test_named_cpu_features_give_its_float_lanes(cpu, lanes):
    assert vector_lanes(4, target_features(f"llvm:{cpu}")) == lanes


@x86_only
@pytest.mark.parametrize("cpu,lanes", [("haswell", 8), ("skylake-avx512", 16)])
def test_register_tile_seeds_are_sized_for_the_target_cpu(cpu, lanes):
    C = matmul(64, name="C_r16_seed")
    seeds = seed_schedules([C], 2, f"llvm:{cpu}")
    name, s = seeds[0]
    assert name.startswith("register_tile")
    assert _vectorize_widths(s) == {lanes}
    # 16 accumulators fit Haswell's 16 registers with operands only as 6x2; AVX-512's 32 take 6x4
    assert ("6x2" if lanes == 8 else "6x4") in name
    check_matmul(sl.compile(C, s), 64)


@x86_only
def test_autotune_seeds_for_the_target_it_is_given(monkeypatch):
    got = []

    class Stop(Exception):
        pass

    def spy(outputs, threads, target="llvm"):
        got.append(target)
        raise Stop
    monkeypatch.setattr(search, "seed_schedules", spy)
    with pytest.raises(Stop):
        sl.autotune(matmul(16, name="C_r16_spy"), target="llvm:haswell", beam=1, budget_s=1)
    assert got == ["llvm:haswell"]



def test_a_size_name_the_pipeline_does_not_use_is_refused():
    # a typo (M for N) would otherwise be tuned at an estimated N, not the size meant
    A = sl.Input("A", sl.float32, ("N",))
    i = sl.Var("i")
    f = sl.Func("f", shape=(A.shape[0],))
    f[i] = A[i] * 2
    with pytest.raises(sl.ScheduleError, match=r"autotune\(sizes=\.\.\.\): 'M' is not a size of "
                       r"f's pipeline \(it uses N\); pass values for those names only"):
        sl.autotune(f, sizes={"M": 64}, budget_s=1)
