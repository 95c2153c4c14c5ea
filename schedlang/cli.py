"""The ``schedlang`` command: ``bench`` (compare kernels with numpy / torch in one run),
``show`` (algorithm, schedule, loop IR and generated code of a workload) and ``tune``
(search a workload's schedule and store it in the tuning database).

Example: ``schedlang bench gemm --size 1024 --threads 1,2 --csv out.csv``.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

DEFAULT_COMPARE = ["numpy", "torch", "halide"]
COMPARE_SYSTEMS = ("numpy", "torch", "halide")
CSV_COLUMNS = ("workload", "shape", "system", "threads", "median_s", "min_s", "rate", "unit")
MAX_THREADS = 1024      # the most threads a kernel runs on (Kernel.num_threads)
THREAD_ENV = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS",
              "SCHEDLANG_NUM_THREADS", "HL_NUM_THREADS")


def _workloads():
    from schedlang.bench.workloads import WORKLOADS, parse_size
    return WORKLOADS, parse_size


def _rate(w, seconds):
    return w.amount() / seconds / 1e9


def _torch_row(w, values, threads, device="cpu"):
    """The torch version of ``w`` as a function to time (on ``device``: "cpu", or "cuda"
    with the inputs copied there first); None without torch."""
    try:
        import torch
    except ImportError:
        return None
    torch.set_num_threads(threads)
    args = {k: torch.from_numpy(v).to(device) for k, v in values.items()}
    if w.name == "gemm":
        fn = (lambda: torch.mm(args["A"], args["B"]))
    elif w.name == "blur":
        img = args["img"]

        def fn():
            bx = (img[:, :-2] + img[:, 1:-1] + img[:, 2:]) * (1.0 / 3)
            return (bx[:-2] + bx[1:-1] + bx[2:]) * (1.0 / 3)
    elif w.name == "conv":
        x = args["X"].contiguous()
        fn = (lambda: torch.nn.functional.conv2d(x, args["W"], stride=w.stride, padding=w.pad))
    elif w.name == "softmax":
        fn = (lambda: torch.softmax(args["X"], dim=1))
    else:
        return None
    return fn


def _halide_installed():
    from schedlang.bench.halide_workloads import halide_available
    return halide_available()


def _torch_installed():
    """True when the ``torch`` package can be imported (found without importing it here:
    the rows are measured in child processes)."""
    import importlib.util
    if "torch" in sys.modules:
        return sys.modules["torch"] is not None
    try:
        return importlib.util.find_spec("torch") is not None
    except (ImportError, ValueError):
        return False


# the optional comparison systems: whether each is installed, and how to install it
_OPTIONAL_SYSTEMS = {"halide": (_halide_installed,
                                "pip install halide, or pip install 'schedlang[halide]'"),
                     "torch": (_torch_installed, "pip install torch")}


def _note_missing_systems(compare):
    """One line on stderr for each optional system that ``--compare`` names explicitly and
    that is missing (with the default list its rows are simply absent)."""
    if compare == DEFAULT_COMPARE:
        return
    for name, (installed, install) in _OPTIONAL_SYSTEMS.items():
        if name in compare and not installed():
            print(f"no {name} rows: the {name} package is not installed ({install})",
                  file=sys.stderr)


def _halide_row(w, values, threads):
    """The Halide version of ``w`` (``bench/halide_workloads.py``) as a function to time,
    checked against numpy first; None when the ``halide`` package is missing."""
    import numpy as np
    if not _halide_installed():
        return None
    from schedlang.bench.halide_workloads import make_runner
    run = make_runner(w, values, threads)
    err = float(np.max(np.abs(run().astype(np.float64) - w.numpy(**values))))
    if not err <= w.tolerance():
        raise SystemExit(f"halide {w.name} {w.shape_text}: result differs from numpy by "
                         f"{err:g} (tolerance {w.tolerance():g}); not timing a wrong kernel")
    return run


def make_workload(workload, size_text, stride=1, kernel=3, dtype="float32", allocates=True):
    WORKLOADS, parse_size = _workloads()
    size = parse_size(workload, size_text, allocates)
    if workload == "conv":
        return WORKLOADS[workload](size, stride=stride, kernel=kernel)
    if workload == "gemm":
        return WORKLOADS[workload](size, dtype=dtype)
    return WORKLOADS[workload](size)


def _threads_text(n):
    """``1 thread`` / ``2 threads``, for messages."""
    return f"{n} thread{'' if n == 1 else 's'}"


def _beam_schedule(w, outs, hand, target, beam, threads):
    """The workload's schedule for kernels on ``threads`` threads from the tuning database
    (a BEAM=``beam`` search or wider), tuning it first when there is none; the search
    also starts from the hand-written schedule ``hand``."""
    from schedlang.autotune.database import TuningDatabase
    from schedlang.autotune.integration import budget_from_env
    from schedlang.autotune.keys import workload_key
    from schedlang.autotune.search import tune
    key = workload_key([outs], target, threads=threads)
    found = TuningDatabase().load_schedule(key, [outs], min_beam=beam)
    if found is None:
        print(f"tuning {w.name} {w.shape_text} (beam {beam}, {_threads_text(threads)}) for "
              "the schedlang-beam row", file=sys.stderr, flush=True)
        found = tune(outs, target=target, beam=beam, budget_s=budget_from_env(),
                     threads=threads, seeds=(hand,)).schedule
    return found


def _beam_row_kernel(w, values, threads, target, beam, schedule_json=None):
    """The schedlang-beam kernel of a workload, checked against numpy before it is timed.
    ``schedule_json``: the schedule the parent process tuned (so a tuning database that
    could not store it does not make this process tune again); else the database's."""
    import numpy as np

    import schedlang as sl
    outs, hand = w.algorithm()
    if schedule_json is not None:
        found = sl.Schedule.from_json(schedule_json, outs)
    else:
        found = _beam_schedule(w, outs, hand, target, beam, threads)
    kern = sl.compile(outs, found, target=target)
    kern.num_threads = threads
    err = float(np.max(np.abs(kern(**values).astype(np.float64) - w.numpy(**values))))
    if not err <= w.tolerance():
        raise SystemExit(f"schedlang-beam {w.name} {w.shape_text}: result differs from numpy by "
                         f"{err:g} (tolerance {w.tolerance():g}); not timing a wrong kernel")
    return kern


