"""Hostile configs (issue 21): YAML that crashes, hangs or is silently accepted, checks that came too
late, and messages. Each case runs a real nimbus process (nimbus_process.py) and asserts a clean
refusal naming the file and line, the key or layer, and the remedy's words."""

import json
import time

import pytest

from nimbus_process import assert_refused, assert_succeeded, run_nimbus, tiny_config


def write_config(folder, name="hostile.yaml", **tiny):
    """tiny_config with `tiny`'s changes, written to folder/name; returns its path."""
    path = folder / name
    path.write_text(tiny_config(folder, **tiny))
    return path


def with_optimizer(folder, optimizer, name="optimizer.yaml"):
    path = folder / name
    path.write_text(tiny_config(folder).replace("{name: adam, learning_rate: 0.01}", optimizer))
    return path


def line_of(path, text):
    """The 1-based line of `path` that holds `text`."""
    return next(i for i, line in enumerate(path.read_text().splitlines(), 1) if text in line)


# --- YAML the loader must survive: aliases, depth, duplicates ---

SELF_ALIAS = "extra: &a\n  b: *a\n"


def test_a_self_alias_is_refused_by_train(tiny):
    config = write_config(tiny, extra=SELF_ALIAS)
    outcome = run_nimbus("train", config, "--run-dir", tiny / "run", cwd=tiny)
    assert_refused(outcome, f"{config}:{line_of(config, 'b: *a')}", "*a", "cycle")
    assert not (tiny / "run").exists()


def test_a_self_alias_is_refused_by_plan(tiny):
    config = write_config(tiny, extra=SELF_ALIAS)
    assert_refused(run_nimbus("plan", config, cwd=tiny), f"{config}:{line_of(config, 'b: *a')}", "cycle")


def test_a_self_alias_in_a_flow_list_is_refused_by_plan(tiny):
    config = tiny / "flow.yaml"
    config.write_text(tiny_config(tiny, fit="&f {epochs: 2, batch_size: 16, verbose: 0, shuffle: [*f]}"))
    assert_refused(run_nimbus("plan", config, cwd=tiny), f"{config}:", "*f", "cycle")


def billion_laughs(levels=9):
    """Nine levels of ten aliases of the level below: 10^9 strings once expanded."""
    lines = ['l0: &l0 "lol"']
    for level in range(1, levels + 1):
        lines.append(f"l{level}: &l{level} [" + ", ".join([f"*l{level - 1}"] * 10) + "]")
    return "\n".join(lines) + "\n"


def test_a_billion_laughs_is_refused_at_once_under_an_unknown_key(tiny):
    config = tiny / "laughs.yaml"
    config.write_text(tiny_config(tiny, extra="bomb:\n" + "".join("  " + line + "\n" for line in
                                                                 billion_laughs().splitlines())))
    started = time.monotonic()
    outcome = run_nimbus("train", config, "--run-dir", tiny / "run", cwd=tiny)
    assert_refused(outcome, f"{config}:", "aliases")
    assert time.monotonic() - started < 20, "the loader expanded the aliases before refusing"


def test_deep_nesting_names_its_line_not_bad_file(tiny):
    config = tiny / "deep.yaml"
    config.write_text(tiny_config(tiny, extra="deep: " + "[" * 3000 + "]" * 3000 + "\n"))
    outcome = run_nimbus("train", config, cwd=tiny)
    assert_refused(outcome, f"{config}:{line_of(config, 'deep:')}", "nest more than 64 levels")
    assert "bad file" not in outcome.stderr


def test_a_repeated_key_is_refused_naming_both_lines(tiny):
    config = tiny / "twice.yaml"
    config.write_text(tiny_config(tiny, fit="\n  epochs: 2\n  batch_size: 16\n  epochs: 3\n  verbose: 0"))
    first, second = line_of(config, "epochs: 2"), line_of(config, "epochs: 3")
    assert_refused(run_nimbus("train", config, "--run-dir", tiny / "run", cwd=tiny), f"{config}:{second}",
                   "fit.epochs", f"lines {first} and {second}")


def test_a_yaml_syntax_error_names_the_line_and_a_remedy(tiny):
    config = tiny / "syntax.yaml"
    config.write_text(tiny_config(tiny, fit="{epochs: 2, batch_size: 16"))
    outcome = run_nimbus("train", config, cwd=tiny)
    assert_refused(outcome, f"{config}:", "not valid YAML", "never closed")


