"""How finely can one run tell two pruned configurations apart? The dense model trained as
benchmarks/compress.py trains it, then fixed per-layer channel counts each given the deployment
fine-tune (several seeds) and scored on the validation split (what the deployment controller
chooses by) and on the test split (what the benchmark reports).

    pip install scikit-learn
    python benchmarks/compress_resolution.py                                  # small_cnn on digits, five configurations
    python benchmarks/compress_resolution.py --dataset demo --kept 8/14 8/16 7/15
    python benchmarks/compress_resolution.py --splits --seeds 6 --kept 8/16 12/16 12/12   # each seed its own split

Where the configurations' test drops differ by a sample or two and the validation ordering is not
the test ordering, which configuration "loses less" is decided by the test split's size, not by
the allocation.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "core"))
sys.path.insert(0, str(ROOT / "benchmarks"))


def kept_counts(parser: argparse.ArgumentParser, text: str, channels: list[int]) -> list[int]:
    """`text` like 8/16 as one kept count per prunable layer of `channels`, or a parser error."""
    kept = [int(v) for v in text.split("/")] if all(v.isdigit() for v in text.split("/")) else []
    if len(kept) != len(channels) or not all(0 < k <= c for k, c in zip(kept, channels)):
        parser.error(f"--kept {text}: give one count per prunable layer, each 1..{'/'.join(map(str, channels))}")
    return kept


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="small_cnn", choices=("small_cnn", "wide_cnn"))
    parser.add_argument("--dataset", default="digits", choices=("digits", "demo"))
    parser.add_argument("--demo-samples", type=int, default=None, help="size of the generated demo set (default: compress.py's full run)")
    parser.add_argument("--kept", nargs="+", default=["8/11", "7/15", "8/16", "10/16", "12/16"],
                        help="channels kept per prunable layer, e.g. 8/16 (one number per layer)")
    parser.add_argument("--seeds", type=int, default=3, help="fine-tune seeds per configuration")
    parser.add_argument("--splits", action="store_true",
                        help="each seed also draws its own train/validation/test split and trains its own dense model"
                             " (as compress.py --seeds does): the test split's luck averages out, not only the fine-tune's")
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()

    import torch

    from compress import DEMO_SAMPLES, FULL, digits  # the benchmark's own data and budgets
    from trainpilot.compress.deploy import deployment_fine_tune
    from trainpilot.compress.finetune import accuracy, mean_loss, tensors
    from trainpilot.compress.grow import sparsity_for
    from trainpilot.compress.job import split_three, train_dense
    from trainpilot.compress.prune import check_prunable, prune
    from trainpilot.data import demo_dataset
    from trainpilot.workload import build_model

    data = digits() if args.dataset == "digits" else demo_dataset(args.demo_samples or DEMO_SAMPLES["full"])
    shape, batch, threads = data.sample_shape, 64, args.threads

    def dense_for(split_seed: int) -> tuple:
        train, val, test = (tensors(s) for s in split_three(data, split_seed))
        torch.manual_seed(split_seed)
        dense = build_model(args.model, shape, data.num_classes)
        layers = check_prunable(dense, shape)
        train_dense(dense, train, epochs=FULL["dense_epochs"], batch=batch, seed=split_seed, threads=threads)
        return train, val, test, dense, layers, accuracy(dense, test, threads=threads)

    # the counts are checked against the model's layers before any training
    full = {layer.name: layer.out_channels for layer in check_prunable(build_model(args.model, shape, data.num_classes), shape).prunable}
    names, channels = list(full), list(full.values())
    kept_of = {text: kept_counts(parser, text, channels) for text in args.kept}
    train, val, test, dense, layers, dense_test = dense_for(0)
    what = "seeds, each its own split and dense model" if args.splits else "fine-tune seeds each"
    print(f"{args.model} / {args.dataset}: dense {dense_test:.1%} on {len(test)} test samples (1 sample = {100 / len(test):.2f} pt),"
          f" {len(val)} validation; prunable layers {'/'.join(map(str, channels))} channels; {args.seeds} {what}")
    scores: dict[str, list[tuple[float, float, float]]] = {k: [] for k in kept_of}  # (test drop, val acc, val loss) per seed
    for seed in range(args.seeds):
        if args.splits and seed > 0:
            train, val, test, dense, layers, dense_test = dense_for(seed)
        for kept_text, kept in kept_of.items():
            pruned = prune(dense, layers, sparsity_for(dict(zip(names, kept)), full), shape)
            pruned = deployment_fine_tune(pruned, train, epochs=FULL["deploy_epochs"], batch=batch, seed=seed, threads=threads, teacher=dense)
            scores[kept_text].append(((dense_test - accuracy(pruned.model, test, threads=threads)) * 100.0,
                                      accuracy(pruned.model, val, threads=threads), mean_loss(pruned.model, val, threads=threads)))
    print(f"{'kept':<10} {'mean drop':<10} {'test drop (pt), per seed':<36} {'val acc, per seed':<36} {'val loss, per seed':<48}")
    for kept_text, rows in scores.items():
        drops = [r[0] for r in rows]
        print(f"{kept_text:<10} {sum(drops) / len(drops):<+10.2f} {' '.join(f'{d:+.2f}' for d in drops):<36}"
              f" {' '.join(f'{r[1]:.3f}' for r in rows):<36} {' '.join(f'{r[2]:.4f}' for r in rows):<48}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