def _best_known_kernel(w, outs, kern, values, threads, target, cold):
    """The ``schedlang`` row's kernel: the hand-written one (``kern``, compiled from the
    workload's algorithm ``outs``), or the schedule the tuning database holds for this
    workload, target and thread count when that one is correct and faster in a short run
    of both (SPEC: the best schedule known)."""
    import numpy as np

    import schedlang as sl
    from schedlang.autotune.database import TuningDatabase
    from schedlang.autotune.keys import workload_key
    from schedlang.bench.timing import measure_in_turns, row_budget_s
    tuned = TuningDatabase().load_schedule(workload_key([outs], target, threads=threads), [outs])
    if tuned is None:
        return kern
    try:
        other = sl.compile(outs, tuned, target=target)
        other.num_threads = threads
        err = float(np.max(np.abs(other(**values).astype(np.float64) - w.numpy(**values))))
    except sl.SchedlangError as e:
        print(f"schedlang {w.name} {w.shape_text}: the tuned schedule does not compile ({e}); "
              "the row uses the hand-written one", file=sys.stderr)
        return kern
    if not err <= w.tolerance():
        print(f"schedlang {w.name} {w.shape_text}: the tuned schedule differs from numpy by "
              f"{err:g}; the row uses the hand-written one", file=sys.stderr)
        return kern
    t = measure_in_turns({"hand": lambda: kern(**values), "tuned": lambda: other(**values)},
                         cold, budget_s=0.3 * row_budget_s())
    return other if t["tuned"].median < t["hand"].median else kern


