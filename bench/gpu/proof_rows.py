#!/usr/bin/env python3
"""The device proof's (bench/gpu/run.sh) rows made from its programs' JSON, one tab-separated
`what<TAB>figure<TAB>against` line each, and its JSON table.

  proof_rows.py fit SECONDS LINE            # fashion_mnist_fit --json's line
  proof_rows.py planner PREDICTIONS LINE... # bench/gpu/planner_predictions.json against fit lines
  proof_rows.py json ROWS_TSV OUT SECONDS   # the table so far as JSON
"""
import json
import sys


def fit_row(seconds, line):
    run = json.loads(line)
    accuracy = "meets" if run["val_accuracy"] >= 0.85 else "BELOW"
    falls = "falls" if run["loss"] < run["first_loss"] else "DOES NOT FALL"
    print(f"fashion_mnist_fit {run['model']} on {run['device']}, {run['mode']}, {run['precision']}, "
          f"batch {run['batch']}, {run['epochs']} epoch\t"
          f"{run['samples_per_sec']:,.0f} samples/s; test accuracy {run['val_accuracy']:.4f} ({accuracy} 0.85)\t"
          f"test loss {run['first_loss']:.3f} before, {run['loss']:.3f} in the epoch ({falls}); {seconds} s")


def planner_rows(predictions, lines):
    predicted = json.load(open(predictions))
    for line in lines:
        if not line:
            continue
        run = json.loads(line)
        if run["precision"] != predicted["precision"] or run["model"] not in predicted["step_seconds"]:
            continue
        guess, measured = predicted["step_seconds"][run["model"]], run["batch"] / run["samples_per_sec"]
        print(f"planner truth: {run['model']} step on this GPU, batch {run['batch']}, {run['precision']}\t"
              f"predicted {guess * 1e3:.3f} ms, measured {measured * 1e3:.3f} ms ({guess / measured - 1:+.0%})\t"
              f"prediction made {predicted['made']}")


def json_table(rows_tsv, out, seconds):
    rows = [dict(zip(("what", "figure", "against"), line.rstrip("\n").split("\t"))) for line in open(rows_tsv)]
    with open(out, "w") as file:
        json.dump({"seconds_so_far": int(seconds), "rows": rows}, file, indent=1)


if __name__ == "__main__":
    command, arguments = sys.argv[1], sys.argv[2:]
    if command == "fit":
        fit_row(arguments[0], arguments[1])
    elif command == "planner":
        planner_rows(arguments[0], arguments[1:])
    elif command == "json":
        json_table(*arguments)
    else:
        sys.exit(f"proof_rows.py: unknown command {command}")
