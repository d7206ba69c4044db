#!/usr/bin/env bash
# Runs every test of the workspace. This is the command README.md gives and .ci/run calls.
# It installs and starts whatever the tests need, so it works on a fresh machine that has only
# the Rust toolchain.
set -euo pipefail
cd "$(dirname "$0")/.."

# Build output must fit a CI machine's free disk. The test binaries link the whole dependency
# tree each, so this run builds them without debug info (panics still name file and line), and
# builds them once: `cargo build --all-targets` would build them under the dev profile and
# `cargo test` again under the test profile, doubling the output.
export CARGO_PROFILE_DEV_DEBUG=false CARGO_PROFILE_TEST_DEBUG=false
export CARGO_PROFILE_DEV_STRIP=debuginfo CARGO_PROFILE_TEST_STRIP=debuginfo
# Incremental caches only help a rebuild and cost gigabytes on a clean one.
export CARGO_INCREMENTAL="${CARGO_INCREMENTAL:-0}"
# Every command builds with the simulator (`process_hub_actors/sim`, which turns on
# `process_hub/sim`): its tests (actors/tests/simulate.rs) need it, and every command building
# the same features reuses what the first one built. The shipped binary is built without it.
# Exported for the test that builds the examples (tests/in_process/examples.rs), so that it
# reuses this build too.
export PROCESS_HUB_TEST_FEATURES=process_hub_actors/sim
features=(--features "$PROCESS_HUB_TEST_FEATURES")

# `--quick`: the inner loop, not the whole suite: the unit and property tests of both crates,
# the layer rule, and the in-process simulator's seeds (a few drawn seeds and every regression
# seed). Needs nothing installed; no multi-process, browser or S3 test, no sweep.
if [ "${1:-}" = "--quick" ]; then
  echo "==> quick: unit and property tests, the layer rule, the simulator's seeds" >&2
  cargo test --workspace --lib "${features[@]}"
  exec cargo test -p process_hub --test architecture --test simulation "${features[@]}"
elif [ -n "${1:-}" ]; then
  echo "usage: bash scripts/test.sh [--quick]" >&2
  exit 2
fi
echo "==> building the workspace (tests and binaries, with the simulator)" >&2
cargo test --workspace --all-targets "${features[@]}" --no-run

# The S3 remote-manifest test (tests/object_store/) runs against a real S3-compatible server:
# moto, from PyPI. Install it if missing, start it on a free loopback port, export its endpoint,
# and stop it when this script exits, however it exits.
python=$(command -v python3 || command -v python || true)
if [ -z "$python" ]; then
  echo "error: python3 is needed to run the S3-compatible test server (moto)" >&2
  exit 1
fi
if ! "$python" -c 'import moto.server' >/dev/null 2>&1; then
  echo "==> installing moto[server] (S3-compatible test server) from PyPI" >&2
  "$python" -m pip install --quiet 'moto[server]' \
    || "$python" -m pip install --quiet --break-system-packages 'moto[server]'
