"""The manifests of `nimbus k8s`, checked offline with Debian's python3-jsonschema: every object against
the Kubernetes schemas and the MPIJob CRD in tests/plan/k8s_schemas (strictly: a field the schema does not
know is an error, as with `kubectl apply --validate=strict`), a broken manifest refused; and each
manifest's container command run through /bin/sh with the ConfigMap's files in a temporary folder at its
mount path, the claim's in another, and stand-ins for `mpirun` (ranks 0 and 1 of one pod) and `nimbus`."""

import copy
import json
import os
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest
import yaml

NIMBUS = os.environ["NIMBUS_CLI"]
REPO = Path(__file__).resolve().parents[2]
SCHEMAS = Path(__file__).resolve().parent / "k8s_schemas"
CONFIG = REPO / "examples" / "fashion_mnist_mlp.yaml"
# GPUs the image's CUDA build targets (deploy/image.yaml), up to two nodes.
PLAN_ARGUMENTS = [str(CONFIG), "--gpus", "A100-40GB,A100-80GB,H100", "--max-nodes", "2"]
OVERRIDE = "model.name=it's mine"  # a quote and a space: the shell must pass it on as one word


def strict(schema):
    """The CRD's objects with listed properties reject others, unless they preserve unknown fields."""
    if isinstance(schema, dict):
        if (schema.get("type") == "object" and "properties" in schema and "additionalProperties" not in schema
                and not schema.get("x-kubernetes-preserve-unknown-fields")):
            schema["additionalProperties"] = False
        for value in schema.values():
            strict(value)
    elif isinstance(schema, list):
        for value in schema:
            strict(value)
    return schema


def load_validators():
    crd = yaml.safe_load((SCHEMAS / "kubeflow.org_mpijobs.yaml").read_text())
    mpijob = strict(next(v for v in crd["spec"]["versions"] if v["name"] == "v2beta1")["schema"]["openAPIV3Schema"])
    kubernetes = json.loads((SCHEMAS / "kubernetes-1.31.json").read_text())
    # The Job's pod template is the Kubernetes PodTemplateSpec the CRD carries for its replicas.
    pod_template = mpijob["properties"]["spec"]["properties"]["mpiReplicaSpecs"]["additionalProperties"]
    kubernetes["definitions"]["io.k8s.api.core.v1.PodTemplateSpec"] = copy.deepcopy(
        pod_template["properties"]["template"])

    def of(name):
        return jsonschema.Draft7Validator({"$ref": f"#/definitions/{name}", "definitions": kubernetes["definitions"]})

    return {
        "v1/ConfigMap": of("io.k8s.api.core.v1.ConfigMap"),
        "v1/PersistentVolumeClaim": of("io.k8s.api.core.v1.PersistentVolumeClaim"),
        "batch/v1/Job": of("io.k8s.api.batch.v1.Job"),
        "kubeflow.org/v2beta1/MPIJob": jsonschema.Draft7Validator(mpijob),
    }


VALIDATORS = load_validators()


def schema_errors(document):
    key = f"{document.get('apiVersion')}/{document.get('kind')}"
    assert key in VALIDATORS, f"no schema for {key}"
    return [f"{'/'.join(map(str, error.absolute_path))}: {error.message}"
            for error in VALIDATORS[key].iter_errors(document)]


