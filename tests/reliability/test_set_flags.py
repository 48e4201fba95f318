"""Hostile `--set KEY=VALUE` flags (issue 21): the value is YAML read by the same loader as the file,
checked by the same validation, and every refusal names the `--set` argument, not the YAML file."""

from nimbus_process import assert_refused, run_nimbus

SELF_ALIAS = "fit.batch_size=&a [*a]"


def refused_set(tiny, assignment, *culprits, command="train"):
    """`nimbus COMMAND tiny.yaml --set ASSIGNMENT` is refused, naming the flag and `culprits`, before a run
    directory is made."""
    run_dir = ["--run-dir", tiny / "run"] if command == "train" else []
    outcome = run_nimbus(command, tiny / "tiny.yaml", "--set", assignment, *run_dir, cwd=tiny)
    assert_refused(outcome, f"--set {assignment}", *culprits)
    assert not (tiny / "run").exists(), "the run directory was made before the flag was checked"
    return outcome


def test_a_self_alias_in_a_set_value_is_refused_by_train(tiny):
    refused_set(tiny, SELF_ALIAS, "*a", "cycle")


def test_a_self_alias_in_a_set_value_is_refused_by_plan(tiny):
    refused_set(tiny, SELF_ALIAS, "*a", "cycle", command="plan")


def test_an_empty_batch_size_is_refused_not_defaulted(tiny):
    refused_set(tiny, "fit.batch_size=", "no value after '='")


def test_an_explicit_null_for_a_key_with_a_default_is_refused(tiny):
    refused_set(tiny, "fit.batch_size=null", "fit.batch_size is empty")


def test_negative_steps_per_epoch_are_refused(tiny):
    refused_set(tiny, "fit.steps_per_epoch=-2", "fit.steps_per_epoch is -2", "at least 1")


def test_zero_batch_size_is_refused(tiny):
    refused_set(tiny, "fit.batch_size=0", "fit.batch_size is 0")


def test_zero_gradient_accumulation_is_refused(tiny):
    refused_set(tiny, "fit.gradient_accumulation=0", "fit.gradient_accumulation is 0")


def test_an_accumulation_that_does_not_divide_the_batch_is_refused(tiny):
    refused_set(tiny, "fit.gradient_accumulation=5", "does not divide fit.batch_size 16")


def test_a_whole_section_is_refused_naming_its_keys(tiny):
    refused_set(tiny, "fit={epochs: 3}", "'fit' is a section of the config", "--set fit.KEY=VALUE",
                "valid keys under fit:", "epochs")


def test_a_type_error_blames_the_flag_not_the_file(tiny):
    outcome = refused_set(tiny, "fit.epochs=five", "fit.epochs must be an integer")
    assert f"{tiny / 'tiny.yaml'}" not in outcome.stderr


def test_a_nan_learning_rate_is_refused(tiny):
    refused_set(tiny, "compile.optimizer.learning_rate=.nan", "compile.optimizer.learning_rate is .nan")


def test_an_optimizer_argument_set_for_the_wrong_optimizer_is_refused(tiny):
    refused_set(tiny, "compile.optimizer={name: SGD, beta_1: 0.5}", "SGD takes no argument 'beta_1'")


def test_a_yaml_syntax_error_in_a_value_names_the_flag(tiny):
    refused_set(tiny, "fit.batch_size=[16", "not valid YAML")


def test_a_value_past_the_scalar_limit_is_refused(tiny):
    outcome = run_nimbus("train", tiny / "tiny.yaml", "--set", "runtime.device=" + "x" * 100000, cwd=tiny)
    assert_refused(outcome, "--set runtime.device=", "at most 65536")
    assert len(outcome.stderr) < 2000, "the message echoes the whole value"
