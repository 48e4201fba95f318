"""The suite's own checks: its limits hold, so that a case can fail, and the tiny run it builds on trains."""

from nimbus_process import TIMEOUT_SECONDS, assert_refused, assert_succeeded, assert_unchanged, run_nimbus, snapshot


def test_a_valid_tiny_run_trains(tiny):
    outcome = run_nimbus("train", tiny / "tiny.yaml", "--run-dir", tiny / "run")
    assert_succeeded(outcome, "samples/s")
    assert (tiny / "run" / "summary.json").is_file()


def test_assert_refused_fails_on_success_and_on_a_missing_culprit(tiny):
    outcome = run_nimbus("--version")
    try:
        assert_refused(outcome)
        raise RuntimeError("assert_refused accepted exit 0")
    except AssertionError:
        pass
    refused = run_nimbus("train", tiny / "missing.yaml")
    assert_refused(refused, "missing.yaml")
    try:
        assert_refused(refused, "a word nimbus never prints")
        raise RuntimeError("assert_refused accepted a message without the culprit")
    except AssertionError:
        pass


def test_assert_unchanged_sees_an_edit(tmp_path):
    (tmp_path / "a").write_bytes(b"1")
    before = snapshot(tmp_path)
    assert_unchanged(before, tmp_path)
    (tmp_path / "a").write_bytes(b"2")
    try:
        assert_unchanged(before, tmp_path)
        raise RuntimeError("assert_unchanged missed an edit")
    except AssertionError:
        pass


def test_the_time_out_is_the_suites():
    assert TIMEOUT_SECONDS == 60