def nimbus(*arguments):
    done = subprocess.run([NIMBUS, *map(str, arguments)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, f"nimbus {' '.join(map(str, arguments))}:\n{done.stdout}{done.stderr}"
    return done.stdout


def manifests_of(nodes, *extra):
    """The manifests of the best plan on `nodes` nodes (one GPU when one node)."""
    plans = json.loads(nimbus("plan", *PLAN_ARGUMENTS, "--json"))["plans"]
    number = next(i for i, p in enumerate(plans, 1)
                  if p["nodes"] == nodes and (nodes > 1 or p["device_count"] == 1))
    documents = list(yaml.safe_load_all(nimbus("k8s", *PLAN_ARGUMENTS, "--plan", number, "--name", "fmnist",
                                               "--storage-class", "standard-rwx", "--set", OVERRIDE, *extra)))
    return plans[number - 1], documents


@pytest.fixture(scope="module")
def job():
    return manifests_of(1)


@pytest.fixture(scope="module")
def mpijob():
    return manifests_of(2)


def test_every_object_of_a_one_gpu_plan_is_valid(job):
    _, documents = job
    assert [d["kind"] for d in documents] == ["ConfigMap", "PersistentVolumeClaim", "Job"]
    for document in documents:
        assert schema_errors(document) == [], document["kind"]


def test_every_object_of_a_two_node_plan_is_valid(mpijob):
    _, documents = mpijob
    assert [d["kind"] for d in documents] == ["ConfigMap", "PersistentVolumeClaim", "MPIJob"]
    for document in documents:
        assert schema_errors(document) == [], document["kind"]


def test_broken_manifests_fail_validation(job, mpijob):
    configmap, claim, single = copy.deepcopy(job[1])
    single["spec"]["template"]["spec"]["restartPolicy"] = "Sometimes"
    assert any("restartPolicy" in e for e in schema_errors(single))
    del single["spec"]["template"]["spec"]["restartPolicy"]  # a Job's pods default to Always, which it refuses
    assert schema_errors(single)
    _, _, single = copy.deepcopy(job[1])
    single["spec"]["template"]["spec"]["containers"][0]["volumeMount"] = []  # misspelled
    assert any("volumeMount" in e for e in schema_errors(single))
    claim["spec"]["accessModes"] = ["ReadWriteSometimes"]
    assert schema_errors(claim)
    configmap["metadata"]["lables"] = {}
    assert schema_errors(configmap)
    mpi = copy.deepcopy(mpijob[1][2])
    mpi["spec"]["slotsPerWorkers"] = 8  # misspelled
    assert any("slotsPerWorkers" in e for e in schema_errors(mpi))
    mpi = copy.deepcopy(mpijob[1][2])
    mpi["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]["resources"]["limits"] = "8"
    assert schema_errors(mpi)


def test_mpijob_workers_share_only_a_read_write_many_claim(mpijob):
    _, (_, claim, mpi) = mpijob
    assert claim["spec"]["accessModes"] == ["ReadWriteMany"]
    assert claim["spec"]["storageClassName"] == "standard-rwx"
    for role in ("Launcher", "Worker"):
        for volume in mpi["spec"]["mpiReplicaSpecs"][role]["template"]["spec"]["volumes"]:
            if "persistentVolumeClaim" in volume:
                assert volume["persistentVolumeClaim"]["claimName"] == claim["metadata"]["name"]


def test_an_mpijob_without_a_storage_class_is_refused():
    plans = json.loads(nimbus("plan", *PLAN_ARGUMENTS, "--json"))["plans"]
    number = next(i for i, p in enumerate(plans, 1) if p["nodes"] == 2)
    done = subprocess.run([NIMBUS, "k8s", *PLAN_ARGUMENTS, "--plan", str(number)], capture_output=True, text=True)
    assert done.returncode != 0
    assert "ReadWriteMany" in done.stderr and "--storage-class" in done.stderr, done.stderr


# Stand-ins on PATH. mpirun: runs its program as ranks 0 and 1 of one pod of the job of -np processes
# (Open MPI's environment).
# nimbus: records its arguments and CUDA_VISIBLE_DEVICES (STAND_IN_LOG), or runs the real nimbus with
# STAND_IN_FLAGS added.
MPIRUN = f"""#!{sys.executable}
import os, subprocess, sys
arguments, at = sys.argv[1:], 0
while arguments[at].startswith("-"):
    at += 2 if arguments[at] in ("-np", "-x", "-bind-to") else 1
size = arguments[arguments.index("-np") + 1]
for rank in (0, 1):
    environment = dict(os.environ, OMPI_COMM_WORLD_RANK=str(rank), OMPI_COMM_WORLD_LOCAL_RANK=str(rank),
                       OMPI_COMM_WORLD_SIZE=size)
    if subprocess.call(arguments[at:], env=environment) != 0:
        sys.exit(1)
"""
NIMBUS_STAND_IN = f"""#!{sys.executable}
import json, os, sys
if "STAND_IN_LOG" in os.environ:
    with open(os.environ["STAND_IN_LOG"], "a") as log:
        log.write(json.dumps({{"argv": sys.argv[1:], "gpus": os.environ.get("CUDA_VISIBLE_DEVICES"),
                              "rank": os.environ.get("OMPI_COMM_WORLD_RANK")}}) + "\\n")
else:
    os.execv({NIMBUS!r}, [{NIMBUS!r}, *sys.argv[1:], *os.environ["STAND_IN_FLAGS"].split()])
"""


def run_container_command(documents, folder, environment):
    """The trainer's command (the Job's, or the MPIJob launcher's) with the ConfigMap's files in
    folder/config and the claim in folder/runs; returns the completed process."""
    configmap, _, workload = documents
    (folder / "config").mkdir(exist_ok=True)
    for name, text in configmap["data"].items():
        (folder / "config" / name).write_text(text)
    (folder / "runs").mkdir(exist_ok=True)
    (folder / "bin").mkdir(exist_ok=True)
    for name, text in (("mpirun", MPIRUN), ("nimbus", NIMBUS_STAND_IN)):
        (folder / "bin" / name).write_text(text)
        (folder / "bin" / name).chmod(0o755)
    if workload["kind"] == "Job":
        command = workload["spec"]["template"]["spec"]["containers"][0]["command"]
    else:
        command = workload["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]["containers"][0]["command"]
    script = (command[2].replace("/etc/nimbus/", f"{folder}/config/").replace("/runs/", f"{folder}/runs/")
              .replace("/scratch", f"{folder}/scratch").replace("--metrics-port 9400", "--metrics-port 0"))
    environment = dict(os.environ, PATH=f"{folder}/bin:{os.environ['PATH']}", **environment)
    return subprocess.run([*command[:2], script], capture_output=True, text=True, env=environment, timeout=300)


def recorded_calls(documents, folder):
    done = run_container_command(documents, folder, {"STAND_IN_LOG": str(folder / "calls.jsonl")})
    assert done.returncode == 0, done.stdout + done.stderr
    calls = [json.loads(line) for line in (folder / "calls.jsonl").read_text().splitlines()]
    (folder / "calls.jsonl").unlink()
    return calls


def set_values(argv):
    return [argv[i + 1] for i, word in enumerate(argv) if word == "--set"]


def test_the_job_trains_on_cuda_at_the_plans_batch_and_precision(job, tmp_path):
    plan, documents = job
    [call] = recorded_calls(documents, tmp_path)
    argv = call["argv"]
    assert argv[:2] == ["train", f"{tmp_path}/config/config.yaml"]
    sets = set_values(argv)
    assert OVERRIDE in sets  # one word through the shell
    assert argv[argv.index("--device") + 1] == "cuda"
    batch = plan["micro_batch"] * plan["gradient_accumulation"] * plan["device_count"]
    assert f"fit.batch_size={batch}" in sets
    assert f"fit.gradient_accumulation={plan['gradient_accumulation']}" in sets
    assert plan["precision"] == "float32" or f"runtime.precision={plan['precision']}" in sets
    assert not any(s.startswith("runtime.strategy") for s in sets)
    assert argv[argv.index("--run-dir") + 1] == f"{tmp_path}/runs/fmnist"
    assert "--resume" not in argv
    # A replaced pod continues the run its predecessor began.
    (tmp_path / "runs" / "fmnist").mkdir()
    (tmp_path / "runs" / "fmnist" / "config.json").write_text("{}")
    [call] = recorded_calls(documents, tmp_path)
    assert call["argv"][call["argv"].index("--resume") + 1] == f"{tmp_path}/runs/fmnist"


def test_mpijob_ranks_select_multi_worker_mirrored_and_their_local_gpu(mpijob, tmp_path):
    plan, documents = mpijob
    launcher = documents[2]["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]["containers"][0]
    assert {"name": "NCCL_DEBUG", "value": "WARN"} in launcher["env"]
    assert "-x NCCL_DEBUG" in launcher["command"][2]
    assert f"-np {plan['device_count']} " in launcher["command"][2]
    calls = recorded_calls(documents, tmp_path)
    assert [(c["rank"], c["gpus"]) for c in calls] == [("0", "0"), ("1", "1")]
    for call in calls:
        argv = call["argv"]
        sets = set_values(argv)
        assert "runtime.strategy.type=multi_worker_mirrored" in sets
        assert argv[argv.index("--device") + 1] == "cuda"
        assert OVERRIDE in sets
        assert f"fit.batch_size={plan['micro_batch'] * plan['gradient_accumulation'] * plan['device_count']}" in sets
        # Rank 0 writes the run on the shared claim; the others their own files in the pod's scratch folder.
        assert argv[argv.index("--run-dir") + 1] == f"{tmp_path}/runs/fmnist"
        assert argv[argv.index("--worker-dir") + 1] == f"{tmp_path}/scratch"
        assert "--resume" not in argv
    (tmp_path / "runs" / "fmnist").mkdir()
    (tmp_path / "runs" / "fmnist" / "config.json").write_text("{}")
    for call in recorded_calls(documents, tmp_path):
        assert call["argv"][call["argv"].index("--resume") + 1] == f"{tmp_path}/runs/fmnist"


def has_dry_run():
    return "--dry-run" in subprocess.run([NIMBUS, "train", "--help"], capture_output=True, text=True).stdout


@pytest.mark.skipif(not has_dry_run(), reason="this nimbus has no `train --dry-run` yet")
@pytest.mark.parametrize("nodes", [1, 2])
def test_each_manifests_command_passes_the_trainers_dry_run(nodes, tmp_path):
    """What the trainer would refuse in the pod fails here: the command as the manifest has it, each
    process under --dry-run on the GPUs it sees there (--assume-devices)."""
    plan, documents = manifests_of(nodes)
    per_process = 1 if nodes > 1 else plan["device_count"]
    flags = f"--dry-run --assume-devices {per_process}x{plan['device']}"
    done = run_container_command(documents, tmp_path, {"STAND_IN_FLAGS": flags})
    assert not plan["needs"], "the image has NCCL and MPI"
    assert done.returncode == 0, done.stdout + done.stderr
    if plan["device_count"] > 1:  # each process checks its replica's share of the global batch
        assert f"{plan['device_count']} replica(s) on GPUs of --assume-devices" in done.stdout, done.stdout


@pytest.mark.parametrize("nccl", [True, False])
def test_k8s_warns_only_of_what_the_image_lacks(nccl, tmp_path):
    """The shipped image has NCCL: a plan on several nodes' GPUs is written without a warning; for an
    image without it, the same plan is marked and nimbus k8s warns that its pods would stop."""
    image = tmp_path / "image.yaml"
    image.write_text(f"cuda: true\ncuda_architectures: [80, 86, 89, 90]\ncudnn: true\nnccl: {str(nccl).lower()}\n"
                     "mpi: true\n")
    arguments = [*PLAN_ARGUMENTS, "--image-capabilities", image]
    plans = json.loads(nimbus("plan", *arguments, "--json"))["plans"]
    number, plan = next((i, p) for i, p in enumerate(plans, 1) if p["nodes"] > 1 and p["device"] != "cpu")
    assert plan["needs"] == ([] if nccl else ["nccl"])
    done = subprocess.run([NIMBUS, "k8s", *map(str, arguments), "--plan", str(number), "--name", "fmnist",
                           "--storage-class", "standard-rwx"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    if nccl:
        assert "warning" not in done.stderr, done.stderr
    else:
        assert f"warning: plan {number} needs nccl" in done.stderr, done.stderr