def run_one(workload, size_text, threads, compare, target, stride=1, kernel=3, dtype="float32",
            beam=0, beam_schedule_json=None):
    """Measure one (workload, size) at one thread count; returns CSV-shaped dict rows.
    ``beam_schedule_json``: the schedlang-beam row's schedule, already tuned."""
    import numpy as np

    import schedlang as sl
    from schedlang.bench.timing import measure_in_turns, row_budget_s, runs_start_cold
    w = make_workload(workload, size_text, stride, kernel, dtype)
    values = w.inputs()
    from schedlang.compiler import check_target
    if check_target(target) != "llvm":
        from schedlang.bench.gpu_workloads import gpu_rows
        return gpu_rows(w, values, threads, compare, target, _torch_row)
    try:
        outs, s = w.algorithm()
        kern = sl.compile(outs, s, target=target)
    except sl.CompileError as e:
        if dtype == "float32":
            raise
        # a dot-product instruction this CPU lacks: say so and measure the rest
        print(f"skipping {workload} {w.shape_text}: {e}", file=sys.stderr)
        return []
    if dtype != "float32":
        compare = []   # the same-dtype comparison is the fp32 row of this run
    kern.num_threads = threads
    got = kern(**values)
    want = w.numpy(**values)
    err = float(np.max(np.abs(got.astype(np.float64) - want)))
    if not err <= w.tolerance():
        raise SystemExit(f"schedlang {workload} {w.shape_text}: result differs from numpy by "
                         f"{err:g} (tolerance {w.tolerance():g}); not timing a wrong kernel")
    rows = []
    if dtype == "float32":
        cold = runs_start_cold(values, want)
        kern = _best_known_kernel(w, outs, kern, values, threads, target, cold)

    systems = {"schedlang": lambda: kern(**values)}
    if beam and dtype == "float32":
        beam_kern = _beam_row_kernel(w, values, threads, target, beam, beam_schedule_json)
        systems["schedlang-beam"] = lambda: beam_kern(**values)
    if "numpy" in compare:
        systems["numpy"] = lambda: w.numpy(**values)
    for name, make in (("torch", _torch_row), ("halide", _halide_row)):
        fn = make(w, values, threads) if name in compare else None
        if fn is not None:
            systems[name] = fn
    if dtype != "float32":
        # the fp32 GEMM of the same shape, timed in turns with this one: the ratio of the
        # two then comes from one moment of this noisy machine and one cache regime (the
        # fp32 data's, as in the fp32 row)
        fp32 = make_workload(workload, size_text, stride, kernel)
        fp32_values = fp32.inputs()
        fp32_kern = sl.compile(*fp32.algorithm(), target=target)
        fp32_kern.num_threads = threads
        cold = runs_start_cold(fp32_values, fp32_kern(**fp32_values))
        systems["fp32"] = lambda: fp32_kern(**fp32_values)
    # in turns: a slow spell of this machine hits every system of the row alike
    measured = measure_in_turns(systems, cold, budget_s=row_budget_s())
    fp32_time = measured.pop("fp32", None)
    for system, m in measured.items():
        rows.append({"workload": workload, "shape": w.shape_text, "system": system,
                     "threads": threads, "median_s": m.median, "min_s": m.min,
                     "rate": _rate(w, m.median), "unit": w.unit})
        if fp32_time is not None:
            rows[-1]["fp32_ratio"] = fp32_time.median / m.median
    return rows


def _child_rows(args, workload, size, threads, dtype="float32", beam_schedule_json=None):
    """Rows of one measurement, run in a fresh process with its thread counts set."""
    import tempfile
    env = dict(os.environ)
    for k in THREAD_ENV:
        env[k] = str(threads)
    with tempfile.TemporaryDirectory(prefix="schedlang-bench-") as tmp:
        schedule_file = "-"
        if beam_schedule_json is not None:
            schedule_file = os.path.join(tmp, "beam_schedule.json")
            with open(schedule_file, "w") as fh:
                fh.write(beam_schedule_json)
        cmd = [sys.executable, "-m", "schedlang.cli", "_measure", workload, size, str(threads),
               ",".join(args.compare), args.target, str(args.stride), str(args.kernel), dtype,
               str(args.beam), schedule_file]
        out = subprocess.run(cmd, env=env, capture_output=True, text=True)
    sys.stderr.write(out.stderr)   # notes (a skipped row) and, on failure, the error
    if out.returncode != 0:
        raise SystemExit(out.returncode)
    return json.loads(out.stdout.strip().splitlines()[-1])


