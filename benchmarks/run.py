"""Performance benchmark: ours against the PyTorch seq2seq tutorial's setup, side by side, one command.

    python benchmarks/run.py [--quick] [--seeds N] [--json OUT] [--threads N] [--models DIR] [--only SECTION ...]

Sections (each runs in its own child process, one after the other, never in parallel):

- ``train``      time to 99% exact match on reversal, lengths 5–15: ours (``recipes.train_task`` with the
                 CLI defaults ``TRAIN_DEFAULTS``/``MODEL_DEFAULTS``, in the ranks ``explorer train`` would use,
                 wall time including forking them, model building, evaluation and the stop's confirmation)
                 against the tutorial reference (``tutorial_reference.py``, its training time; its evaluation
                 is not counted), per seed; medians. Then ours is scored on 2,000 fresh samples the stop
                 never saw (not timed).
- ``long``       lengths 20–30: ours to 99%, the reference to 95% (within budgets).
- ``throughput`` training sequences/s on lengths 5–15 (batch generation included, evaluation not):
                 ours at batch 32 and at our default batch, ours at the tutorial's model sizes (GRU 128,
                 embedding 128, additive attention) at our default batch, the reference at its batch 32, interleaved
                 rounds in one process; medians.
- ``ddp``        training sequences/s in N ranks (DistributedDataParallel, gloo; N = ``--processes``, at least 2)
                 against one process and against N ranks without the gradient all_reduce, interleaved in one
                 run: DDP's speed-up and what its communication costs (also run by ``throughput`` when ours
                 trains in several processes).
- ``precision``  training steps of the eng-fra recipe's model (GRU 512, 4,000 pieces a language, batch 128, random
                 pieces of eng-fra's lengths) in float32 and in bfloat16 mixed precision (``train --bf16``), one
                 process, the same batches, alternating rounds; medians. Not in the default set (a few minutes).
- ``process``    ``python -m explorer train --task reverse --min-len 5 --max-len 15 --target-accuracy 0.99`` timed
                 as a whole process (start-up, training, evaluations, the stop's confirmation, saving), rounds
                 alternating with ``python -c "import torch"`` (the floor any command that trains pays), with
                 the trainer's own clock from the command's JSON; medians. Not in the default set.
- ``trace``      a full trace of a 30-token input against a plain greedy decode of it (``greedy_batch``),
                 shipped ``reverse`` model (or a fresh one of the same configuration), interleaved; medians.
- ``neighbours`` the nearest-examples index (``explorer.engine.neighbours``) of every checkpoint in the models folder:
                 seconds to build it the first time in a fresh process (what the first visitor waits for),
                 its size in memory, and a search's time (median); models without example pairs have none.
- ``app``        server-side rerun times under ``AppTest``: the Explore page after changing the decoder step
                 (a full script rerun under AppTest; in a browser only the step fragment reruns) and after
                 typing a new input; medians.
- ``coldstart``  ``streamlit run app.py`` headless, opened in headless Chromium: seconds from process start
                 until the Explore page has fully rendered (script idle, every Plotly chart drawn, no element
                 still a loading placeholder); after the last of three starts every shipped model is opened
                 (``?model=NAME&nn=s1``: its nearest-examples index built too) and the server's memory is read from /proc. Before each, in the same
                 browser (a fresh context each time: nothing cached), a bare two-page Streamlit app drawing
                 one Plotly chart: Streamlit's own floor on this machine. Medians of the three.

The machine is shared: absolute times move from run to run, ratios measured in one run are what count.
Both sides use the same number of torch threads (``--threads``; default: what ``explorer`` picks).
Without shipped checkpoints in ``pretrained/``, untrained stand-ins with the shipped configurations are
used (said so in the output): they decode to the length cap, so trace and app times are pessimistic.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Iterator

ROOT = Path(__file__).resolve().parent.parent
BENCH = Path(__file__).resolve().parent
sys.path[:0] = [str(ROOT), str(BENCH), str(ROOT / "tests")]

# Toy models the app ships (pretrained/README.md); stand-ins are built from these when pretrained/ is empty.
SHIPPED_TOY = {  # name: (task, min_len, max_len, model options over MODEL_DEFAULTS)
    "reverse": ("reverse", 1, 30, {}),
    "copy": ("copy", 1, 30, {}),
    "reverse-none": ("reverse", 1, 30, {"attention": "none"}),
    "dates": ("dates", 1, 1, {}),
    "sort": ("sort", 1, 20, {}),
}
TRACE_INPUT = "314159265358979323846264338327"  # 30 digits
# The tutorial's model sizes in our model: GRU 128 (one direction), embedding 128, additive attention.
TUTORIAL_SIZES = {"embed": 128, "hidden": 128, "attn_dim": 128, "bidirectional": False, "attention": "additive"}


# --------------------------------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------------------------------

def median(values: list[float]) -> float:
    """Median; +inf counts as a value (a run that never got there)."""
    return statistics.median(values) if values else math.nan


def set_threads(threads: int | None) -> int:
    """The given torch thread count, or the one `python -m explorer train` picks (recipes.auto_threads)."""
    import torch
    from explorer.training.recipes import auto_threads
    torch.set_num_threads(threads or auto_threads())
    return torch.get_num_threads()


def pretrained_dir() -> Path:
    from explorer.checkpoints import checkpoint
    return checkpoint.PRETRAINED_DIR


def shipped_names() -> list[str]:
    return sorted(p.name[: -len(".safetensors")] for p in pretrained_dir().glob("*.safetensors"))


def stand_in_folder() -> Path:
    """Untrained models with the shipped toy configurations, in a temporary folder."""
    from explorer.checkpoints import checkpoint
    from explorer.training.recipes import MODEL_DEFAULTS
    from explorer.data.tasks import TaskSpec
    from explorer.training.train import new_task_bundle
    folder = Path(tempfile.mkdtemp(prefix="bench-models-"))
    for name, (task, lo, hi, options) in SHIPPED_TOY.items():
        spec = TaskSpec(task) if task == "dates" else TaskSpec(task, lo, hi)
        bundle, _ = new_task_bundle(spec, name, seed=0, **{**MODEL_DEFAULTS, **options})
        bundle.model.eval()
        checkpoint.save(bundle, folder / name)
    return folder


def models_folder(given: str | None = None) -> tuple[Path, str]:
    """The given folder, or pretrained/ when it ships checkpoints, else a folder of untrained stand-ins;
    and a note saying which."""
    if given:
        names = sorted(p.name[: -len(".safetensors")] for p in Path(given).glob("*.safetensors"))
        return Path(given).resolve(), f"checkpoints in {given}: {', '.join(names)}"
    names = shipped_names()
    if names:
        return pretrained_dir(), f"shipped checkpoints: {', '.join(names)}"
    return stand_in_folder(), ("pretrained/ is empty: untrained stand-ins with the shipped toy configurations "
                               f"({', '.join(SHIPPED_TOY)}); no translation models")


def timed_reps(fns: dict[str, Callable[[], Any]], reps: int, warmup: int = 3) -> dict[str, dict[str, list[float]]]:
    """Run each function `reps` times, interleaved (a b a b ...): wall and CPU seconds of each call."""
    for fn in fns.values():
        for _ in range(warmup):
            fn()
    out: dict[str, dict[str, list[float]]] = {k: {"wall": [], "cpu": []} for k in fns}
    for _ in range(reps):
        for name, fn in fns.items():
            t0, c0 = time.perf_counter(), time.process_time()
            fn()
            out[name]["cpu"].append(time.process_time() - c0)
            out[name]["wall"].append(time.perf_counter() - t0)
    return out


# --------------------------------------------------------------------------------------------------
# workers (each runs in a child process: `run.py --worker NAME --params JSON`, prints RESULT <json>)
# --------------------------------------------------------------------------------------------------

def worker_train_ours(p: dict) -> dict:
    t_import = time.perf_counter()
    import torch  # noqa: F401
    threads = set_threads(p.get("threads"))
    from explorer.training.recipes import MODEL_DEFAULTS, TRAIN_DEFAULTS, train_task
    from explorer.data.tasks import TaskSpec
    from explorer.training.train import TrainConfig
    from explorer.training.distributed import run_ranks
    from explorer.training.evaluation import task_pairs
    from explorer.training.evaluation import evaluate
    import_s = time.perf_counter() - t_import
    cfg = TrainConfig(**{**TRAIN_DEFAULTS, "target_accuracy": p["target"], "seed": p["seed"],
                         "max_seconds": p["budget"]})
    evals: list[tuple[int, float]] = []
    spec = TaskSpec("reverse", p["min_len"], p["max_len"])

    def rank(world):  # as `explorer train --processes N` runs: this process is rank 0, the others are forked
        torch.set_num_threads(threads)
        bundle, _, result = train_task(spec, "bench", dict(MODEL_DEFAULTS), cfg, world=world,
                                       on_eval=lambda pr: evals.append((pr.examples, pr.metrics.exact_match)))
        return bundle, result
    t0, c0 = time.perf_counter(), _tree_cpu(os.getpid())  # with its other ranks' CPU time
    bundle, result = run_ranks(p.get("processes", 1), torch.device("cpu"), rank)
    wall, cpu = time.perf_counter() - t0, _tree_cpu(os.getpid()) - c0
    # The stop's promise, checked where the stop never looked: 2,000 fresh samples from a seed of their own.
    fresh = evaluate(bundle.model, task_pairs(bundle, samples=2000, seed=777_000 + p["seed"]))
    return {"reached": result.reason == "target", "reason": result.reason, "wall": wall, "cpu": cpu,
            "train_seconds": result.seconds, "examples": result.examples, "exact": result.metrics.exact_match,
            "fresh_exact": fresh.exact_match, "confirm_exact": result.history[-1].get("confirm_exact_match"),
            "import_seconds": import_s, "threads": threads, "processes": result.processes, "evaluations": len(evals),
            "train_config": {k: v for k, v in vars(cfg).items() if k not in ("seed", "target_accuracy", "max_seconds")},
            "model": dict(MODEL_DEFAULTS)}


def worker_train_ref(p: dict) -> dict:
    threads = set_threads(p.get("threads"))
    import tutorial_reference as ref

    cpu = [0.0]  # CPU seconds of its timed part (batch making and training steps; not its evaluation)

    def cpu_timed(fn: Callable) -> Callable:
        def wrapped(*a, **k):
            c = time.process_time()
            try:
                return fn(*a, **k)
            finally:
                cpu[0] += time.process_time() - c
        return wrapped
    ref.train_step, ref.make_batch = cpu_timed(ref.train_step), cpu_timed(ref.make_batch)
    t0 = time.perf_counter()
    r = ref.train_reference(min_len=p["min_len"], max_len=p["max_len"], target_accuracy=p["target"],
                            max_seconds=p["budget"], seed=p["seed"], threads=threads)
    wall = time.perf_counter() - t0
    return {"reached": r.reached, "wall": wall, "train_seconds": r.seconds, "cpu": cpu[0], "examples": r.examples,
            "exact": r.final_accuracy, "threads": threads}


def worker_throughput(p: dict) -> dict:
    import torch
    threads = set_threads(p.get("threads"))
    from explorer.training.recipes import MODEL_DEFAULTS, TRAIN_DEFAULTS
    from explorer.data.tasks import TaskSpec
    from explorer.training.data import TaskData
    from explorer.training.train import TrainConfig, Trainer, new_task_bundle
    import tutorial_reference as ref

    spec = TaskSpec("reverse", 5, 15)
    batches = p["batches"]

    def timed(n: int, batch_size: int, step: Callable[[], None]) -> tuple[float, float]:
        t0, c0 = time.perf_counter(), _tree_cpu(os.getpid())
        for _ in range(n):
            step()
        return n * batch_size / (time.perf_counter() - t0), n * batch_size / (_tree_cpu(os.getpid()) - c0)

    trainers: list[Trainer] = []

    def ours(batch_size: int, sizes: dict | None = None) -> Callable[[], tuple[float, float]]:
        bundle, task = new_task_bundle(spec, "bench", seed=0, **(sizes or MODEL_DEFAULTS))
        data = TaskData(task, bundle.src_vocab, bundle.tgt_vocab, 10, 0)
        # No curriculum: its first steps draw shorter inputs, and throughput is measured on lengths 5-15.
        cfg = TrainConfig(**{**TRAIN_DEFAULTS, "batch_size": batch_size, "curriculum": 0})
        trainer = Trainer(bundle, data, cfg)
        trainers.append(trainer)
        bundle.model.train()

        def step() -> None:  # what Trainer.run does per step, minus the bookkeeping
            trainer.train_step(trainer.next_batch())
        for _ in range(3):
            step()
        return lambda: timed(max(4, batches * 32 // batch_size), batch_size, step)

    def reference() -> Callable[[], tuple[float, float]]:
        # throughput_reference() of tutorial_reference.py, timed in wall and CPU seconds
        rng = ref._seed_everything(0)
        encoder, decoder = ref.build_models(15)
        enc_opt = torch.optim.Adam(encoder.parameters(), lr=ref.LEARNING_RATE)
        dec_opt = torch.optim.Adam(decoder.parameters(), lr=ref.LEARNING_RATE)
        criterion = torch.nn.NLLLoss()
        encoder.train()
        decoder.train()

        def step() -> None:
            inp, tgt = ref.make_batch(rng, ref.BATCH_SIZE, 5, 15)
            ref.train_step(inp, tgt, encoder, decoder, enc_opt, dec_opt, criterion)
        for _ in range(3):
            step()
        return lambda: timed(batches, ref.BATCH_SIZE, step)

    default_batch = TRAIN_DEFAULTS["batch_size"]
    runs = {"ours_b32": ours(32), f"ours_b{default_batch}": ours(default_batch),
            f"ours-tutorial-sizes_b{default_batch}": ours(default_batch, TUTORIAL_SIZES), "reference_b32": reference()}
    if p.get("extra_batch"):
        runs[f"ours_b{p['extra_batch']}"] = ours(p["extra_batch"])
    rates: dict[str, list[float]] = {k: [] for k in runs}
    cpu_rates: dict[str, list[float]] = {k: [] for k in runs}
    for _ in range(p["rounds"]):
        for name, fn in runs.items():
            wall, cpu = fn()
            rates[name].append(wall)
            cpu_rates[name].append(cpu)
    return {"threads": threads, "default_batch": default_batch, "rates": rates, "cpu_rates": cpu_rates,
            "median": {k: median(v) for k, v in rates.items()},
            "cpu_median": {k: median(v) for k, v in cpu_rates.items()}}


# The hidden-512 eng-fra model --bf16 was measured on (docs/CLI.md); the shipped recipe (pretrained/README.md)
# has since widened the attention to 512.
TRANSLATION_SIZES = {"src_vocab": 4000, "tgt_vocab": 4000, "embed": 256, "hidden": 512, "attn_dim": 256,
                     "attention": "additive", "bidirectional": True, "dropout": 0.3}


def worker_precision(p: dict) -> dict:
    """Training steps of the eng-fra model (forward, backward, clipping, Adam) in float32 and in bfloat16
    mixed precision (`train --bf16`), one process, on the same batches, rounds alternating: pairs per second.
    Batches are random pieces with eng-fra's lengths (4–16 source pieces, targets within −2..+3 of them)."""
    import random
    import torch
    threads = set_threads(p.get("threads"))
    from explorer.engine.model import ModelConfig
    from explorer.engine.seeding import seeded_model
    from explorer.training.optim import Adam
    from explorer.training.data import Pair
    from explorer.training.train import batch_loss
    from explorer.training.training_forward import TrainingForward

    rng = random.Random(0)
    cfg = ModelConfig(**TRANSLATION_SIZES)
    batch_size = p["batch_size"]

    def pair() -> Pair:
        s = rng.randint(4, 16)
        t = max(2, s + rng.randint(-2, 3))
        return Pair(tuple(rng.randrange(4, cfg.src_vocab) for _ in range(s)),
                    tuple(rng.randrange(4, cfg.tgt_vocab) for _ in range(t)))
    batches = [sorted((pair() for _ in range(batch_size)), key=lambda x: len(x.tgt), reverse=True)
               for _ in range(p["batches"])]
    sides = {}
    for name, bf16 in (("float32", False), ("bf16", True)):
        model = seeded_model(cfg, 0)
        model.train()
        forward, optimizer = TrainingForward(model, bf16=bf16), Adam(model.parameters(), lr=2e-3)

        def step(pairs: list, forward=forward, optimizer=optimizer, model=model) -> None:
            optimizer.zero_grad(set_to_none=True)
            batch_loss(forward, pairs, label_smoothing=0.1).loss.backward()  # as Trainer.train_step
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
        step(batches[0])
        sides[name] = step
    rates: dict[str, list[float]] = {k: [] for k in sides}
    for _ in range(p["rounds"]):
        for name, step in sides.items():
            t0 = time.perf_counter()
            for pairs in batches:
                step(pairs)
            rates[name].append(len(batches) * batch_size / (time.perf_counter() - t0))
    return {"threads": threads, "batch_size": batch_size, "rates": rates,
            "median": {k: median(v) for k, v in rates.items()}}


