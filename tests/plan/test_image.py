"""deploy/Dockerfile against what `nimbus` loads and what deploy/image.yaml says the image runs. The image
is not built here (no registry is reachable): its runtime stage's package list is read from the file.
Every library `ldd` reports for the built nimbus must come from a package that stage installs (or one
those depend on, as this machine's dpkg database records: the same Debian 12 packages); every NVIDIA
library nimbus links or dlopens must come from NVIDIA's package the stage installs, or from the node's
driver, which the NVIDIA Container Toolkit mounts."""

import os
import re
import subprocess
from pathlib import Path

import yaml

NIMBUS = os.environ["NIMBUS_CLI"]
REPO = Path(__file__).resolve().parents[2]

# NVIDIA's libraries by soname stem: the package of NVIDIA's debian12 repository that holds each, or
# None for the driver's.
NVIDIA_LIBRARIES = {
    "libcudart.so": "cuda-cudart-13-0",
    "libcublasLt.so": "libcublas-13-0",
    "libnvrtc.so": "cuda-nvrtc-13-0",
    "libcudnn.so": "libcudnn9-cuda-13",
    "libnccl.so": "libnccl2",
    "libcuda.so": None,
    "libnvidia-ml.so": None,
}
# Loaded only for what deploy/image.yaml's key says: NCCL for replicas on several GPUs. An image without
# it is allowed when the record says so (the planner then marks multi-GPU plans `needs: nccl`).
LOADED_FOR_RECORDED_CAPABILITY = {"libnccl.so": "nccl"}


def dockerfile_stages():
    """{stage name: (the stage it is FROM, [its RUN commands])}; the last stage is named ''."""
    text = re.sub(r"\\\n", " ", (REPO / "deploy" / "Dockerfile").read_text())
    stages, current = {}, None
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("FROM "):
            words = line.split()
            current = words[3] if len(words) > 3 and words[2].upper() == "AS" else ""
            stages[current] = (words[1], [])
        elif line.startswith("RUN ") and current is not None:
            stages[current][1].append(line[4:])
    return stages


def installed_by(stage):
    """The packages `apt-get install` or scripts/install-deps name in `stage` and the stages it is built on."""
    stages = dockerfile_stages()
    packages = set()
    while stage in stages:
        base, runs = stages[stage]
        for run in runs:
            for command in re.split(r"&&|;", run):
                words = command.split()
                if "install" in words and "apt-get" in words:
                    packages.update(w.split("=")[0] for w in words[words.index("install") + 1:]
                                    if not w.startswith("-"))
                if words and words[0].endswith("install-deps"):
                    packages.update(w for w in words[1:] if not w.startswith("-"))
        stage = base
    return packages


def runtime_packages():
    return installed_by("")


def builder_cmake_arguments():
    [configure] = [c for run in dockerfile_stages()["builder"][1] for c in run.split("&&") if "cmake -S" in c]
    return dict(re.findall(r"-D(\w+)=(\"[^\"]*\"|\S+)", configure))


def dependency_closure(packages):
    """`packages` and everything they depend on, by this machine's dpkg database (unknown ones stay as they are)."""
    closure, todo = set(), list(packages)
    while todo:
        package = todo.pop()
        if package in closure:
            continue
        closure.add(package)
        done = subprocess.run(["dpkg-query", "-W", "-f=${Depends}, ${Pre-Depends}", package],
                              capture_output=True, text=True)
        for alternative in re.split(r"[,|]", done.stdout):
            name = alternative.strip().split(" ")[0].split(":")[0]
            if name:
                todo.append(name)
    return closure


def package_of(path):
    for candidate in (path, "/usr" + path):
        done = subprocess.run(["dpkg", "-S", candidate], capture_output=True, text=True)
        if done.returncode == 0:
            return done.stdout.split(":")[0]
    return None


