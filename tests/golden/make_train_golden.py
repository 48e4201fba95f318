#!/usr/bin/python3
"""Writes tests/golden/train_golden.json: PyTorch's view of two tiny models.

Run with Debian's PyTorch (python3-torch), from the repository root:

    /usr/bin/python3 tests/golden/make_train_golden.py > tests/golden/train_golden.json

For a tiny MLP and a tiny CNN shaped like the peers' Fashion-MNIST models
(../shared/peers/py/train_fmnist.py), the file holds the initial weights, one
batch, the logits, the mean cross-entropy loss, the gradient of that loss for
every parameter, and the losses of 10 Adam steps on that batch (the loss
before each step). torch computes in float64; tests/train/golden_test.cc loads
the weights into the same Nimbus model (nn::Sequential) and checks each item
in f32.

Everything is written in Nimbus's (Keras's) layouts: dense kernels are
(in, out) (torch's Linear weight transposed), conv kernels (KH, KW, C, F)
(torch's (F, C, KH, KW) permuted), images NHWC, and the dense layer after a
Flatten takes its inputs in (H, W, C) order, as Keras flattens NHWC.

Adam's epsilon is set tiny (1e-10) on both sides: torch adds it to
sqrt(v) / sqrt(1 - b2^t), Keras to sqrt(v), so only then are the rules equal
to far below the tolerance.
"""

import json
import sys

import torch
import torch.nn as nn

VERSION = 1
SEED = 20261130
ADAM = {"learning_rate": 0.01, "beta_1": 0.9, "beta_2": 0.999, "epsilon": 1e-10}
STEPS = 10

torch.manual_seed(SEED)
torch.set_default_dtype(torch.float64)


def flat(t):
    return [float(v) for v in t.detach().reshape(-1).tolist()]


def tensor_entry(name, t):
    return {"name": name, "shape": list(t.shape), "values": flat(t)}


def dense_kernel(weight):  # torch (out, in) -> (in, out)
    return weight.t()


def conv_kernel(weight):  # torch (F, C, KH, KW) -> (KH, KW, C, F)
    return weight.permute(2, 3, 1, 0)


def flatten_dense_kernel(weight, c, h, w):  # torch (out, C*H*W) -> (H*W*C, out)
    return weight.reshape(weight.shape[0], c, h, w).permute(2, 3, 1, 0).reshape(h * w * c, weight.shape[0])


def describe(model, x_torch, x_nimbus, labels, params):
    """params: list of (nimbus name, torch parameter, layout function)."""
    logits = model(x_torch)
    loss = nn.functional.cross_entropy(logits, labels)
    grads = torch.autograd.grad(loss, [p for _, p, _ in params])
    entry = {
        "input": tensor_entry("x", x_nimbus),
        "labels": [int(v) for v in labels.tolist()],
        "params": [tensor_entry(name, f(p)) for name, p, f in params],
        "logits": tensor_entry("logits", logits),
        "loss": float(loss),
        "grads": [tensor_entry(name, f(g)) for (name, _, f), g in zip(params, grads)],
    }
    optimizer = torch.optim.Adam(model.parameters(), lr=ADAM["learning_rate"],
                                 betas=(ADAM["beta_1"], ADAM["beta_2"]), eps=ADAM["epsilon"])
    losses = []
    for _ in range(STEPS):
        optimizer.zero_grad()
        step_loss = nn.functional.cross_entropy(model(x_torch), labels)
        losses.append(float(step_loss))
        step_loss.backward()
        optimizer.step()
    entry["adam"] = dict(ADAM, losses=losses)
    return entry


def mlp():
    # The peers' MLP shape, scaled down: Flatten, Dense relu, Dense relu, Dense.
    n, h, w = 8, 4, 3
    model = nn.Sequential(nn.Flatten(), nn.Linear(h * w, 16), nn.ReLU(), nn.Linear(16, 8), nn.ReLU(), nn.Linear(8, 5))
    x = torch.rand(n, 1, h, w)
    labels = torch.randint(0, 5, (n,))
    identity = lambda t: t  # noqa: E731
    params = [("dense/kernel", model[1].weight, dense_kernel), ("dense/bias", model[1].bias, identity),
              ("dense_1/kernel", model[3].weight, dense_kernel), ("dense_1/bias", model[3].bias, identity),
              ("dense_2/kernel", model[5].weight, dense_kernel), ("dense_2/bias", model[5].bias, identity)]
    # (N, 1, H, W) and (N, H, W, 1) flatten to the same order: one channel.
    return describe(model, x, x.permute(0, 2, 3, 1), labels, params)


def cnn():
    # The peers' CNN shape, scaled down: conv-relu-pool twice, Flatten, Dense relu, Dense.
    n, c, hw = 6, 2, 8
    model = nn.Sequential(nn.Conv2d(c, 4, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                          nn.Conv2d(4, 6, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                          nn.Flatten(), nn.Linear(6 * 2 * 2, 8), nn.ReLU(), nn.Linear(8, 5))
    x = torch.randn(n, c, hw, hw)
    labels = torch.randint(0, 5, (n,))
    identity = lambda t: t  # noqa: E731
    params = [("conv2d/kernel", model[0].weight, conv_kernel), ("conv2d/bias", model[0].bias, identity),
              ("conv2d_1/kernel", model[3].weight, conv_kernel), ("conv2d_1/bias", model[3].bias, identity),
              ("dense/kernel", model[7].weight, lambda t: flatten_dense_kernel(t, 6, 2, 2)),
              ("dense/bias", model[7].bias, identity),
              ("dense_1/kernel", model[9].weight, dense_kernel), ("dense_1/bias", model[9].bias, identity)]
    return describe(model, x, x.permute(0, 2, 3, 1), labels, params)


def main():
    golden = {"version": VERSION, "torch": torch.__version__, "seed": SEED, "models": {"mlp": mlp(), "cnn": cnn()}}
    json.dump(golden, sys.stdout, indent=None, separators=(",", ":"))
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