def worker_ddp(p: dict) -> dict:
    """Training sequences/s in N ranks (DistributedDataParallel over gloo, as `explorer train --processes N`)
    against one process, interleaved in one run: at our default sizes and at the tutorial's, batch 128 (each
    rank trains on 128 / N rows of it). Also N ranks with DDP's gradient all_reduce skipped (`no_sync`, the
    ranks' weights then drift apart: a measurement only): the difference is what the communication costs.
    One process trains on rank 0 while the other ranks wait in a blocking receive."""
    import torch
    threads = set_threads(p.get("threads"))
    from explorer.training.distributed import run_ranks
    from explorer.training.recipes import MODEL_DEFAULTS, TRAIN_DEFAULTS
    from explorer.data.tasks import TaskSpec
    from explorer.training.data import TaskData
    from explorer.training.train import TrainConfig, Trainer, new_task_bundle
    spec, batch, n = TaskSpec("reverse", 5, 15), TRAIN_DEFAULTS["batch_size"], p["processes"]
    steps = max(4, p["batches"] * 32 // batch)

    def body(world):
        torch.set_num_threads(threads)
        sides: dict[str, tuple] = {}
        for name, sizes in (("ours", MODEL_DEFAULTS), ("ours-tutorial-sizes", TUTORIAL_SIZES)):
            cfg = TrainConfig(**{**TRAIN_DEFAULTS, "batch_size": batch, "curriculum": 0})
            made = [new_task_bundle(spec, "bench", seed=0, **sizes) for _ in range(2)]
            ranks, solo = ((Trainer(b, TaskData(t, b.src_vocab, b.tgt_vocab, 10, 0), cfg, world=w)
                            for (b, t), w in zip(made, (world, None))))
            sides[name] = (ranks, solo)
        rates: dict[str, list[float]] = {}
        cpu_rates: dict[str, list[float]] = {}

        def timed(key: str, step: Callable[[], None], here: bool = True) -> None:
            world.sum([0.0])  # every rank starts together
            t0, c0 = time.perf_counter(), _tree_cpu(os.getpid())
            if here:
                for _ in range(steps):
                    step()
            world.sum([0.0])
            wall, cpu = time.perf_counter() - t0, _tree_cpu(os.getpid()) - c0
            if here:  # a rank that only waited may have used no measurable CPU time
                rates.setdefault(key, []).append(steps * batch / wall)
                cpu_rates.setdefault(key, []).append(steps * batch / cpu)

        for name, (ranks, solo) in sides.items():  # warm-up
            for _ in range(3):
                ranks.train_step(ranks.next_batch())
                if world.leader:
                    solo.train_step(solo.next_batch())
        for _ in range(p["rounds"]):
            for name, (ranks, solo) in sides.items():
                timed(f"{name}_b{batch}_p{n}", lambda: ranks.train_step(ranks.next_batch()))

                def unsynced() -> None:
                    with ranks._forward_model().no_sync():
                        ranks.train_step(ranks.next_batch())
                timed(f"{name}_b{batch}_p{n}_no_sync", unsynced)
                timed(f"{name}_b{batch}_p1", lambda: solo.train_step(solo.next_batch()), here=world.leader)
        return rates, cpu_rates
    rates, cpu_rates = run_ranks(n, torch.device("cpu"), body)
    return {"threads": threads, "processes": n, "rates": rates, "cpu_rates": cpu_rates,
            "median": {k: median(v) for k, v in rates.items()},
            "cpu_median": {k: median(v) for k, v in cpu_rates.items()}}


def worker_trace(p: dict) -> dict:
    threads = set_threads(p.get("threads"))
    from explorer.checkpoints import checkpoint
    from explorer.engine.decoding import greedy_batch
    from explorer.training.recipes import MODEL_DEFAULTS
    from explorer.data.tasks import TaskSpec
    from explorer.engine.trace import trace
    from explorer.training.train import new_task_bundle

    path = Path(p["models"]) / "reverse.safetensors"
    if path.exists():
        bundle, source = checkpoint.load(path), str(path.relative_to(ROOT) if path.is_relative_to(ROOT) else path)
    else:
        bundle, _ = new_task_bundle(TaskSpec("reverse", 1, 30), "reverse", seed=0, **MODEL_DEFAULTS)
        source = "fresh untrained model, shipped reverse configuration (decodes to the length cap)"
    bundle.model.eval()
    ids = bundle.prepare(TRACE_INPUT).ids
    model = bundle.model
    times = timed_reps({"trace": lambda: trace(bundle, TRACE_INPUT),
                        "greedy": lambda: greedy_batch(model, [ids])}, p["reps"])
    tr = trace(bundle, TRACE_INPUT)
    return {"threads": threads, "model": source, "input_tokens": len(ids), "output_steps": tr.steps,
            "trace_ms": median(times["trace"]["wall"]) * 1000, "greedy_ms": median(times["greedy"]["wall"]) * 1000,
            "trace_cpu_ms": median(times["trace"]["cpu"]) * 1000, "greedy_cpu_ms": median(times["greedy"]["cpu"]) * 1000,
            "reps": p["reps"]}


def worker_neighbours(p: dict) -> dict:
    threads = set_threads(p.get("threads"))
    from explorer.checkpoints import checkpoint
    from explorer.engine import neighbours
    from explorer.errors import ExplorerError

    models = {}
    for path in sorted(Path(p["models"]).glob("*.safetensors")):
        bundle = checkpoint.load(path)
        started = time.perf_counter()
        try:
            index = neighbours.build_index(bundle)
        except ExplorerError as e:  # a model without example pairs has no index; said so in the table
            models[bundle.name] = {"error": str(e)[:120]}
            continue
        first = time.perf_counter() - started
        query = index.decoder[len(index.decoder) // 2]
        search = timed_reps({"nearest": lambda: neighbours.nearest(index, "s", query, k=5)}, p["reps"])
        models[bundle.name] = {"build_s": first, "mb": index.nbytes / 1e6, "pairs": len(index.pairs),
                               "rows": int(len(index.encoder) + len(index.decoder)),
                               "search_ms": median(search["nearest"]["wall"]) * 1000}
    return {"threads": threads, "models": models}


def worker_app(p: dict) -> dict:
    import random

    from streamlit.testing.v1 import AppTest

    folder = Path(p["models"])
    names = sorted(x.name[: -len(".safetensors")] for x in folder.glob("*.safetensors"))
    model = "reverse" if "reverse" in names else names[0]
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=180)
    at.query_params["model"] = model
    t0 = time.perf_counter()
    at.run()
    first = time.perf_counter() - t0
    if at.exception:
        raise RuntimeError(f"the app raised: {[e.value for e in at.exception]}")
    threads = __import__("torch").get_num_threads()

    cpu: list[float] = []

    def rerun() -> float:
        t, c = time.perf_counter(), time.process_time()
        at.run()
        dt = time.perf_counter() - t
        cpu.append(time.process_time() - c)
        if at.exception:
            raise RuntimeError(f"the app raised: {[e.value for e in at.exception]}")
        return dt

    def step_slider():
        sliders = [s for s in at.slider if s.label == "Step t"]
        if not sliders:
            raise RuntimeError("no 'Step t' slider on the Explore page (a one-step output?)")
        return sliders[0]

    rng = random.Random(0)
    digits = "0123456789"
    steps, panel, inputs, compute, step_cpu, input_cpu = [], [], [], [], [], []
    for n in range(p["reps"] + 1):  # the first of each is a warm-up
        text = "".join(rng.choice(digits) for _ in range(rng.randint(10, 20)))
        at.text_input(key="explore_input").set_value(text)
        dt = rerun()
        if n:
            inputs.append(dt)
            input_cpu.append(cpu[-1])
            compute.append(at.session_state["explore_compute_ms"])
        for k in range(p["steps_per_input"]):
            slider = step_slider()  # its key changes whenever the step moves some other way
            slider.set_value(1 + (k * 3 + 2) % int(slider.max))
            dt = rerun()
            if n:
                steps.append(dt)
                step_cpu.append(cpu[-1])
                panel.append(at.session_state["explore_panel_ms"])
    return {"model": model, "threads": threads, "first_run_s": first,
            "step_ms": median(steps) * 1000, "step_panel_ms": median(panel),
            "input_ms": median(inputs) * 1000, "input_decode_ms": median(compute),
            "step_cpu_ms": median(step_cpu) * 1000, "input_cpu_ms": median(input_cpu) * 1000,
            "n_step": len(steps), "n_input": len(inputs)}


def _tree_memory(pid: int) -> tuple[float, float]:
    """(VmRSS, VmHWM) in MB of a process plus its descendants."""
    def status(p: int) -> dict[str, int]:
        out = {}
        try:
            for line in Path(f"/proc/{p}/status").read_text().splitlines():
                key, _, value = line.partition(":")
                if key in ("VmRSS", "VmHWM"):
                    out[key] = int(value.split()[0])
        except OSError:
            pass
        return out

    todo, rss, hwm = [pid], 0, 0
    while todo:
        p = todo.pop()
        s = status(p)
        rss, hwm = rss + s.get("VmRSS", 0), hwm + s.get("VmHWM", 0)
        todo += _children(p)
    return rss / 1024, hwm / 1024


def _children(pid: int) -> list[int]:
    kids = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            kids += [int(c) for c in (task / "children").read_text().split()]
        except OSError:
            pass
    return kids


def _tree_cpu(pid: int) -> float:
    """CPU seconds (user + system) used so far by a process and its descendants."""
    total, todo = 0.0, [pid]
    while todo:
        p = todo.pop()
        try:
            fields = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        except (OSError, IndexError, ValueError):
            pass
        todo += _children(p)
    return total


BARE_APP = """import plotly.graph_objects as go
import streamlit as st


def first() -> None:
    st.title("Bare")
    st.plotly_chart(go.Figure(go.Scatter(x=[1, 2, 3], y=[1, 3, 2])))


def second() -> None:
    st.write("second page")


st.navigation([st.Page(first, title="First"), st.Page(second, title="Second")]).run()
"""


@contextlib.contextmanager
def _serving(script: str, cwd: Path, env: dict, log: Path) -> Iterator[tuple[str, subprocess.Popen, float, float]]:
    """`streamlit run SCRIPT` on a free loopback port until the block ends: (url, process, start time,
    seconds until its health check answered)."""
    from browser_support import streamlit_command, free_port, _healthy
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    with open(log, "wb") as out:
        t0 = time.perf_counter()
        proc = subprocess.Popen(streamlit_command(port, script), cwd=cwd, env=env, stdout=out,
                                stderr=subprocess.STDOUT)
    try:
        while not _healthy(url):
            if proc.poll() is not None or time.perf_counter() - t0 > 120:
                raise RuntimeError(f"streamlit run {script} did not start:\n"
                                   + log.read_text(errors="replace")[-2000:])
            time.sleep(0.05)
        yield url, proc, t0, time.perf_counter() - t0
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()


def worker_coldstart(p: dict) -> dict:
    from browser_support import CHARTS, CHARTS_DRAWN, CHROMIUM, CHROMIUM_ARGS, IDLE
    from playwright.sync_api import sync_playwright

    folder = Path(p["models"])
    repeats = int(p.get("repeats", 3))
    names = sorted(x.name[: -len(".safetensors")] for x in folder.glob("*.safetensors"))
    # Rendered: the script has finished, there is a chart, every chart has drawn and no element is still
    # a grey placeholder (its renderer's JavaScript has not loaded yet).
    rendered = (f"() => !!document.querySelector('{IDLE}') "
                f"&& !!document.querySelector('{CHARTS}') && {CHARTS_DRAWN}")
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "EXPLORER_PRETRAINED": str(folder)}
    env.pop("OMP_NUM_THREADS", None)
    if p.get("server_threads"):  # diagnostics: force the server's OpenMP threads
        env["OMP_NUM_THREADS"] = str(p["server_threads"])
    log = Path(tempfile.mkdtemp(prefix="bench-streamlit-")) / "server.log"
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        try:
            def fresh_page():  # a new browser context each time: no cached scripts from an earlier visit
                context = browser.new_context(viewport={"width": 1600, "height": 3000})
                context.set_default_timeout(300_000)
                return context, context.new_page()

            bares, firsts = [], []
            for attempt in range(repeats):  # alternating, so both see the same machine; medians reported
                # Streamlit's own floor, in the same browser: a bare two-page app drawing one Plotly chart.
                bare_dir = Path(tempfile.mkdtemp(prefix="bench-bare-"))
                (bare_dir / "bare.py").write_text(BARE_APP)
                context, page = fresh_page()
                with _serving("bare.py", bare_dir, env, bare_dir / "server.log") as (url, _, t0, _):
                    page.goto(url + "/")
                    page.wait_for_function(rendered, polling=50, timeout=300_000)
                    bares.append(time.perf_counter() - t0)
                context.close()
                context, page = fresh_page()
                with _serving("app.py", ROOT, env, log) as (url, proc, t0, healthy):
                    page.goto(url + "/")
                    page.wait_for_function(rendered, polling=50, timeout=300_000)
                    firsts.append(time.perf_counter() - t0)
                    if attempt + 1 == repeats:  # the last server: memory with every shipped model loaded
                        server_cpu = _tree_cpu(proc.pid)
                        rss_first, _ = _tree_memory(proc.pid)
                        per_model = {}
                        for name in names:
                            t1 = time.perf_counter()
                            page.goto(f"{url}/?model={name}&nn=s1")  # its nearest-examples index too
                            page.wait_for_timeout(200)
                            page.wait_for_function(rendered, polling=50, timeout=300_000)
                            per_model[name] = round(time.perf_counter() - t1, 3)
                        rss, hwm = _tree_memory(proc.pid)
                        errors = page.locator('[data-testid="stException"]').count()
                context.close()
        finally:
            browser.close()
    first_render, bare = statistics.median(firsts), statistics.median(bares)
    return {"healthy_s": healthy, "first_render_s": first_render, "bare_first_render_s": bare,
            "first_render_runs_s": [round(x, 3) for x in firsts], "bare_runs_s": [round(x, 3) for x in bares],
            "server_cpu_s": server_cpu, "rss_after_first_mb": rss_first,
            "rss_all_models_mb": rss, "peak_rss_mb": hwm, "models": names, "open_model_s": per_model,
            "exceptions_on_page": errors}


