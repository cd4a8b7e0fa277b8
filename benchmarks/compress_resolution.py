"""How finely can one run tell two pruned configurations apart? The dense model trained as
benchmarks/compress.py trains it, then fixed per-layer channel counts each given the deployment
fine-tune (several seeds) and scored on the validation split (what the deployment controller
chooses by) and on the test split (what the benchmark reports).

    pip install scikit-learn
    python benchmarks/compress_resolution.py                                  # small_cnn on digits, five configurations
    python benchmarks/compress_resolution.py --dataset demo --kept 8/14 8/16 7/15

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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="small_cnn", choices=("small_cnn", "wide_cnn"))
    parser.add_argument("--dataset", default="digits", choices=("digits", "demo"))
    parser.add_argument("--demo-samples", type=int, default=None, help="size of the generated demo set (default: compress.py's full run)")
    parser.add_argument("--kept", nargs="+", default=["8/11", "7/15", "8/16", "10/16", "12/16"],
                        help="channels kept per prunable layer, e.g. 8/16 (one number per layer)")
    parser.add_argument("--seeds", type=int, default=3, help="fine-tune seeds per configuration")
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
    train, val, test = (tensors(s) for s in split_three(data, 0))
    shape, batch, threads = data.sample_shape, 64, args.threads
    torch.manual_seed(0)
    dense = build_model(args.model, shape, data.num_classes)
    layers = check_prunable(dense, shape)
    full = {layer.name: layer.out_channels for layer in layers.prunable}
    names, channels = list(full), list(full.values())
    train_dense(dense, train, epochs=FULL["dense_epochs"], batch=batch, seed=0, threads=threads)
    dense_test = accuracy(dense, test, threads=threads)
    print(f"{args.model} / {args.dataset}: dense {dense_test:.1%} on {len(test)} test samples (1 sample = {100 / len(test):.2f} pt),"
          f" {len(val)} validation; prunable layers {'/'.join(map(str, channels))} channels; {args.seeds} fine-tune seeds each")
    print(f"{'kept':<10} {'test drop (pt), per seed':<26} {'val acc':<22} {'val loss':<24}")
    for kept_text in args.kept:
        kept = [int(v) for v in kept_text.split("/")]
        if len(kept) != len(names) or not all(0 < k <= c for k, c in zip(kept, channels)):
            parser.error(f"--kept {kept_text}: give one count per prunable layer, each 1..{'/'.join(map(str, channels))}")
        drops, accs, losses = [], [], []
        for seed in range(args.seeds):
            pruned = prune(dense, layers, sparsity_for(dict(zip(names, kept)), full), shape)
            pruned = deployment_fine_tune(pruned, train, epochs=FULL["deploy_epochs"], batch=batch, seed=seed, threads=threads, teacher=dense)
            drops.append((dense_test - accuracy(pruned.model, test, threads=threads)) * 100.0)
            accs.append(accuracy(pruned.model, val, threads=threads))
            losses.append(mean_loss(pruned.model, val, threads=threads))
        print(f"{kept_text:<10} {' '.join(f'{d:+.2f}' for d in drops):<26} {' '.join(f'{a:.3f}' for a in accs):<22} {' '.join(f'{v:.4f}' for v in losses):<24}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
