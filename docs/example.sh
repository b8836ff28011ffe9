#!/usr/bin/env bash
# The README's example table and figures: four simulated protocols on two benchmarks,
# three seeded runs each. MATH500 comes from $MAD_EVAL_DATA when set, else the hub.
set -euo pipefail
cd "$(dirname "$0")/.."
mad_eval=${MAD_EVAL:-.venv/bin/mad-eval}
out=results/example
for benchmark in arith math500; do
  for protocol in decentralized sparse centralized reflection; do
    "$mad_eval" run --protocol "$protocol" --benchmark "$benchmark" --limit 100 --runs 3 \
      --out "$out/$benchmark-$protocol" >/dev/null
  done
done
runs=()
for benchmark in arith math500; do
  for protocol in decentralized sparse centralized reflection; do
    runs+=("$out/$benchmark-$protocol")
  done
done
"$mad_eval" table "${runs[@]}" --format md
"$mad_eval" plot "${runs[@]}" --out docs