# --- values silently accepted, or found too late ---

def test_negative_epochs_are_refused(tiny):
    config = write_config(tiny, fit="{epochs: -1, batch_size: 16, verbose: 0}")
    outcome = run_nimbus("train", config, "--run-dir", tiny / "run", cwd=tiny)
    assert_refused(outcome, f"{config}:{line_of(config, 'fit:')}", "fit.epochs is -1", "at least 1")
    assert not (tiny / "run").exists()


def test_zero_steps_per_epoch_is_refused(tiny):
    config = write_config(tiny, fit="{epochs: 1, steps_per_epoch: 0, batch_size: 16, verbose: 0}")
    assert_refused(run_nimbus("train", config, cwd=tiny), f"{config}:", "fit.steps_per_epoch is 0")


def test_a_nan_learning_rate_is_refused(tiny):
    config = with_optimizer(tiny, "{name: adam, learning_rate: .nan}")
    assert_refused(run_nimbus("train", config, cwd=tiny), f"{config}:{line_of(config, 'optimizer:')}",
                   "compile.optimizer.learning_rate is .nan", "finite")


def test_an_infinite_number_anywhere_is_refused(tiny):
    config = tiny / "inf.yaml"
    config.write_text(tiny_config(tiny).replace("labels.idx}\n  validation", "labels.idx, scale: .inf}\n  validation"))
    assert_refused(run_nimbus("train", config, cwd=tiny), f"{config}:", "data.train.scale is .inf")


def test_a_negative_learning_rate_is_refused(tiny):
    config = with_optimizer(tiny, "{name: sgd, learning_rate: -0.1}")
    assert_refused(run_nimbus("train", config, cwd=tiny), f"{config}:", "learning_rate must be a finite number >= 0")


def test_a_negative_batch_size_is_refused_before_the_run_directory_is_made(tiny):
    config = write_config(tiny, fit="{epochs: 1, batch_size: -5, verbose: 0}")
    outcome = run_nimbus("train", config, "--run-dir", tiny / "run", cwd=tiny)
    assert_refused(outcome, f"{config}:", "fit.batch_size is -5")
    assert not (tiny / "run").exists()


def test_an_accumulation_that_does_not_divide_the_batch_is_refused_before_the_run_directory(tiny):
    config = write_config(tiny, fit="{epochs: 1, batch_size: 16, gradient_accumulation: 3, verbose: 0}")
    assert_refused(run_nimbus("train", config, "--run-dir", tiny / "run", cwd=tiny), f"{config}:",
                   "fit.gradient_accumulation 3 does not divide fit.batch_size 16", "gradient_accumulation: auto")
    assert not (tiny / "run").exists()


def test_two_layers_with_one_name_are_refused_before_training(tiny):
    config = write_config(tiny, layers=["Flatten: {}", "Dense: {units: 8, name: a}", "Dense: {units: 4, name: a}"])
    outcome = run_nimbus("train", config, "--run-dir", tiny / "run", cwd=tiny)
    assert_refused(outcome, f"{config}:{line_of(config, 'units: 4, name: a')}", "layers 1 and 2 are both named 'a'")
    assert not (tiny / "run").exists()


@pytest.mark.parametrize("key", ["max_bad_records: -1", "ignore_errors: true", "shuffle: 100"])
def test_a_pipeline_key_in_the_idx_shorthand_is_refused_not_ignored(tiny, key):
    config = tiny / "shorthand.yaml"
    config.write_text(tiny_config(tiny).replace("labels.idx}\n  validation", f"labels.idx, {key}}}\n  validation"))
    name = key.split(":")[0]
    outcome = run_nimbus("train", config, "--run-dir", tiny / "run", cwd=tiny)
    assert_refused(outcome, f"{config}:{line_of(config, name)}", f"data.train.{name} needs a pipeline", "source: idx")
    assert not (tiny / "run").exists()


def test_images_that_do_not_fit_the_input_shape_name_the_file_and_the_key(tiny):
    config = tiny / "shape.yaml"
    config.write_text(tiny_config(tiny).replace("input_shape: [4, 4, 1]", "input_shape: [4, 4, 3]"))
    outcome = run_nimbus("train", config, "--run-dir", tiny / "run", cwd=tiny)
    assert_refused(outcome, f"images {tiny / 'images.idx'}", "[4, 4] (16 values)", "model.input_shape [4, 4, 3] takes 48")
    assert "reshape" not in outcome.stderr
    assert not (tiny / "run").exists()


