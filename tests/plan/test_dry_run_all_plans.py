"""The must-hold test of issue 24: every plan `nimbus plan` prints for the examples, over every GPU of
the catalog, passes `nimbus train <its command> --dry-run --assume-devices <its hardware>`, those on
several GPUs and nodes included (test_dry_run_plans.py has a fast subset)."""

import pytest

from test_dry_run_plans import EXAMPLES, check_every_plan


@pytest.mark.parametrize("example", ["fashion_mnist_mlp", "fashion_mnist_cnn", "fashion_mnist_resnet",
                                     "fashion_mnist_transformer"])
def test_every_plan_of_every_example_on_every_catalog_gpu_passes_its_dry_run(example):
    assert check_every_plan(EXAMPLES / f"{example}.yaml")[0] > 0
