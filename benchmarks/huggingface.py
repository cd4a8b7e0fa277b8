"""A Hugging Face Trainer with its defaults against the same Trainer with `trainpilot.huggingface.choose()`'s
arguments, side by side in one run. One table, then the history those runs left.

    flock -x /tmp/tp-cpu.lock python benchmarks/huggingface.py           # alone: it times
    python benchmarks/huggingface.py --quick                              # smaller sets, fewer runs
    flock -x /tmp/tp-cpu.lock python benchmarks/huggingface.py --readme   # the README's use, a Trainer's own batch

--readme times the README's use, where the Trainer has a batch size of its own that choose() is not told:
`TrainingArguments(..., per_device_train_batch_size=64, **choose(model, train_ds, epochs=2))`, a ViT built
from its ViTConfig (32x32 images, patches of 4; nothing downloaded) on 1,024 random 3x32x32 images, 2
epochs, with TrainPilotCallback, each run (`--runs`, default 3) in a fresh TRAINPILOT_HOME (the cold
prediction). Printed per run: the callback's prediction at training's start, the actual training time
(the callback's clock, and an epoch timer beside it), the error (target: within 30 %), the epoch-end
rethink, and the cores other work kept busy meanwhile (the lock keeps out only those who take it).
Then the same Trainer on every thread count this machine has, measured, so the rethink's "stays" or
"would move" is set against what a real run of the other plan took.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "core"))

from torch.utils.data import Dataset  # noqa: E402 - after the path to the core

VOCAB, LENGTH = 1000, 64


def token_sets(samples: int, causal: bool):  # type: ignore[no-untyped-def]
    import torch
    from torch.utils.data import Dataset

    class Tokens(Dataset):
        def __init__(self) -> None:
            g = torch.Generator().manual_seed(0)
            self.ids = torch.randint(3, VOCAB, (samples, LENGTH), generator=g)
            self.labels = torch.randint(0, 2, (samples,), generator=g)
            where = torch.randint(1, LENGTH, (samples,), generator=g)
            marked = self.labels.bool()
            self.ids[marked, where[marked]] = 1

        def __len__(self) -> int:
            return samples

        def __getitem__(self, i: int) -> dict:
            if causal:
                return {"input_ids": self.ids[i], "labels": self.ids[i]}
            return {"input_ids": self.ids[i], "labels": self.labels[i]}

    return Tokens()


def make_model(name: str):  # type: ignore[no-untyped-def]
    import torch
    from transformers import BertConfig, BertForSequenceClassification, GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    if name == "bert":
        return BertForSequenceClassification(
            BertConfig(
                vocab_size=VOCAB,
                hidden_size=128,
                num_hidden_layers=2,
                num_attention_heads=4,
                intermediate_size=512,
                max_position_embeddings=LENGTH,
            )
        )
    return GPT2LMHeadModel(
        GPT2Config(
            vocab_size=VOCAB, n_positions=LENGTH, n_embd=128, n_layer=2, n_head=4, bos_token_id=0, eos_token_id=0
        )
    )


def epoch_timer():  # type: ignore[no-untyped-def]
    from transformers import TrainerCallback

    class EpochTimer(TrainerCallback):
        def __init__(self) -> None:
            self.epochs: list[float] = []
            self._since = 0.0

        def on_epoch_begin(self, args, state, control, **kwargs):  # type: ignore[no-untyped-def]
            self._since = time.perf_counter()

        def on_epoch_end(self, args, state, control, **kwargs):  # type: ignore[no-untyped-def]
            self.epochs.append(time.perf_counter() - self._since)

    return EpochTimer()


def arguments(out: str, epochs: int, decided: dict | None = None):  # type: ignore[no-untyped-def]
    from transformers import TrainingArguments

    return TrainingArguments(
        output_dir=out,
        num_train_epochs=epochs,
        save_strategy="no",
        report_to="none",
        disable_tqdm=True,
        logging_strategy="no",
        **(decided or {}),
    )


def train_once(name: str, data, args, threads: int, choice):  # type: ignore[no-untyped-def]
    import torch
    from transformers import Trainer

    from trainpilot.huggingface import TrainPilotCallback

    torch.set_num_threads(threads)
    timer, recorder = epoch_timer(), TrainPilotCallback(choice=choice)
    from transformers import PrinterCallback

    trainer = Trainer(model=make_model(name), args=args, train_dataset=data, callbacks=[timer, recorder])
    trainer.remove_callback(PrinterCallback)  # its end-of-training dict: the table says it
    trainer.train()
    return timer.epochs, recorder.result


def measure(name: str, samples: int, epochs: int, pairs: int, out: str) -> dict:
    import torch

    from trainpilot.huggingface import choose, last_choice

    data = token_sets(samples, causal=name == "gpt2")
    default_threads = torch.get_num_threads()
    model = make_model(name)
    started = time.perf_counter()
    decided = choose(model, data, args=arguments(out, epochs), epochs=epochs)
    choose_s = time.perf_counter() - started
    choice = last_choice(model)
    assert choice is not None
    chosen_threads = choice.threads or default_threads
    times: dict[str, list[float]] = {"D": [], "C": []}
    results: dict[str, list[dict]] = {"D": [], "C": []}
    order = "".join("DC" if i % 2 == 0 else "CD" for i in range(pairs))
    for side in order:
        args = arguments(out, epochs, decided if side == "C" else None)
        threads = chosen_threads if side == "C" else default_threads
        epoch_s, result = train_once(name, data, args, threads, choice)
        times[side].extend(epoch_s)
        results[side].append(result or {})
        print(f"  {name} {side}: " + ", ".join(f"{s:.3f}" for s in epoch_s) + " s/epoch", flush=True)
    torch.set_num_threads(default_threads)
    d, c = statistics.median(times["D"]), statistics.median(times["C"])
    predicted_epoch = choice.predicted_s / epochs if choice.predicted_s else None
    return {
        "model": name,
        "samples": samples,
        "plan": choice.plan.short_label,
        "decided": decided,
        "D": d,
        "C": c,
        "ratio": d / c,
        "predicted": predicted_epoch,
        "error": predicted_epoch / c - 1 if predicted_epoch else None,
        "choose_s": choose_s,
        "recorded": results,
    }


def vit_model():  # type: ignore[no-untyped-def]
    import torch
    from transformers import ViTConfig, ViTForImageClassification

    torch.manual_seed(0)
    config = ViTConfig(
        image_size=32,
        patch_size=4,
        num_channels=3,
        hidden_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=128,
        num_labels=10,
    )
    return ViTForImageClassification(config)


class Images(Dataset):
    """Random 3x32x32 images and labels as a map-style data set, defined at module level as a
    user's is, so DataLoader workers can pickle it and the agent weighs its worker plans."""

    def __init__(self, samples: int) -> None:
        import torch

        g = torch.Generator().manual_seed(0)
        self.x = torch.randn(samples, 3, 32, 32, generator=g)
        self.y = torch.randint(0, 10, (samples,), generator=g)

    def __len__(self) -> int:
        return len(self.y)

    def __getitem__(self, i: int) -> dict:
        return {"pixel_values": self.x[i], "labels": self.y[i]}