WORKERS = {"neighbours": worker_neighbours, "train_ours": worker_train_ours, "train_ref": worker_train_ref, "throughput": worker_throughput,
           "ddp": worker_ddp, "precision": worker_precision,
           "trace": worker_trace, "app": worker_app, "coldstart": worker_coldstart}


def spawn(name: str, params: dict, timeout: float, env: dict | None = None) -> dict:
    """Run one worker in a child process and return its result (or {'error': ...})."""
    cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", name, "--params", json.dumps(params)]
    full_env = {**os.environ, **(env or {})}
    try:
        done = subprocess.run(cmd, cwd=ROOT, env=full_env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout:.0f} s"}
    for line in reversed(done.stdout.splitlines()):
        if line.startswith("RESULT "):
            return json.loads(line[len("RESULT "):])
    tail = (done.stderr or done.stdout).strip().splitlines()
    return {"error": f"exit {done.returncode}: {tail[-1] if tail else ''}", "stderr": (done.stderr or "")[-3000:]}


# --------------------------------------------------------------------------------------------------
# the run and the table
# --------------------------------------------------------------------------------------------------

def fmt_s(x: float) -> str:
    return "—" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.1f} s"


def reached_summary(runs: list[dict], key: str, budget: float) -> tuple[float, float, str]:
    """Median seconds and median CPU seconds (inf for runs that never got there) and a cell text."""
    ok = [r for r in runs if "error" not in r]
    if not ok:
        return math.inf, math.inf, "error: " + (runs[0].get("error", "?")[:60] if runs else "no runs")
    m = median([r[key] if r["reached"] else math.inf for r in ok])
    cpu = median([r["cpu"] if r["reached"] else math.inf for r in ok])
    hits = sum(r["reached"] for r in ok)
    ex = median([r["examples"] if r["reached"] else math.inf for r in ok])
    if math.isinf(m):
        return m, cpu, f"not reached in {budget:.0f} s ({hits}/{len(ok)} seeds reached)"
    return m, cpu, f"{m:.1f} s; CPU {cpu:.1f} s ({hits}/{len(ok)} seeds; {ex / 1000:.1f}k examples)"


