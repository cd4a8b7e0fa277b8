"""A Hugging Face Trainer with its defaults against the same Trainer with `trainpilot.huggingface.choose()`'s
arguments, side by side in one run. One table, then the history those runs left.

    flock -x /tmp/tp-cpu.lock python benchmarks/huggingface.py           # alone: it times
    python benchmarks/huggingface.py --quick                              # smaller sets, fewer runs

Two models built from their configs (nothing is downloaded):

  bert   BertForSequenceClassification, an encoder classifier on token sequences (their label: whether a
         marker token occurs)
  gpt2   GPT2LMHeadModel, a causal LM on token ids (labels = input_ids, shifted inside the model)

In a fresh TRAINPILOT_HOME (printed; calibrated on first sight, as a user's first run is), for each model:

  choose   `choose(model, train_set, args=defaults)`: the cold decision, and its prediction per epoch
  default  `TrainingArguments` as a user writes them (output_dir, and no checkpoints or reporting for
           either side): availability picks the device, all threads, num_workers=0, fp32
  chosen   the same arguments with choose()'s fields, and torch's threads as choose() set them

Default (D) and chosen (C) runs alternate D C C D D C ..., `--pairs` of each, `--epochs` epochs each,
every one with TrainPilotCallback (recorded in the history against the cold decision) and an epoch
timer. A side's time per epoch is the median of its epochs (each epoch's wall time, as the Trainer
runs it). Printed: D and C per epoch, D/C (target: never below 0.97x), and the cold prediction's
error against C's measured epoch (target: within 30 %). Then one plain `trainpilot.fit` of the BERT
as a Job, so the history shows the Trainer runs beside a TrainPilot run, and `trainpilot headless history`.
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="smaller sets, one pair")
    parser.add_argument("--pairs", type=int, default=None, help="D/C runs of each side (default 3, quick 1)")
    parser.add_argument("--epochs", type=int, default=2)
    opts = parser.parse_args()
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