def _print_table(rows, winograd=True):
    """The bench table of ``rows``; ``winograd``: the conv rows are 3x3 stride-1 layers,
    which schedlang computes in the Winograd form (said under the table)."""
    # a "vs <system>" column for each comparison system that was measured
    measured = {r["system"] for r in rows}
    bases = tuple(b for b in ("numpy", "torch", "halide") if b in measured)
    head = f"{'workload':8s} {'shape':22s} {'system':14s} {'thr':>3s} {'median ms':>10s} " \
           f"{'min ms':>9s} {'rate':>9s} {'unit':8s}" + "".join(f" {'vs ' + b:>9s}"
                                                                 for b in bases)
    print(head)
    print("-" * len(head))
    for r in rows:
        ref = {x["system"]: x for x in rows if x["workload"] == r["workload"]
               and x["shape"] == r["shape"] and x["threads"] == r["threads"]}
        ratio = ""
        for base in bases:
            b = ref.get(base)
            ratio += f" {b['median_s'] / r['median_s']:8.2f}x" if b else f" {'':9s}"
        print(f"{r['workload']:8s} {r['shape']:22s} {r['system']:14s} {r['threads']:3d} "
              f"{r['median_s'] * 1e3:10.3f} {r['min_s'] * 1e3:9.3f} {r['rate']:9.2f} "
              f"{r['unit']:8s}{ratio}")
    if any(r["workload"] == "conv" for r in rows):
        print("conv rates count the direct sum's 2*N*K*C*kh*kw*Ho*Wo operations for every system"
              + ("; schedlang computes 3x3 stride-1 layers in the Winograd form, with fewer "
                 "multiplications, so their rate can pass the machine's FMA peak"
                 if winograd else ""))
    sys.stdout.flush()


def _print_low_precision_ratios(rows):
    """int8 / bfloat16 GEMM rows against the fp32 schedlang GEMM of the same shape, timed
    in turns with it (``fp32_ratio``), else against the fp32 row of the same run."""
    for r in rows:
        shape, _, dtype = r["shape"].partition("/")
        if r["workload"] != "gemm" or not dtype or r["system"] != "schedlang":
            continue
        base = [x for x in rows if x["workload"] == "gemm" and x["shape"] == shape
                and x["system"] == "schedlang" and x["threads"] == r["threads"]]
        ratio = r.get("fp32_ratio") or (r["rate"] / base[0]["rate"] if base else None)
        if ratio is not None:
            how = "; the two timed in turns" if "fp32_ratio" in r else ""
            print(f"gemm {shape} {dtype}: {ratio:.2f}x the fp32 schedlang GEMM's rate "
                  f"({_threads_text(r['threads'])}{how})")


def _write_csv(rows, path):
    import csv
    try:
        with open(path, "w", newline="") as fh:
            wr = csv.DictWriter(fh, fieldnames=CSV_COLUMNS)
            wr.writeheader()
            for r in rows:
                wr.writerow({k: r[k] for k in CSV_COLUMNS})
    except OSError as e:
        raise SystemExit(f"--csv {path}: cannot write it ({e.strerror or e}); the table above "
                         "has the same rows") from None


def _plot(rows, path):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        # the table and the CSV are out; the plot asked for is not: a failing exit
        raise SystemExit("--plot needs matplotlib: pip install matplotlib") from None
    labels = sorted({(r["workload"], r["shape"], r["threads"]) for r in rows})
    systems = sorted({r["system"] for r in rows})
    fig, ax = plt.subplots(figsize=(max(6, 1.5 * len(labels)), 4))
    width = 0.8 / max(1, len(systems))
    for n, sysname in enumerate(systems):
        vals = []
        for lab in labels:
            m = [r for r in rows if (r["workload"], r["shape"], r["threads"]) == lab
                 and r["system"] == sysname]
            vals.append(m[0]["rate"] if m else 0)
        ax.bar([x + n * width for x in range(len(labels))], vals, width, label=sysname)
    ax.set_xticks([x + 0.4 - width / 2 for x in range(len(labels))])
    ax.set_xticklabels([f"{a}\n{b}\n{c} thr" for a, b, c in labels], fontsize=8)
    ax.set_ylabel("rate (GFLOP/s or GB/s)")
    ax.legend()
    fig.tight_layout()
    try:
        fig.savefig(path)
    except OSError as e:
        raise SystemExit(f"--plot {path}: cannot write it ({e.strerror or e})") from None


def _thread_counts(text):
    """``--threads``: ``N`` or a list ``1,2``; default (None): all cores."""
    if not text:
        return [os.cpu_count() or 1]
    try:
        counts = [int(t) for t in str(text).split(",") if t.strip()]
    except ValueError:
        counts = []
    if not counts or min(counts) < 1:
        raise SystemExit(f"--threads {text}: expected a thread count >= 1 or a list like 1,2")
    if max(counts) > MAX_THREADS:
        raise SystemExit(f"--threads {text}: at most {MAX_THREADS} threads; give a smaller count")
    return list(dict.fromkeys(counts))      # once each: rows of a count are compared together