def ratio_text(ref: float, ours: float, ref_budget: float | None = None) -> str:
    """How many times faster ours is (reference / ours); a lower bound when the reference never got there.

    Ratios are ours against the reference: above 1× means ours is faster (or, for throughput, higher)."""
    if ours is None or not math.isfinite(ours) or ours <= 0:
        return "—"
    if ref is None or math.isnan(ref):
        return "—"
    if math.isinf(ref):
        return f"> {ref_budget / ours:.1f}×" if ref_budget else "—"
    return f"{ref / ours:.1f}×"


PROCESS_COMMAND = ["-m", "explorer", "train", "--task", "reverse", "--min-len", "5", "--max-len", "15",
                   "--target-accuracy", "0.99"]


def process_section(rounds: int) -> dict:
    """The train command as a user runs it, in a fresh process each round, against importing torch alone."""
    import shutil
    walls, floors, trainer, steps = [], [], [], []
    folder = Path(tempfile.mkdtemp(prefix="process-bench-"))
    try:
        for r in range(rounds):
            started = time.perf_counter()
            subprocess.run([sys.executable, "-c", "import torch"], check=True)
            floors.append(time.perf_counter() - started)
            started = time.perf_counter()
            done = subprocess.run([sys.executable, *PROCESS_COMMAND, "--out", str(folder / f"r{r}.pt")],
                                  check=True, capture_output=True, text=True, cwd=ROOT)
            walls.append(time.perf_counter() - started)
            report = json.loads(done.stdout.strip().splitlines()[-1])
            trainer.append(report["seconds"])
            steps.append(report["steps"])
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return {"command": "python " + " ".join(PROCESS_COMMAND), "wall_s": walls, "import_torch_s": floors,
            "trainer_s": trainer, "steps": steps, "wall_median_s": median(walls),
            "import_torch_median_s": median(floors), "trainer_median_s": median(trainer)}


