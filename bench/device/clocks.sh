#!/usr/bin/env bash
# Runs ON the device machine: samples the GPU's SM and memory clocks, power and clock-event reasons every 100 ms
# while a command runs, into $CLOCKS (default $OUT/clocks.csv), and prints how the SM clock stood.
#   bash bench/device/clocks.sh bash bench/device/remote.sh node dist/bench/run.js --sections engine
# Why: the H200 idles at 345 MHz and raises its SM clock to 1,980 MHz only while it is kept busy; a short burst
# of GPU work measured between pauses can run at the idle clock, and memory-bound kernels then read at about a
# third of the bandwidth (session 12, run C: a plain read of 32 MB took 10 µs at 1,980 MHz and 27 µs otherwise).
# Figures taken without knowing the clock do not compare.
set -uo pipefail
out="${CLOCKS:-${OUT:-/tmp}/clocks.csv}"
if ! command -v nvidia-smi >/dev/null; then
  echo "clocks.sh: no nvidia-smi here; running without clock samples" >&2
  exec "$@"
fi
nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,clocks_event_reasons.active \
  --format=csv,noheader,nounits -lms 100 > "$out" 2>/dev/null &
smi=$!
"$@"
rc=$?
kill "$smi" 2>/dev/null
wait "$smi" 2>/dev/null
# Summary: samples, the SM clock's quartiles, the share at the top SM clock seen, the most power drawn.
n=$(grep -c . "$out")
if ((n == 0)); then
  echo "clocks.sh: no samples in $out" >&2
else
  sm=$(cut -d, -f2 "$out" | tr -d ' ' | sort -n)
  q() { echo "$sm" | sed -n "$(( $1 * n / 4 + 1 ))p"; }
  top=$(echo "$sm" | tail -1)
  hi=$(echo "$sm" | awk -v t="$top" '$1 >= t - 30' | grep -c .)
  pw=$(cut -d, -f4 "$out" | tr -d ' ' | sort -n | tail -1)
  echo "clocks.sh: $n samples in $out; SM clock quartiles $(q 1) / $(q 2) / $(q 3) MHz, top $top MHz in $((100 * hi / n))% of samples; max power $pw W" >&2
fi
exit $rc