def _check_writable(flag, path):
    """Refuse an output file that cannot be written before the benchmarks run, not after."""
    import os
    folder = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(path):
        raise SystemExit(f"{flag} {path}: is a directory; give a file name")
    if os.path.exists(folder) and not os.path.isdir(folder):
        raise SystemExit(f"{flag} {path}: {folder} is a file, not a folder; give a path in "
                         "a folder")
    if not os.path.isdir(folder):
        raise SystemExit(f"{flag} {path}: the folder {folder} does not exist; create it first")
    if not os.access(path if os.path.exists(path) else folder, os.W_OK):
        raise SystemExit(f"{flag} {path}: cannot write there (permission denied)")
    # os.access says yes to root everywhere: open it for real (and leave no new file)
    existed = os.path.exists(path)
    try:
        with open(path, "a"):
            pass
    except OSError as e:
        raise SystemExit(f"{flag} {path}: cannot write there ({e.strerror or e})") from None
    if not existed:
        os.remove(path)


def _check_plot_format(path):
    """Refuse, before the benchmarks run, a --plot file matplotlib cannot write (or would
    write under another name: without an extension it appends .png)."""
    import os
    ext = os.path.splitext(path)[1].lower().lstrip(".")
    if not ext:
        raise SystemExit(f"--plot {path}: give the file an image extension, e.g. {path}.png")
    try:
        from matplotlib.backend_bases import FigureCanvasBase
    except ImportError:
        return      # _plot says how to install it; the table and CSV are still wanted
    formats = FigureCanvasBase.get_supported_filetypes()
    if ext not in formats:
        raise SystemExit(f"--plot {path}: matplotlib cannot write .{ext} files; use one of "
                         f"{', '.join('.' + f for f in sorted(formats))}")


def _check_conv_options(args, command, names):
    """``--stride`` / ``--kernel`` only describe a conv layer: given for other workloads
    they would be ignored, so they are refused."""
    if "conv" not in names and (args.stride != 1 or args.kernel != 3):
        raise SystemExit(f"--stride / --kernel choose the conv layer; {command} "
                         f"{' '.join(names)} has no conv: leave them out, or {command} conv")