def run_all(args: argparse.Namespace) -> dict:
    quick = args.quick
    seeds = list(range(args.seeds if args.seeds else (1 if quick else 3)))
    sections = set(args.only or ["train", "long", "throughput", "ddp", "trace", "neighbours", "app", "coldstart"])
    import torch
    from explorer.training.recipes import auto_threads
    from explorer.training.distributed import processes_wanted
    threads = args.threads or auto_threads()  # decided once, so both sides and every run use the same
    from explorer.training.recipes import MODEL_DEFAULTS
    # ours, as `explorer train` decides it for the toy defaults (the reference: one)
    processes = processes_wanted(args.processes, hidden=MODEL_DEFAULTS["hidden"])
    base = {"threads": threads}
    budgets = {"ours_short": 60.0, "ref_short": 60.0 if quick else 150.0,
               "ours_long": 60.0 if quick else 120.0, "ref_long": 60.0 if quick else 180.0}
    env_threads = set_threads(threads)
    out: dict[str, Any] = {
        "command": "python benchmarks/run.py " + " ".join(sys.argv[1:]),
        "date": datetime.datetime.now().isoformat(timespec="seconds"),
        "machine": {"cpu_count": os.cpu_count(), "affinity": len(os.sched_getaffinity(0)),
                    "processor": _cpu_name(), "python": platform.python_version(), "torch": torch.__version__,
                    "torch_threads": env_threads, "processes": processes, "cuda": torch.cuda.is_available(),
                    "load_start": os.getloadavg()},
        "seeds": seeds, "budgets": budgets, "results": {},
    }
    res = out["results"]

    def log(msg: str) -> None:
        print(f"[{time.strftime('%H:%M:%S')} load {os.getloadavg()[0]:.1f}] {msg}", file=sys.stderr, flush=True)

    def race(key: str, lo: int, hi: int, ref_target: float) -> None:
        """Ours to 99% against the reference to `ref_target` on lengths lo–hi, seed by seed, one at a time;
        ours in `processes` processes and, when that is two, in one too (like for like with the reference)."""
        sides = {"ours": [], "reference": []} if processes == 1 else {"ours": [], "ours_one_process": [], "reference": []}
        for s in seeds:
            p = {**base, "min_len": lo, "max_len": hi, "seed": s}
            for side, runs in sides.items():
                target, budget = (ref_target, budgets[f"ref_{key}"]) if side == "reference" else \
                    (0.99, budgets[f"ours_{key}"])
                log(f"train {lo}–{hi} {side} seed {s}")
                worker, params = ("train_ref", p) if side == "reference" else \
                    ("train_ours", {**p, "processes": 1 if side == "ours_one_process" else processes})
                runs.append(spawn(worker, {**params, "target": target, "budget": budget}, budget * 3 + 120))
                log(f"  -> {runs[-1]}")
        res[f"train_{key}"] = sides

    if "train" in sections:
        race("short", 5, 15, 0.99)
    if "long" in sections:
        race("long", 20, 30, 0.95)
    if "throughput" in sections:
        log("throughput")
        res["throughput"] = spawn("throughput", {**base, "batches": 10 if quick else 20,
                                                 "rounds": 2 if quick else 5}, 900)
        log(f"  -> {res['throughput'].get('median', res['throughput'])}")
    if "ddp" in sections or ("throughput" in sections and processes > 1):
        log(f"ddp: {max(2, processes)} ranks against one process")
        res["ddp"] = spawn("ddp", {**base, "processes": max(2, processes), "batches": 10 if quick else 20,
                                   "rounds": 2 if quick else 5}, 900)
        log(f"  -> {res['ddp'].get('median', res['ddp'])}")
    if "process" in sections:
        log("process: the train command as a whole, against importing torch")
        res["process"] = process_section(2 if quick else 5)
        log(f"  -> {res['process']['wall_median_s']:.2f} s")
    if "precision" in sections:
        log("precision: float32 against bfloat16 at eng-fra's sizes")
        res["precision"] = spawn("precision", {**base, "batch_size": 128, "batches": 3 if quick else 6,
                                               "rounds": 2 if quick else 3}, 1800)
        log(f"  -> {res['precision'].get('median', res['precision'])}")
    folder, note = (None, None)
    if sections & {"trace", "neighbours", "app", "coldstart"}:
        folder, note = models_folder(args.models)
        out["models"] = note
    if "trace" in sections:
        log("trace")
        res["trace"] = spawn("trace", {**base, "models": str(folder), "reps": 30 if quick else 200}, 600)
        log(f"  -> {res['trace']}")
    if "neighbours" in sections:
        log("neighbours")
        res["neighbours"] = spawn("neighbours", {**base, "models": str(folder), "reps": 5 if quick else 30}, 600)
        log(f"  -> {res['neighbours']}")
    if "app" in sections:
        log("app (AppTest)")
        res["app"] = spawn("app", {"models": str(folder), "reps": 3 if quick else 6, "steps_per_input": 3},
                           900, env={"EXPLORER_PRETRAINED": str(folder)})
        log(f"  -> {res['app']}")
    if "coldstart" in sections:
        log("cold start (browser)")
        res["coldstart"] = spawn("coldstart", {"models": str(folder)}, 900)
        log(f"  -> {res['coldstart']}")
    out["machine"]["load_end"] = os.getloadavg()
    return out