def test_every_library_ldd_reports_comes_from_a_package_of_the_runtime_stage():
    ldd = subprocess.run(["ldd", NIMBUS], capture_output=True, text=True, check=True).stdout
    build = Path(NIMBUS).resolve().parents[2]
    available = dependency_closure(runtime_packages())
    checked = 0
    for library, path in re.findall(r"^\s*(\S+) => (/\S+)", ldd, re.MULTILINE):
        if Path(path).resolve().is_relative_to(build):
            continue  # libnimbus: the builder stage copies it in
        stem = library.split(".so")[0] + ".so"
        if stem in NVIDIA_LIBRARIES:  # a CUDA build's libcudart
            assert NVIDIA_LIBRARIES[stem] in runtime_packages(), library
            continue
        package = package_of(path)
        assert package, f"{path} ({library}): no Debian package holds it"
        assert package in available, f"{library} comes from {package}, which the runtime stage does not install"
        checked += 1
    assert checked >= 10, ldd


def test_every_nvidia_library_nimbus_links_or_loads_is_in_the_image_or_the_driver():
    """The libraries the CUDA build links (src/CMakeLists.txt) and dlopens (the sources' dlopen names)."""
    names = set()
    if "CUDA::cudart" in (REPO / "src" / "CMakeLists.txt").read_text():
        names.add("libcudart.so")
    for source in (REPO / "src").rglob("*.cc"):
        text = source.read_text()
        if "dlopen" in text:
            names.update(re.findall(r"\"(lib[\w+-]+\.so)\.", text))
    assert {"libcudart.so", "libcublasLt.so", "libnvrtc.so", "libcudnn.so", "libnvidia-ml.so"} <= names
    packages = runtime_packages()
    image = yaml.safe_load((REPO / "deploy" / "image.yaml").read_text())
    for name in sorted(names):
        assert name in NVIDIA_LIBRARIES, f"{name}: which package of the image holds it? (add it to NVIDIA_LIBRARIES)"
        if name in LOADED_FOR_RECORDED_CAPABILITY and not image[LOADED_FOR_RECORDED_CAPABILITY[name]]:
            continue
        if NVIDIA_LIBRARIES[name] is not None:
            assert NVIDIA_LIBRARIES[name] in packages, f"{name}: the runtime stage lacks {NVIDIA_LIBRARIES[name]}"
    assert not any(p.startswith(("nvidia-driver", "libnvidia-", "libcuda1")) for p in packages), \
        "the driver comes from the node, through the NVIDIA Container Toolkit"


def test_image_yaml_says_what_the_dockerfile_builds():
    image = yaml.safe_load((REPO / "deploy" / "image.yaml").read_text())
    assert set(image) == {"cuda", "cuda_architectures", "cudnn", "nccl", "mpi"}
    cmake = builder_cmake_arguments()
    assert cmake["NIMBUS_BUILD_TESTS"] == "OFF" and cmake["NIMBUS_BUILD_BENCHMARKS"] == "OFF"
    assert (cmake.get("NIMBUS_CUDA") == "ON") == image["cuda"]
    architectures = {int(a.split("-")[0]) for a in cmake["NIMBUS_CUDA_ARCHS"].strip('"').split(";")}
    assert sorted(architectures) == image["cuda_architectures"]
    packages = runtime_packages()
    assert ("libcudnn9-cuda-13" in packages) == image["cudnn"]
    assert ("libnccl2" in packages) == image["nccl"]
    assert ({"libopenmpi3", "openmpi-bin"} <= packages) == image["mpi"]
    assert ("libopenmpi-dev" in installed_by("builder")) == image["mpi"]


def test_the_image_is_debian_12_with_nvidias_repository_for_it():
    stages = dockerfile_stages()
    bases = {base for base, _ in stages.values() if base not in stages}
    assert bases == {"debian:bookworm-slim"}
    assert any("repos/debian12/x86_64/cuda-keyring" in run for _, runs in stages.values() for run in runs)
