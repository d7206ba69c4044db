#!/usr/bin/env bash
# Runs the deterministic simulator (process_hub::sim) through `process-hub simulate`.
#
#   bash scripts/simulate.sh --seeds N [--from S] [--json]   a sweep; the last line is its JSON
#   bash scripts/simulate.sh --seed S --trace                 one seed's trace, then trace_hash=<hex>
#   bash scripts/simulate.sh --seeds N --rotate-forced        each seed forces one strategy family
#   bash scripts/simulate.sh --every-family --seeds 500       every family forced on every seed,
#                                                             one sweep per family
#
# Builds the binary with the simulator (the `sim` feature of process_hub_actors: the shipped
# binary leaves this test-only code out), in release unless PROCESS_HUB_SIM_PROFILE=dev (the test
# script's choice). PROCESS_HUB_SIM_BIN names a binary already built with the simulator instead
# (the test script passes the one its test build made, which would otherwise be rebuilt with
# other features). Every flag is passed to `process-hub simulate` (see its --help).
set -euo pipefail
cd "$(dirname "$0")/.."
profile="${PROCESS_HUB_SIM_PROFILE:-release}"
if [ -n "${PROCESS_HUB_SIM_BIN:-}" ]; then
  bin="$PROCESS_HUB_SIM_BIN"
elif [ "$profile" = "dev" ]; then
  cargo build --quiet -p process_hub_actors --bin process-hub --features sim >&2
  bin=target/debug/process-hub
else
  cargo build --quiet --release -p process_hub_actors --bin process-hub --features sim >&2
  bin=target/release/process-hub
fi
exec "$bin" simulate "$@"