def image_set(samples: int) -> Images:
    return Images(samples)


def vit_trainer(model, data, out: str, decided: dict, callbacks: list):  # type: ignore[no-untyped-def]
    from transformers import PrinterCallback, Trainer, TrainingArguments

    args = TrainingArguments(
        output_dir=out,
        num_train_epochs=2,
        per_device_train_batch_size=64,  # the Trainer's own batch, which choose() is not told
        save_strategy="no",
        report_to="none",
        disable_tqdm=True,
        logging_strategy="no",
        **decided,
    )
    trainer = Trainer(model=model, args=args, train_dataset=data, callbacks=callbacks)
    trainer.remove_callback(PrinterCallback)
    return trainer


def readme_run(index: int, samples: int, out: str) -> dict:
    """One cold run of the README's use in a fresh TRAINPILOT_HOME."""
    import torch

    from trainpilot.huggingface import TrainPilotCallback, choose

    threads_before = torch.get_num_threads()
    os.environ["TRAINPILOT_HOME"] = tempfile.mkdtemp(prefix=f"tp-hf-readme-{index}-")
    model, data = vit_model(), image_set(samples)
    decided = choose(model, data, epochs=2)  # as the README calls it: no args=, so it profiles batch 8
    timer, callback = epoch_timer(), TrainPilotCallback()
    trainer = vit_trainer(model, data, out, decided, [timer, callback])
    from trainpilot.machine.contention import ExternalCpuMeter

    started = time.perf_counter()
    with ExternalCpuMeter() as others:  # what the rest of the machine kept busy meanwhile
        trainer.train()
    train_s = time.perf_counter() - started
    [start] = [e for e in trainer.state.log_history if "trainpilot_trace" in e]
    result = callback.result or {}
    row = {
        "home": os.environ["TRAINPILOT_HOME"],
        "plan": result.get("plan"),
        "threads": torch.get_num_threads(),
        "batch": start.get("trainpilot_batch_size"),
        "steps": result.get("steps"),
        "predicted": result.get("predicted_s"),
        "actual": result.get("actual_s"),
        "epochs_s": sum(timer.epochs),
        "train_s": train_s,
        "others_cores": others.result.cores,
        "rethinks": list(callback.rethinks),
        "moves": [e["trainpilot_moves"] for e in trainer.state.log_history if "trainpilot_moves" in e],
        "trace": start["trainpilot_trace"],
        "notes": list(callback.notes),
    }
    torch.set_num_threads(threads_before)
    return row