def _cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "?"


def table(out: dict) -> str:
    """The results as a Markdown table: metric, target, ours, reference, ratios (wall and CPU time), pass."""
    res, budgets = out["results"], out["budgets"]
    rows: list[tuple[str, ...]] = []

    def verdict(ok: bool | None) -> str:
        return "—" if ok is None else ("pass" if ok else "FAIL")

    def both(wall_ok: bool, cpu_ok: bool) -> str:
        return f"wall {verdict(wall_ok)}, CPU {verdict(cpu_ok)}"

    processes = out["machine"].get("processes", 1)
    for key, label, target, limit in (("train_short", "Time to 99%, reverse 5–15", "≤ 8 s", 8),
                                      ("train_long", "Time to 99%, reverse 20–30 (reference: to 95%)", "≤ 60 s", 60)):
        if key not in res:
            continue
        r = res[key]
        budget_key = "short" if key == "train_short" else "long"
        ref, ref_cpu, ref_txt = reached_summary(r["reference"], "train_seconds", budgets[f"ref_{budget_key}"])
        for side in [k for k in ("ours", "ours_one_process") if k in r]:
            runs_with = 1 if side == "ours_one_process" else processes
            ours, ours_cpu, ours_txt = reached_summary(r[side], "wall", budgets[f"ours_{budget_key}"])
            cpu_txt = ratio_text(ref_cpu, ours_cpu)
            if math.isinf(ref_cpu) and math.isfinite(ours_cpu):
                spent = [x["cpu"] for x in r["reference"] if "error" not in x]
                cpu_txt = f"> {median(spent) / ours_cpu:.1f}×" if spent else "—"
            # CPU s / (threads × processes): the wall time on idle cores
            cores = max(1, out["machine"]["torch_threads"]) * runs_with
            where = "" if processes == 1 else (" (ours: 2 processes)" if runs_with == 2 else " (ours: 1 process)")
            rows.append((label + where, target, ours_txt, ref_txt, ratio_text(ref, ours, budgets[f"ref_{budget_key}"]),
                         cpu_txt, both(ours <= limit, ours_cpu / cores <= limit)))
            fresh = [x["fresh_exact"] for x in r[side] if "fresh_exact" in x and x["reached"]]
            if fresh:
                rows.append((f"… its exact match on 2,000 fresh samples the stop never saw{where}", "≥ 99%",
                             f"lowest {100 * min(fresh):.2f}%, median {100 * median(fresh):.2f}% ({len(fresh)} seeds)",
                             "", "", "", verdict(min(fresh) >= 0.99)))
    if "throughput" in res and "error" not in res["throughput"]:
        m, c = res["throughput"]["median"], res["throughput"]["cpu_median"]
        # per CPU-second is what one idle core does; T threads on an idle machine do at most T times that
        threads_used = max(1, res["throughput"]["threads"])
        ref, ref_c = m["reference_b32"], c["reference_b32"]
        for key in [k for k in m if k.startswith("ours")]:
            b, _, two = key.split("_b")[1].partition("_p")
            sizes = "the tutorial's sizes (GRU 128, embedding 128, additive attention)" \
                if key.startswith("ours-tutorial-sizes") else "our defaults"
            how = ", 2 processes" if two else ""
            rows.append((f"Training throughput, 5–15, batch {b}, {sizes}{how} (sequences/s)", "≥ 3,000",
                         f"{m[key]:,.0f}; per CPU-second {c[key]:,.0f}",
                         f"{ref:,.0f}; per CPU-second {ref_c:,.0f} (batch 32)", f"{m[key] / ref:.1f}×",
                         f"{c[key] / ref_c:.1f}×",
                         both(m[key] >= 3000, c[key] * threads_used * (2 if two else 1) >= 3000)))
    elif "throughput" in res:
        rows.append(("Training throughput", "≥ 3,000", res["throughput"]["error"][:80], "", "", "", "error"))
    if "precision" in res and "error" not in res["precision"]:
        m = res["precision"]["median"]
        rows.append(("Training throughput, eng-fra's model (GRU 512, 4,000 pieces), batch 128, 1 process, "
                     "bfloat16 mixed precision against float32 (pairs/s)", "—", f"{m['bf16']:,.0f}",
                     f"float32 {m['float32']:,.0f}", f"{m['bf16'] / m['float32']:.2f}×", "", "—"))
    elif "precision" in res:
        rows.append(("bfloat16 training", "—", res["precision"]["error"][:80], "", "", "", "error"))
    if "ddp" in res and "error" not in res["ddp"]:
        d, dc, n = res["ddp"]["median"], res["ddp"]["cpu_median"], res["ddp"]["processes"]
        for name, sizes in (("ours", "our defaults"), ("ours-tutorial-sizes", "the tutorial's sizes")):
            ranks, alone, unsynced = (d[f"{name}_b128_p{n}"], d[f"{name}_b128_p1"], d[f"{name}_b128_p{n}_no_sync"])
            rows.append((f"Training throughput, 5–15, batch 128, {sizes}, {n} processes (DDP, gloo) (sequences/s)",
                         "≥ 3,400" if name != "ours" else "", f"{ranks:,.0f}; per CPU-second {dc[f'{name}_b128_p{n}']:,.0f}",
                         f"one process {alone:,.0f}; {n} without gradient sync {unsynced:,.0f}",
                         f"{ranks / alone:.2f}× one process", f"sync costs {100 * (1 - ranks / unsynced):.0f}%",
                         verdict(ranks >= 3400) + " (wall)" if name != "ours" else ""))
    elif "ddp" in res:
        rows.append(("DDP throughput", "", res["ddp"]["error"][:80], "", "", "", "error"))
    if "trace" in res and "error" not in res["trace"]:
        t = res["trace"]
        rows.append((f"Trace of a {t['input_tokens']}-token input ({t['output_steps']} steps) vs greedy decode",
                     "≤ 10 ms, ≤ 1.5×", f"{t['trace_ms']:.2f} ms; CPU {t['trace_cpu_ms']:.2f} ms",
                     f"greedy {t['greedy_ms']:.2f} ms; CPU {t['greedy_cpu_ms']:.2f} ms",
                     f"{t['trace_ms'] / t['greedy_ms']:.2f}× greedy", f"{t['trace_cpu_ms'] / t['greedy_cpu_ms']:.2f}× greedy",
                     both(t["trace_ms"] <= 10 and t["trace_ms"] <= 1.5 * t["greedy_ms"],
                          t["trace_cpu_ms"] <= 10 and t["trace_cpu_ms"] <= 1.5 * t["greedy_cpu_ms"])))
    elif "trace" in res:
        rows.append(("Trace", "", res["trace"]["error"][:80], "", "", "", "error"))
    if "neighbours" in res and "error" not in res["neighbours"]:
        built = {k: v for k, v in res["neighbours"]["models"].items() if "build_s" in v}
        if built:
            slowest = max(built, key=lambda k: built[k]["build_s"])
            b = built[slowest]
            without = len(res["neighbours"]["models"]) - len(built)
            rows.append((f"Nearest-examples index, first build ({len(built)} models"
                         + (f"; {without} keep no example pairs" if without else "") + "; slowest shown)", "< 1 s",
                         f"{b['build_s']:.2f} s ({slowest}, {b['rows']:,} states, {b['mb']:.1f} MB); "
                         f"all {sum(v['mb'] for v in built.values()):.1f} MB",
                         f"search {max(v['search_ms'] for v in built.values()):.2f} ms (slowest model)", "", "",
                         verdict(b["build_s"] < 1)))
    elif "neighbours" in res:
        rows.append(("Nearest-examples index", "", res["neighbours"]["error"][:80], "", "", "", "error"))
    if "app" in res and "error" not in res["app"]:
        a = res["app"]
        rows.append(("App: change the decoder step (AppTest: full rerun)", "≤ 150 ms",
                     f"{a['step_ms']:.0f} ms; CPU {a['step_cpu_ms']:.0f} ms",
                     f"(step panel alone {a['step_panel_ms']:.0f} ms)", "", "",
                     both(a["step_ms"] <= 150, a["step_cpu_ms"] <= 150)))
        rows.append(("App: new input (AppTest rerun)", "≤ 300 ms", f"{a['input_ms']:.0f} ms; CPU {a['input_cpu_ms']:.0f} ms",
                     f"(decoding alone {a['input_decode_ms']:.0f} ms)", "", "",
                     both(a["input_ms"] <= 300, a["input_cpu_ms"] <= 300)))
    elif "app" in res:
        rows.append(("App (AppTest)", "", res["app"]["error"][:80], "", "", "", "error"))
    if "process" in res:
        pr = res["process"]
        rows.append(("Whole process: `" + pr["command"] + "`", "≤ 8 s",
                     f"{pr['wall_median_s']:.1f} s (trainer's clock {pr['trainer_median_s']:.1f} s)",
                     f"import torch alone {pr['import_torch_median_s']:.1f} s", "", "",
                     verdict(pr["wall_median_s"] <= 8) + " (wall)"))
    if "coldstart" in res and "error" not in res["coldstart"]:
        c = res["coldstart"]
        runs = c.get("first_render_runs_s", [c["first_render_s"]])
        median_of = f" (median of {len(runs)}: {', '.join(f'{x:.1f}' for x in runs)})" if len(runs) > 1 else ""
        rows.append(("Cold start to first full render (browser)", "≤ 6 s",
                     f"{c['first_render_s']:.1f} s{median_of}; server CPU {c['server_cpu_s']:.1f} s",
                     f"bare two-page Streamlit app {c['bare_first_render_s']:.1f} s" if "bare_first_render_s" in c
                     else f"(server healthy at {c['healthy_s']:.1f} s)",
                     f"{c['first_render_s'] / c['bare_first_render_s']:.2f}× bare" if "bare_first_render_s" in c else "",
                     "", verdict(c["first_render_s"] <= 6) + " (wall)"))
        rows.append((f"Server memory, all {len(c['models'])} models loaded (RSS; peak)", "≤ 600 MB",
                     f"{c['rss_all_models_mb']:.0f} MB; peak {c['peak_rss_mb']:.0f} MB",
                     f"after first render {c['rss_after_first_mb']:.0f} MB", "", "",
                     verdict(c["peak_rss_mb"] <= 600)))
    elif "coldstart" in res:
        rows.append(("Cold start", "", res["coldstart"]["error"][:80], "", "", "", "error"))

    head = ("metric", "target", "ours", "reference", "ratio (wall)", "ratio (CPU time)", "pass")
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|"]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