def cmd_bench(args):
    WORKLOADS, _ = _workloads()
    names = list(WORKLOADS) if args.workload == "all" else [args.workload]
    for n in names:
        if n not in WORKLOADS:
            raise SystemExit(f"workload {n!r} is not available; choose from "
                             f"{', '.join(WORKLOADS)} or all")
    if args.beam < 0:
        raise SystemExit(f"--beam {args.beam}: the beam width must be >= 1 (0: no beam row)")
    unknown = [c for c in args.compare if c not in COMPARE_SYSTEMS]
    if unknown:
        raise SystemExit(f"--compare {','.join(unknown)}: unknown system; choose from "
                         f"{', '.join(COMPARE_SYSTEMS)}")
    threads = _thread_counts(args.threads)
    _check_conv_options(args, "bench", names)
    if "gemm" not in names and args.dtype != ["float32"]:
        raise SystemExit(f"--dtype {','.join(args.dtype)} chooses the gemm's types; bench "
                         f"{' '.join(names)} has no gemm: leave it out, or bench gemm")
    if args.size:
        args.size = list(dict.fromkeys(args.size))     # a size given twice is measured once
    from schedlang.bench.timing import row_budget_s
    from schedlang.compiler import check_target
    if check_target(args.target) != "llvm":
        from schedlang.bench.gpu_workloads import check_gpu_bench
        args.compare = check_gpu_bench(args.target, args.beam,
                                       args.dtype if "gemm" in names else ["float32"],
                                       args.compare)
    row_budget_s()      # a bad SCHEDLANG_BENCH_BUDGET_S is refused before anything runs
    if args.beam:
        from schedlang.autotune.integration import budget_from_env
        budget_from_env()   # and a bad SCHEDLANG_BEAM_BUDGET_S before "tuning ..." is said
    if args.csv and args.plot and os.path.realpath(args.csv) == os.path.realpath(args.plot):
        # the plot would be written over the CSV after it: the rows would be lost
        raise SystemExit(f"--csv {args.csv} and --plot {args.plot} name the same file; give "
                         "each its own, e.g. --csv rows.csv --plot rates.png")
    for flag, path in (("--csv", args.csv), ("--plot", args.plot)):
        if path is not None and not path.strip():
            raise SystemExit(f"{flag} '': name the file to write, e.g. {flag} "
                             f"{'rows.csv' if flag == '--csv' else 'rates.png'}")
        if path:
            _check_writable(flag, path)
    if args.plot:
        _check_plot_format(args.plot)
    if "gemm" in names:
        if not args.dtype:
            raise SystemExit("--dtype: name at least one gemm type, e.g. --dtype float32,int8")
        args.dtype = list(dict.fromkeys(args.dtype))
    # every --size and --dtype is checked before anything is tuned or measured
    for n in names:
        for size in args.size or list(WORKLOADS[n].default_sizes):
            for dtype in (args.dtype if n == "gemm" else ["float32"]):
                w = make_workload(n, size, args.stride, args.kernel, dtype)
                if dtype != "float32":
                    # builds no code; refuses a shape the dot-product instruction cannot take
                    w.algorithm()
    beam_json = {}
    if args.beam:
        # tune here, once per thread count (the tuning database keys schedules by it),
        # before the measuring children start; each child is handed its schedule
        for n in names:
            if n == "gemm" and "float32" not in args.dtype:
                continue    # the beam row is an fp32 one: no gemm row would use it
            for size in args.size or list(WORKLOADS[n].default_sizes):
                w = make_workload(n, size, args.stride, args.kernel)
                outs, hand = w.algorithm()
                for t in threads:
                    beam_json[n, size, t] = _beam_schedule(
                        w, outs, hand, args.target, args.beam, t).to_json()
    _note_missing_systems(args.compare)
    winograd = args.stride == 1 and args.kernel == 3
    rows = []
    for n in names:
        sizes = args.size or list(WORKLOADS[n].default_sizes)
        for size in sizes:
            for t in threads:
                for dtype in (args.dtype if n == "gemm" else ["float32"]):
                    part = _child_rows(args, n, size, t, dtype, beam_json.get((n, size, t)))
                    rows.extend(part)
                    _print_table(part, winograd) if args.verbose else None
    if "conv" in names and (args.stride != 1 or args.kernel != 3):
        # every conv row of a run has these (the shape column is the NxCxHxWxK size)
        print(f"conv layers: {make_workload('conv', '1', args.stride, args.kernel).variant}")
    _print_table(rows, winograd)
    _print_low_precision_ratios(rows)
    if args.csv:
        _write_csv(rows, args.csv)
    if args.plot:
        _plot(rows, args.plot)


def algorithm_text(outs) -> str:
    """The algorithm of ``outs`` as readable text: its Inputs, then each Func's definitions
    (producers first, update stages after their pure definition)."""
    import schedlang as sl
    from schedlang.algo.printer import expr_to_str
    outs = list(outs) if isinstance(outs, (list, tuple)) else [outs]
    plain = sl.Schedule(*outs)          # no directives: just the algorithm's Funcs
    lines = []
    for inp in plain.inputs:
        dims = ", ".join(expr_to_str(d) for d in inp.shape) + ("," if len(inp.shape) == 1 else "")
        lines.append(f"{inp.name} = Input({inp.dtype.name}, ({dims}))")
    for f in reversed(plain.funcs):
        for d in f.definitions:
            lhs = f"{f.name}[{', '.join(expr_to_str(a) for a in d.args)}]"
            where = f"  where {expr_to_str(d.predicate)}" if d.predicate is not None else ""
            lines.append(f"{lhs} = {expr_to_str(d.value)}{where}")
    return "\n".join(lines) + "\n"