fi
moto_port=$("$python" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()')
moto_log="$(mktemp -t process_hub_moto.XXXXXX.log)"
echo "==> starting moto on 127.0.0.1:$moto_port (log: $moto_log)" >&2
"$python" -m moto.server -H 127.0.0.1 -p "$moto_port" >"$moto_log" 2>&1 &
moto_pid=$!
trap 'kill "$moto_pid" 2>/dev/null || true; wait "$moto_pid" 2>/dev/null || true' EXIT
export PROCESS_HUB_TEST_S3_ENDPOINT="http://127.0.0.1:$moto_port"
for _ in $(seq 1 150); do
  if "$python" -c "import socket; socket.create_connection(('127.0.0.1', $moto_port), 1)" 2>/dev/null; then
    break
  fi
  if ! kill -0 "$moto_pid" 2>/dev/null; then
    echo "error: moto exited at startup; its log:" >&2
    cat "$moto_log" >&2
    exit 1
  fi
  sleep 0.2
done

# The dashboard's browser test (actors/tests/browser/) drives Debian's Chromium
# through chromedriver; it fails, never skips, without them. Install both when missing (idempotent:
# nothing is done when they are there).
if [ ! -x /usr/bin/chromium ] || [ ! -x /usr/bin/chromedriver ]; then
  echo "==> installing chromium and chromium-driver (apt-get) for the dashboard's browser test" >&2
  if [ "$(id -u)" -ne 0 ]; then
    echo "error: chromium and chromedriver are missing and installing them needs root: run as root, or run 'apt-get install chromium chromium-driver' as root first" >&2
    exit 1
  fi
  if ! command -v apt-get >/dev/null 2>&1; then
    echo "error: chromium and chromedriver are missing and there is no apt-get to install them: install them so that /usr/bin/chromium and /usr/bin/chromedriver exist" >&2
    exit 1
  fi
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver >/dev/null
  echo "==> $(/usr/bin/chromedriver --version)" >&2
fi

# The partial-partition test (actors/tests/processes/partial_partition_processes.rs) drops the packets of
# one link with iptables; it fails, never skips, without it. Install it when missing.
if ! command -v iptables >/dev/null 2>&1; then
  echo "==> installing iptables (apt-get) for the partial-partition test" >&2
  if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null 2>&1; then
    echo "error: iptables is missing and installing it needs root and apt-get: run 'apt-get install iptables' as root first" >&2
    exit 1
  fi
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq iptables >/dev/null
fi

# The deployment files' test (actors/tests/processes/deploy_files.rs) validates the Kubernetes
# manifests with kubernetes-validate (PyPI; it carries the schemas, no network at run time) and
# the systemd unit with `systemd-analyze verify` (Debian's systemd). Install them when missing.
if ! command -v kubernetes-validate >/dev/null 2>&1; then
  echo "==> installing kubernetes-validate (PyPI) for the deployment files' test" >&2
  "$python" -m pip install --quiet kubernetes-validate \
    || "$python" -m pip install --quiet --break-system-packages kubernetes-validate
  # pip may put the script where PATH does not look (a user or pyenv bin directory).
  PATH="$PATH:$("$python" -c 'import sysconfig; print(sysconfig.get_path("scripts"))')"
  export PATH
fi
if ! command -v systemd-analyze >/dev/null 2>&1; then
  echo "==> installing systemd (apt-get) for systemd-analyze verify of the unit" >&2
  if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null 2>&1; then
    echo "error: systemd-analyze is missing and installing it needs root and apt-get: run 'apt-get install systemd' as root first" >&2
    exit 1
  fi
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq systemd >/dev/null
fi
# The DNS discovery test (actors/tests/processes/dns_discovery_processes.rs) serves the cluster's
# name from dnsmasq in a network namespace; it fails, never skips, without it. Install it when
# missing.
if ! command -v dnsmasq >/dev/null 2>&1 && [ ! -x /usr/sbin/dnsmasq ]; then
  echo "==> installing dnsmasq-base (apt-get) for the DNS discovery test" >&2
  if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null 2>&1; then
    echo "error: dnsmasq is missing and installing it needs root and apt-get: run 'apt-get install dnsmasq-base' as root first" >&2
    exit 1
  fi
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq dnsmasq-base >/dev/null
fi

# The deterministic simulator: a sweep of seeds over whole clusters under faults, every
# invariant checked after every step (docs/simulation.md). Each seed forces one strategy family,
# rotating every 7 seeds over the 8 families (`--rotate-forced`: gossip, majority quorum, hot,
# cold, load-balanced, two replicas active-active, two active-passive, partial partitions), and two
# whole rotations make the sweep, 112 seeds: every family runs forced on 14 seeds in every run. About
# 140 s of CPU with the dev build made above, the suite's tail on two cores (200 seeds put a fresh
# clone's run past 8 minutes); longer sweeps are `bash scripts/simulate.sh` with more seeds. A
# failing seed prints the command that replays it, forced flags included.
#
# It runs beside the tests, at the lowest CPU priority: most integration tests wait (on grace
# periods, failure detectors, node processes) more than they compute, and the sweep, in virtual
# time, takes only the CPU they leave; its output is shown once the tests are done.
# Counted from the start of the tests, beside which the sweep only gets the CPU they leave (on a
# machine busy with other work, it took 840 s).
sim_limit="${PROCESS_HUB_SIM_LIMIT_SECS:-1800}"
# The binary the test build above made, with the simulator (rebuilding it for the script alone
# would take minutes: its features differ from the test build's).
sim_bin="${CARGO_TARGET_DIR:-target}/debug/process-hub"
sweep_out="$(mktemp -t process_hub_sweep.XXXXXX.out)"
sweep_err="$(mktemp -t process_hub_sweep.XXXXXX.err)"
lowest=()
lowered=()
if command -v nice >/dev/null 2>&1; then
  lowest=(nice -n 19)
  lowered=(nice -n 5)
fi
limited=()
if command -v timeout >/dev/null 2>&1; then
  limited=(timeout -k 30 "$sim_limit")
fi
echo "==> simulating 112 seeds beside the tests, each family forced in turn (bash scripts/simulate.sh)" >&2
PROCESS_HUB_SIM_BIN="$sim_bin" PROCESS_HUB_SIM_PROFILE=dev ${lowest[@]+"${lowest[@]}"} ${limited[@]+"${limited[@]}"} \
  bash scripts/simulate.sh --seeds 112 --rotate-forced --json >"$sweep_out" 2>"$sweep_err" &
sweep_pid=$!
trap 'kill "$moto_pid" "$sweep_pid" 2>/dev/null || true; wait "$moto_pid" "$sweep_pid" 2>/dev/null || true' EXIT

# Most integration tests wait more than they compute (see above): four at a time keep two cores
# busy where two would leave them idle. RUST_TEST_THREADS, when set, decides.
export RUST_TEST_THREADS="${RUST_TEST_THREADS:-4}"

# A test that hangs (a deadlock) fails the run here, named by the harness's "has been running
# for over 60 seconds" line, instead of holding the machine until an outer limit kills it.
# The whole suite takes a few minutes; the bound is generous.
suite_limit="${PROCESS_HUB_TEST_LIMIT_SECS:-1500}"
suite_limited=()
if command -v timeout >/dev/null 2>&1; then
  suite_limited=(timeout -k 30 "$suite_limit")
fi

# The multi-process tier (actors/tests/processes) waits on real node processes, their failure
# detectors, graces and network faults, far more than it computes, and is the longest binary:
# it runs beside the other tiers, from the executable the build above made, so that the suite
# takes as long as its longest tier rather than their sum. It keeps the CPU first (its tests
# have real timing); the other tiers run at a lower priority (most of their clocks are paused)
# and the sweep at the lowest. Its output is shown once the other tiers are done.
processes_bin=$(cargo test --workspace --all-targets "${features[@]}" --no-run --message-format=json 2>/dev/null \
  | "$python" -c '
import json, sys
for line in sys.stdin:
    m = json.loads(line)
    t = m.get("target", {})
    if m.get("reason") == "compiler-artifact" and t.get("name") == "processes" and "test" in t.get("kind", []) and m.get("executable"):
        print(m["executable"])
')
if [ -z "$processes_bin" ]; then
  echo "error: the build made no executable for the multi-process tests (actors/tests/processes)" >&2
  exit 1
fi
# Every other target the workspace tests (`--all-targets` but the processes tier): read from the
# manifests, so a new test binary is run without being listed here.
other_targets=()
while IFS= read -r arg; do other_targets+=("$arg"); done < <(cargo metadata --no-deps --format-version 1 \
  | "$python" -c '
import json, sys
m = json.load(sys.stdin)
kinds = {"test": "--test", "bench": "--bench"}
seen = set()
for p in m["packages"]:
    for t in p["targets"]:
        for kind, flag in kinds.items():
            if kind in t["kind"] and t["name"] != "processes" and (flag, t["name"]) not in seen:
                seen.add((flag, t["name"]))
                print(flag)
                print(t["name"])
')
processes_out="$(mktemp -t process_hub_processes.XXXXXX.out)"
echo "==> running the multi-process tests beside the rest (limit ${suite_limit}s; output below when done)" >&2
(cd actors && ${suite_limited[@]+"${suite_limited[@]}"} "$processes_bin") >"$processes_out" 2>&1 &
processes_pid=$!
trap 'kill "$moto_pid" "$sweep_pid" "$processes_pid" 2>/dev/null || true; wait "$moto_pid" "$sweep_pid" "$processes_pid" 2>/dev/null || true' EXIT

echo "==> running the other tests (limit ${suite_limit}s)" >&2
status=0
${lowered[@]+"${lowered[@]}"} ${suite_limited[@]+"${suite_limited[@]}"} cargo test --workspace --lib --bins --examples \
  "${other_targets[@]}" "${features[@]}" --no-fail-fast || status=$?
processes_status=0
wait "$processes_pid" || processes_status=$?
echo "==> the multi-process tests (actors/tests/processes)" >&2
cat "$processes_out"
rm -f "$processes_out"
for s in "$status" "$processes_status"; do
  if [ "$s" -eq 124 ] || [ "$s" -eq 137 ]; then
    echo "error: the test suite did not finish within ${suite_limit}s (a test hangs: see the last \"running for over 60 seconds\" line above)" >&2
  fi
done
if [ "$status" -ne 0 ]; then
  exit "$status"
fi
if [ "$processes_status" -ne 0 ]; then
  echo "error: the multi-process tests failed (their output is above)" >&2
  exit "$processes_status"
fi

# The doc tests: `--all-targets` does not run them. They compile every Rust snippet of the
# README, docs/api.md and the rustdoc, so a snippet that no longer compiles fails the run.
doc_limit="${PROCESS_HUB_DOC_LIMIT_SECS:-900}"
echo "==> running the doc tests (limit ${doc_limit}s)" >&2
if command -v timeout >/dev/null 2>&1; then
  status=0
  timeout -k 30 "$doc_limit" cargo test --workspace --doc "${features[@]}" || status=$?
  if [ "$status" -ne 0 ]; then
    if [ "$status" -eq 124 ] || [ "$status" -eq 137 ]; then
      echo "error: the doc tests did not finish within ${doc_limit}s" >&2
    fi
    exit "$status"
  fi
else
  cargo test --workspace --doc "${features[@]}"
fi

# The library and the derive crate would publish: their manifests (versions of every
# dependency, metadata), the files each package holds (`include`), and what crates.io checks. A few
# seconds: the packaged sources are not compiled again (`--no-verify`; the full verification,
# `cargo publish --dry-run -p process_hub -p process_hub_derive`, compiles the library once more
# from its package, about three minutes on two cores).
echo "==> cargo publish --dry-run (process_hub, process_hub_derive)" >&2
cargo publish --dry-run --no-verify --allow-dirty -p process_hub -p process_hub_derive

echo "==> the simulation sweep (started beside the tests)" >&2
status=0
wait "$sweep_pid" || status=$?
cat "$sweep_err" >&2
cat "$sweep_out"
rm -f "$sweep_out" "$sweep_err"
if [ "$status" -eq 124 ] || [ "$status" -eq 137 ]; then
  echo "error: the simulation sweep did not finish within ${sim_limit}s" >&2
fi
exit "$status"