def notes(out: dict) -> str:
    m, res = out["machine"], out["results"]
    lines = [f"- command: `{out['command']}`  ({out['date']})",
             f"- machine: {m['processor']}, {m['cpu_count']} CPUs ({m['affinity']} usable), torch {m['torch']}, "
             f"{m['torch_threads']} torch threads (both sides), ours in {m.get('processes', 1)} training "
             f"process(es) (the reference: 1), CUDA {'yes' if m['cuda'] else 'no'}",
             f"- load average at start {', '.join(f'{x:.1f}' for x in m['load_start'])}; "
             f"at end {', '.join(f'{x:.1f}' for x in m.get('load_end', ()))} (shared machine: ratios count)",
             f"- seeds {out['seeds']}; budgets (training seconds): {out['budgets']}",
             "- CPU: CPU seconds (user + system) of the process, with its other ranks when ours trains in several. "
             "On a busy machine wall time is mostly waiting for a core; CPU time divided by the threads (times "
             "the processes) estimates the wall time on idle cores (a little high: OpenMP threads spin while "
             "they wait, and two processes slow each other), and the 'CPU' verdict judges that estimate. "
             "Ratios are reference / ours for times and ours / reference for throughput: above 1× ours is better"]
    for key in ("train_short", "train_long"):
        if key in res:
            for side in [k for k in ("ours", "ours_one_process") if k in res[key]]:
                ok = [r for r in res[key][side] if "error" not in r]
                if ok:
                    lines.append(f"- {key} {side.replace('_', ' ')} ({ok[0].get('processes', 1)} process(es)) per seed "
                                 "(wall s / CPU s / examples / stop / fresh exact): " + "; ".join(
                                     f"{r['wall']:.1f}/{r['cpu']:.1f}/{r['examples']}/{r['reason']}/"
                                     f"{r.get('fresh_exact', float('nan')):.4f}" for r in ok)
                                 + f"; import {ok[0]['import_seconds']:.1f} s not included; config {ok[0]['train_config']}")
            refs = [r for r in res[key]["reference"] if "error" not in r]
            if refs:
                lines.append(f"- {key} reference per seed (train s / CPU s / examples / reached): " + "; ".join(
                    f"{r['train_seconds']:.1f}/{r['cpu']:.1f}/{r['examples']}/{r['reached']}" for r in refs))
    if "ddp" in res and "rates" in res["ddp"]:
        lines.append("- DDP rounds, seq/s: " + "; ".join(f"{k}: {', '.join(f'{v:.0f}' for v in vals)}"
                                                       for k, vals in res["ddp"]["rates"].items()))
    if "throughput" in res and "rates" in res["throughput"]:
        tp = res["throughput"]
        lines.append("- throughput rounds, seq/s (seq per CPU-second): " + "; ".join(
            f"{k}: {', '.join(f'{v:.0f}' for v in vals)} ({', '.join(f'{v:.0f}' for v in tp['cpu_rates'][k])})"
            for k, vals in tp["rates"].items()))
    if "trace" in res and "model" in res["trace"]:
        t = res["trace"]
        lines.append(f"- trace model: {t['model']}; CPU time: trace {t['trace_cpu_ms']:.2f} ms, "
                     f"greedy {t['greedy_cpu_ms']:.2f} ms; median of {t['reps']} interleaved repetitions")
    if "models" in out:
        lines.append(f"- app models: {out['models']}")
    if "app" in res and "first_run_s" in res["app"]:
        a = res["app"]
        lines.append(f"- AppTest first run {a['first_run_s']:.1f} s; {a['n_step']} step changes, {a['n_input']} inputs; "
                     "under AppTest a fragment's widget reruns the whole script (a browser reruns only the step panel)")
    if "coldstart" in res and "open_model_s" in res["coldstart"]:
        lines.append(f"- opening each model in the browser (s): {res['coldstart']['open_model_s']}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="one seed, shorter budgets, fewer repetitions")
    ap.add_argument("--seeds", type=int, default=None, help="seeds for the training races (default 3, quick 1)")
    ap.add_argument("--json", default=None, help="also write every measurement to this JSON file")
    ap.add_argument("--threads", type=int, default=None,
                    help="torch threads for both sides (default: what `explorer train` picks at the start)")
    ap.add_argument("--models", default=None,
                    help="folder of checkpoints for the trace and app sections (default: pretrained/)")
    ap.add_argument("--processes", type=int, default=None,
                    help="training processes for ours (default: what `explorer train` picks; with 2, ours also "
                         "races in 1, like the reference)")
    ap.add_argument("--only", nargs="+", choices=["train", "long", "throughput", "ddp", "precision", "process", "trace", "neighbours", "app",
                                                 "coldstart"])
    ap.add_argument("--table", metavar="JSON", help="print the table of an earlier run's --json file and exit")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    ap.add_argument("--params", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:
        result = WORKERS[args.worker](json.loads(args.params))
        print("RESULT " + json.dumps(result), flush=True)
        return 0
    if args.table:
        out = json.loads(Path(args.table).read_text())
        print(table(out) + "\n\n" + notes(out))
        return 0
    out = run_all(args)
    text = table(out) + "\n\n" + notes(out)
    print(text)
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