def cmd_show(args):
    import schedlang as sl
    WORKLOADS, parse_size = _workloads()
    if args.workload not in WORKLOADS:
        raise SystemExit(f"unknown workload {args.workload!r}; choose from {', '.join(WORKLOADS)}")
    _check_conv_options(args, "show", [args.workload])
    w = make_workload(args.workload, args.size or WORKLOADS[args.workload].default_sizes[0],
                      args.stride, args.kernel, allocates=False)
    outs, s = w.algorithm()
    from schedlang.compiler import check_target
    if not args.schedule and check_target(args.target) != "llvm":
        # the workloads' schedules are written for CPUs (one thread, stack buffers larger
        # than a GPU's local memory): a GPU target shows its default schedule
        from schedlang.schedule.gpu_default import gpu_default_schedule
        s = gpu_default_schedule(list(outs) if isinstance(outs, (list, tuple)) else [outs])
    if args.schedule:
        try:
            with open(args.schedule) as fh:
                text = fh.read()
        except OSError as e:
            raise SystemExit(f"--schedule {args.schedule}: cannot read it ({e.strerror})") from None
        except UnicodeDecodeError:
            raise SystemExit(f"--schedule {args.schedule}: not a text file; give the JSON text "
                             "that Schedule.to_json() wrote") from None
        try:
            s = sl.Schedule.from_json(text, outs)
        except (sl.SchedlangError, ValueError, KeyError, TypeError) as e:
            raise SystemExit(f"--schedule {args.schedule}: not a schedule of {w.name} "
                             f"{w.shape_text} saved with Schedule.to_json() ({e})") from None
    try:
        kern = sl.compile(outs, s, target=args.target)     # a bad target: said before any output
    except (sl.ScheduleError, sl.AlgorithmError) as e:
        if not args.schedule:
            raise
        # a schedule written for another size of the workload (an unroll of a loop whose
        # extent is no longer constant): the message names the file it came from
        raise SystemExit(f"schedlang show: --schedule {args.schedule} does not fit {w.name} "
                         f"{w.shape_text}: {type(e).__name__}: {e}") from None
    print(f"# algorithm ({w.name} {w.shape_text})\n" + algorithm_text(outs))
    print("# schedule\n" + str(s))
    print("# loop IR\n" + kern.loop_ir)
    print("# generated code\n" + kern.source)


def cmd_tune(args):
    from schedlang.autotune.search import tune
    WORKLOADS, _ = _workloads()
    if args.workload not in WORKLOADS:
        raise SystemExit(f"unknown workload {args.workload!r}; choose from {', '.join(WORKLOADS)}")
    _check_conv_options(args, "tune", [args.workload])
    if args.beam < 1:
        raise SystemExit(f"--beam {args.beam}: the beam width must be >= 1")
    if not 0 < args.budget_s < float("inf"):
        raise SystemExit(f"--budget-s {args.budget_s:g}: the budget must be a number of seconds "
                         "above 0")
    if args.threads is not None and not 1 <= args.threads <= MAX_THREADS:
        raise SystemExit(f"--threads {args.threads}: the thread count must be from 1 to "
                         f"{MAX_THREADS} (default: all cores)")
    w = make_workload(args.workload, args.size or WORKLOADS[args.workload].default_sizes[0],
                      args.stride, args.kernel)
    from schedlang.compiler import check_target
    if check_target(args.target) != "llvm":     # a bad target: said before "tuning ..."
        raise SystemExit(f"--target {args.target}: tune times every candidate on this "
                         "machine's CPU; use --target llvm or llvm:<cpu>")
    outs, hand = w.algorithm()
    from schedlang.autotune.keys import check_threads
    threads = check_threads(args.threads)       # the database keys the result by it
    print(f"tuning {w.name} {w.shape_text}: beam {args.beam}, budget {args.budget_s:g} s, "
          f"strategy {args.strategy}, {_threads_text(threads)}", file=sys.stderr, flush=True)
    result = tune(outs, target=args.target, beam=args.beam, budget_s=args.budget_s,
                  strategy=args.strategy, threads=threads, summary=False,
                  seeds=(hand,))     # the search also starts from the bench's own schedule
    r = result.report
    print(f"# {w.name} {w.shape_text}: best {r.best_s * 1e3:.3f} ms "
          f"({_rate(w, r.best_s):.2f} {w.unit}), default schedule {r.default_s * 1e3:.3f} ms; "
          f"{r.measured} measured, {r.failed} failed, {r.wrong} wrong ({r.rejected} illegal "
          f"moves skipped), {r.rounds} rounds, {r.retimed} finalists timed again, in "
          f"{r.elapsed_s:.1f} s" + (f"; stored in {r.database}" if r.stored else ""))
    print(str(result.schedule), end="")
    sys.stdout.flush()


def _warning_line(message, category, filename, lineno, line=None):
    """A warning on the command line: its message alone, not the library file and source
    line it was raised from (which read like a traceback to a user)."""
    text = str(message)
    return (text if text.startswith("schedlang") else f"schedlang: {text}") + "\n"


def main(argv=None):
    import warnings
    saved = warnings.formatwarning
    warnings.formatwarning = _warning_line
    try:
        return _main(argv)
    finally:        # a caller in the same process keeps its own warning format
        warnings.formatwarning = saved