def measured_at(threads: int, samples: int, out: str) -> float:
    """The same Trainer (the README's, batch 64, 2 epochs, fp32, no loader workers) on `threads`
    threads: its epochs' wall time, measured."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    timer = epoch_timer()
    decided = {"use_cpu": True, "dataloader_num_workers": 0}
    vit_trainer(vit_model(), image_set(samples), out, decided, [timer]).train()
    torch.set_num_threads(before)
    return sum(timer.epochs)


def readme_case(runs: int, samples: int) -> None:
    import torch

    print(
        f"README use: ViT (32x32, patches of 4, hidden 64, 2 layers) on {samples} images, Trainer batch 64,"
        f" 2 epochs, choose(model, train_ds, epochs=2) without args; {runs} cold run(s)\n",
        flush=True,
    )
    rows = []
    with tempfile.TemporaryDirectory() as out:
        for index in range(runs):
            rows.append(readme_run(index, samples, out))
            r = rows[-1]
            error = r["predicted"] / r["actual"] - 1 if r["predicted"] and r["actual"] else None
            r["error"] = error
            print(
                f"run {index + 1}: {r['plan']}, batch {r['batch']}, {r['steps']} steps:"
                f" predicted {r['predicted']:.3f} s, actual {r['actual']:.3f} s (epoch timer {r['epochs_s']:.3f} s),"
                f" error {error:+.0%}; train() {r['train_s']:.2f} s; other work meanwhile"
                f" {r['others_cores']:.2f} cores",
                flush=True,
            )
            for text, moves in zip(r["rethinks"], r["moves"], strict=False):
                print(f"  rethink ({'moves' if moves else 'stays'}): {text}")
            for note in r["notes"]:
                print(f"  note: {note}")
        default_threads = torch.get_num_threads()
        others = {t: measured_at(t, samples, out) for t in range(1, default_threads + 1)}
    print("\nthe opening trace of the last run, as the log history holds it:")
    for line in rows[-1]["trace"]:
        print(f"  {line}")
    print("\nthe same Trainer measured on each thread count (epochs' wall time):")
    for threads, seconds in others.items():
        print(f"  cpu×{threads}: {seconds:.3f} s")
    errors = [r["error"] for r in rows if r["error"] is not None]
    within = bool(errors) and max(abs(e) for e in errors) <= 0.30
    print(
        f"\nprediction within 30 % of actual: {'met' if within else 'MISSED'}"
        f" (errors {', '.join(f'{e:+.0%}' for e in errors)})"
    )
    best = min(others, key=lambda t: others[t])
    moved = [r for r in rows if any(r["moves"])]
    print(
        f"rethinks that would move: {len(moved)} of {runs}; fastest measured: cpu×{best}"
        f" ({others[best]:.3f} s); the runs trained on {', '.join(sorted({str(r['plan']) for r in rows}))}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="smaller sets, one pair")
    parser.add_argument("--pairs", type=int, default=None, help="D/C runs of each side (default 3, quick 1)")
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--readme", action="store_true", help="only the README's use: a Trainer with its own batch")
    parser.add_argument("--runs", type=int, default=3, help="--readme: cold runs, each in a fresh TRAINPILOT_HOME")
    opts = parser.parse_args()
    if opts.readme:
        from transformers.utils import logging

        logging.set_verbosity_error()
        readme_case(opts.runs, 256 if opts.quick else 1024)
        return
    pairs = opts.pairs or (1 if opts.quick else 3)
    sizes = {"bert": 512, "gpt2": 256} if opts.quick else {"bert": 2048, "gpt2": 1024}

    home = tempfile.mkdtemp(prefix="tp-hf-bench-")
    os.environ["TRAINPILOT_HOME"] = home
    print(f"TRAINPILOT_HOME={home}", flush=True)
    from transformers.utils import logging

    logging.set_verbosity_error()
    import torch
    import transformers

    print(
        f"torch {torch.__version__}, transformers {transformers.__version__}, {os.cpu_count()} CPUs,"
        f" torch threads by default {torch.get_num_threads()}",
        flush=True,
    )
    started = time.perf_counter()
    rows = []
    with tempfile.TemporaryDirectory() as out:
        for name, samples in sizes.items():
            rows.append(measure(name, samples, opts.epochs, pairs, out))

    print()
    header = (
        f"{'model':<6} {'samples':>7} {'chosen plan':<12} {'D s/epoch':>10} {'C s/epoch':>10} {'D/C':>6}"
        f" {'pred s/epoch':>12} {'cold error':>10} {'choose()':>9}"
    )
    print(header)
    print("-" * len(header))
    for r in rows:
        predicted = f"{r['predicted']:.3f}" if r["predicted"] else "-"
        error = f"{r['error']:+.0%}" if r["error"] is not None else "-"
        print(
            f"{r['model']:<6} {r['samples']:>7} {r['plan']:<12} {r['D']:>10.3f} {r['C']:>10.3f} {r['ratio']:>5.2f}x"
            f" {predicted:>12} {error:>10} {r['choose_s']:>8.1f}s"
        )
    print()
    for r in rows:
        print(f"{r['model']}: choose() returned {r['decided']}")
    worst = min(r["ratio"] for r in rows)
    errors = [abs(r["error"]) for r in rows if r["error"] is not None]
    print(f"D/C never below 0.97x: {'met' if worst >= 0.97 else 'MISSED'} (lowest {worst:.2f}x)")
    if errors:
        verdict = "met" if max(errors) <= 0.30 else "MISSED"
        print(f"cold prediction error <= 30 %: {verdict} (largest {max(errors):.0%})")

    # one TrainPilot run of the same BERT, so the history shows the Trainer runs beside it
    import trainpilot

    job = trainpilot.Job(
        lambda: make_model("bert"), token_sets(sizes["bert"], causal=False), batch_size=8, name="bert as a Job"
    )
    fit = trainpilot.fit(job, epochs=1)
    print(f"\ntrainpilot.fit(Job(bert)): {fit.status}, predicted {fit.predicted_s:.2f} s, actual {fit.actual_s:.2f} s")
    print(f"benchmark wall time {time.perf_counter() - started:.0f} s\n")
    print(f"$ TRAINPILOT_HOME={home} trainpilot headless history", flush=True)
    command = shutil.which("trainpilot", path=str(Path(sys.executable).parent)) or "trainpilot"
    listing = subprocess.run(
        [command, "headless", "history"],
        env={**os.environ, "COLUMNS": "160"},
        capture_output=True,
        text=True,
        check=False,
    )
    print(listing.stdout or listing.stderr)


if __name__ == "__main__":
    main()
