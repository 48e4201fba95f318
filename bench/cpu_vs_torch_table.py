"""The table of bench/cpu_vs_torch.sh from its JSON lines ({"row", "who", "value", ...} each): per row the
median and range of every side, the ratio of the medians against issue 26's goal, and the ceilings.

    /usr/bin/python3 bench/cpu_vs_torch_table.py RESULTS.jsonl
"""
import json
import statistics
import sys

# The MLP's training step: forward 1.07, weight gradients 1.07, input gradients of layers 2 and 3 0.27 MFLOP
# per sample (layer 1's input gradient is never computed).
MLP_FLOP_PER_SAMPLE = 2.41e6

# Issue 26's goals: Nimbus / PyTorch at least this (for times: at most).
GOALS = {
    "mlp 128": ">= 1.5", "mlp 256": ">= 1.5", "mlp 32, graph + jit": ">= 2", "mlp 32, eager": ">= 1.0",
    "cnn 128": ">= 2.5", "cnn 256": ">= 2.5", "jpeg pipeline": ">= 5", "cnn time to 90%": "<= 0.4",
}


def summary(values):
    return statistics.median(values), min(values), max(values)


def main():
    rows = [json.loads(line) for line in open(sys.argv[1], encoding="utf-8")]
    by = {}
    for r in rows:
        by.setdefault(r["row"], {}).setdefault(r["who"], []).append(r)
    medians = {}
    print(f"{'row':22} {'nimbus (median, range)':>28} {'pytorch (median, range)':>28} {'ratio':>6} {'goal':>7}")
    for row, sides in by.items():
        if set(sides) != {"nimbus", "pytorch"}:
            continue
        cells = []
        for who in ("nimbus", "pytorch"):
            median, low, high = summary([r["value"] for r in sides[who]])
            medians[(row, who)] = median
            cells.append(f"{median:10.1f} ({low:.1f}-{high:.1f})")
        ratio = medians[(row, "nimbus")] / medians[(row, "pytorch")]
        print(f"{row:22} {cells[0]:>28} {cells[1]:>28} {ratio:6.2f} {GOALS.get(row, ''):>7}")
    for row, sides in by.items():
        if set(sides) == {"nimbus", "pytorch"}:
            continue
        for who, records in sides.items():
            median, low, high = summary([r["value"] for r in records])
            medians[(row, who)] = median
            print(f"ceiling: {row} ({who}): {median:.1f} ({low:.1f}-{high:.1f})")
    gemm = medians.get(("sgemm 2048 GFLOP/s", "onednn"))
    if gemm and ("mlp 256", "nimbus") in medians:
        share = medians[("mlp 256", "nimbus")] * MLP_FLOP_PER_SAMPLE / (gemm * 1e9)
        print(f"mlp 256: Nimbus runs at {share:.0%} of the 2048^3 sgemm rate (goal >= 60%)")
    bound = medians.get(("jpeg decode bound", "libjpeg-turbo"))
    if bound and ("jpeg pipeline", "nimbus") in medians:
        print(f"jpeg pipeline: Nimbus at {medians[('jpeg pipeline', 'nimbus')] / bound:.0%} of the two-core "
              "decode bound (goal >= 60%)")
    if "cnn time to 90%" in by:
        for who, records in by["cnn time to 90%"].items():
            for r in sorted(records, key=lambda r: r["seed"]):
                print(f"cnn, {who}, seed {r['seed']}: {r['value']:.1f} s to 90.0% (epoch {r['epoch']}"
                      f"{'' if r['reached'] else ', not reached: 10-epoch time'}), "
                      f"test accuracy after 5 epochs {r['accuracy_epoch_5']:.4f}")
            missed = [r["seed"] for r in records if not r["reached"]]
            accuracy = statistics.median(r["accuracy_epoch_5"] for r in records)
            print(f"cnn, {who}: test accuracy after 5 epochs, median of seeds: {accuracy:.4f}"
                  + (f"; never reached 90.0% (10-epoch time counted) with seeds {missed}" if missed else ""))


if __name__ == "__main__":
    main()