# --- layer errors: file, line and layer index; no raw library text ---

def test_an_unknown_layer_class_names_file_line_and_index(tiny):
    config = write_config(tiny, layers=["Flatten: {}", "Dens: {units: 4}"])
    assert_refused(run_nimbus("train", config, cwd=tiny), f"{config}:{line_of(config, 'Dens:')}", "layer 1 (Dens)",
                   "unknown layer class 'Dens'")


def test_a_missing_argument_is_named_without_nlohmanns_text(tiny):
    config = write_config(tiny, layers=["Flatten: {}", "Dense: {activation: relu}"])
    outcome = run_nimbus("train", config, cwd=tiny)
    assert_refused(outcome, f"{config}:{line_of(config, 'Dense:')}", "layer 1 (Dense)", "needs the argument 'units'")
    assert "json.exception" not in outcome.stderr and "not found" not in outcome.stderr


def test_zero_units_name_file_line_and_index(tiny):
    config = write_config(tiny, layers=["Flatten: {}", "Dense: {units: 0}"])
    assert_refused(run_nimbus("train", config, cwd=tiny), f"{config}:{line_of(config, 'units: 0')}",
                   "layer 1 (Dense)", "units must be positive")


def test_an_unknown_activation_names_file_line_and_index(tiny):
    config = write_config(tiny, layers=["Flatten: {}", "Dense: {units: 4, activation: relux}"])
    assert_refused(run_nimbus("train", config, cwd=tiny), f"{config}:{line_of(config, 'relux')}", "layer 1 (Dense)",
                   "unknown activation 'relux'")


def test_a_dense_layer_too_large_for_memory_names_the_layer_and_its_bytes(tiny):
    config = write_config(tiny, layers=["Flatten: {}", "Dense: {units: 100000000}", "Dense: {units: 4}"])
    outcome = run_nimbus("train", config, "--run-dir", tiny / "run", cwd=tiny)
    assert_refused(outcome, "layer 1", "(Dense)", "'kernel'", "6.0 GiB")  # 16 x 100000000 floats
    assert "bad_alloc" not in outcome.stderr
    assert not (tiny / "run").exists()


# --- optimizers and losses: Keras's names with all their arguments, and nothing dropped ---

def test_keras_sgd_with_momentum_keeps_its_momentum(tiny):
    config = with_optimizer(tiny, "{name: SGD, learning_rate: 0.1, momentum: 0.9}")
    assert_succeeded(run_nimbus("train", config, "--run-dir", tiny / "run", cwd=tiny))
    checkpoints = list((tiny / "run" / "checkpoints").glob("*.safetensors"))
    assert checkpoints, "no checkpoint written"
    assert b"/momentum" in checkpoints[0].read_bytes()[:100000], "the optimizer has no momentum slots"


def test_keras_adam_keeps_its_beta_1(tiny):
    # The same deterministic run with beta_1 0.5 and with Adam's default 0.9: a dropped beta_1 would
    # make the two losses equal.
    losses = {}
    for beta_1 in ("0.5", "0.9"):
        config = with_optimizer(tiny, f"{{name: Adam, learning_rate: 0.01, beta_1: {beta_1}}}", f"adam{beta_1}.yaml")
        run = tiny / f"run{beta_1}"
        assert_succeeded(run_nimbus("train", config, "--run-dir", run, cwd=tiny))
        assert json.loads((run / "config.json").read_text())["compile"]["optimizer"]["beta_1"] == float(beta_1)
        losses[beta_1] = json.loads((run / "summary.json").read_text())["epochs"][-1]["loss"]
    assert losses["0.5"] != losses["0.9"], losses


def test_an_argument_the_optimizer_does_not_take_is_refused(tiny):
    config = with_optimizer(tiny, "{name: SGD, beta_1: 0.5}")
    assert_refused(run_nimbus("train", config, cwd=tiny), f"{config}:", "compile.optimizer.beta_1",
                   "SGD takes no argument 'beta_1'", "momentum")


def test_an_argument_the_loss_does_not_take_is_refused(tiny):
    config = tiny / "loss.yaml"
    config.write_text(tiny_config(tiny).replace("{name: sparse_categorical_crossentropy, from_logits: true}",
                                                "{name: mse, from_logits: true}"))
    assert_refused(run_nimbus("train", config, cwd=tiny), f"{config}:",
                   "MeanSquaredError takes no argument 'from_logits'")