def _main(argv):
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["_measure"]:
        workload, size, threads, compare, target, stride, kernel, dtype = argv[1:9]
        beam = int(argv[9]) if len(argv) > 9 else 0
        beam_schedule_json = None
        if len(argv) > 10 and argv[10] != "-":
            with open(argv[10]) as fh:
                beam_schedule_json = fh.read()
        from schedlang.errors import SchedlangError
        try:
            rows = run_one(workload, size, int(threads), compare.split(","), target,
                           int(stride), int(kernel), dtype, beam, beam_schedule_json)
        except SchedlangError as e:     # the parent shows this line, not a traceback
            raise SystemExit(f"schedlang bench: {type(e).__name__}: {e}") from None
        except KeyboardInterrupt:       # Ctrl-C reaches the whole group; the parent says it
            return 130
        print(json.dumps(rows))
        return 0
    p = argparse.ArgumentParser(prog="schedlang", description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("bench", help="measure kernels against numpy / torch")
    b.add_argument("workload", nargs="?", default="all")
    b.add_argument("--target", default="llvm")
    b.add_argument("--size", action="extend", type=lambda t: [x for x in t.split(",") if x] or [t],
                   help="a size, or several as 1024,2048 or a repeated --size")
    b.add_argument("--beam", type=int, default=0)
    b.add_argument("--compare", default=",".join(DEFAULT_COMPARE),
                   type=lambda t: [x.strip() for x in t.split(",") if x.strip()],
                   help="comparison systems (default: %(default)s; torch and halide rows "
                        "appear when those packages are installed)")
    b.add_argument("--threads", default=None, help="N or a list like 1,2 (default: all cores)")
    b.add_argument("--stride", type=int, default=1, choices=(1, 2), help="conv stride")
    b.add_argument("--kernel", type=int, default=3, choices=(1, 3), help="conv kernel size")
    b.add_argument("--dtype", default=["float32"], type=lambda t: [x for x in t.split(",") if x],
                   help="gemm element types, e.g. float32,int8,bfloat16 (int8 and bfloat16 "
                        "use the CPU's dot-product instructions)")
    b.add_argument("--csv")
    b.add_argument("--plot")
    b.add_argument("--verbose", action="store_true")
    sh = sub.add_parser("show", help="print a workload's schedule, loop IR and code")
    sh.add_argument("workload")
    sh.add_argument("--schedule")
    sh.add_argument("--target", default="llvm")
    sh.add_argument("--size")
    sh.add_argument("--stride", type=int, default=1, choices=(1, 2), help="conv stride")
    sh.add_argument("--kernel", type=int, default=3, choices=(1, 3), help="conv kernel size")
    tu = sub.add_parser("tune", help="search a workload's schedule; store it in the tuning "
                                     "database")
    tu.add_argument("workload")
    tu.add_argument("--size")
    tu.add_argument("--beam", type=int, default=4)
    tu.add_argument("--budget-s", type=float, default=60.0)
    tu.add_argument("--threads", type=int, default=None, help="threads per kernel (default: "
                    "all cores)")
    tu.add_argument("--strategy", choices=("beam", "model"), default="beam")
    tu.add_argument("--target", default="llvm")
    tu.add_argument("--stride", type=int, default=1, choices=(1, 2), help="conv stride")
    tu.add_argument("--kernel", type=int, default=3, choices=(1, 3), help="conv kernel size")
    args = p.parse_args(argv)
    from schedlang.errors import SchedlangError
    try:
        if args.cmd == "bench":
            cmd_bench(args)
        elif args.cmd == "tune":
            cmd_tune(args)
        else:
            cmd_show(args)
    except SchedlangError as e:     # a user mistake (a bad target, schedule, ...): no traceback
        raise SystemExit(f"schedlang {args.cmd}: {type(e).__name__}: {e}") from None
    except KeyboardInterrupt:
        # Ctrl-C (a long tune or bench): one line, not the traceback of wherever it landed
        print(f"schedlang {args.cmd}: interrupted"
              + ("; nothing was stored in the tuning database" if args.cmd == "tune" else ""),
              file=sys.stderr)
        return 130
    except BrokenPipeError:
        # the reader went away (``schedlang show gemm | head``): stop quietly, as cat does;
        # stdout now points at nothing so that the interpreter's final flush cannot fail
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
    return 0


if __name__ == "__main__":
    sys.exit(main())
