#!/bin/bash
# The H200 figures of docs/BENCHMARKS.md and docs/VARIANTS.md and the GPU suite, one step a call,
# on a machine whose python lacks what uv.lock brings: the wheels travel as shared/device/README.md
# says (.whl, and the CuTe DSL, FA4 and FlashInfer cut into .big1 .. .big4 by big-wheels.sh and
# copied to /tmp/big one call each first). Each step runs exactly the commit packed by
#   git archive --format=tar.gz HEAD -o h200-head.tgz
# (so a working tree being edited does not change what is measured) and leaves its output under $OUT:
#   install [quick]  join the parts, install into /tmp/site (FlashInfer apart in /tmp/fi: its kernels compile
#            on first use), env, first frame and its profile, a smoke check of the GPU paths
#   suite    the whole GPU suite in one process, in the background (setsid: it outlives the call), and
#            FlashInfer's kernels compiled beside it (that loop's figures are then not kernel times)
#   wait [S] wait up to S seconds (default 560) for the suite; its log so far
#   sweep [S] the llama3-8b-prefill sweep over s with FA4, FLASH and Flex (docs/sweep-h200.svg)
#   readme   the README's commands as written, each timed
#   bundles [S] a hunt of S seconds (default 90), each bundle's repro.py run from its folder
#   subset K the GPU tests matching -k K
#   check    check --peers fa4,flash,flex --json, its peers table, then the variants probe in the time left
#   findings the hunt's findings' reproduction scripts, each run in a fresh process (finding_scripts.py)
#   hunt     two 6-minute hunts at once (seeds 1 and 2), their bundles packed into hunts.tgz
#   fi       FlashInfer's independent loop beside the tool's --peers flashinfer
#   dropout  whose the one-query dropout mismatch is (benchmarks/dropout_probe.py)
#   probe    the hunt's classes still unaccounted for, with fp64 and the peers (benchmarks/hunt_probe.py)
#   whose    softcap's cap, the sink's determinism and dSink under dropout taken apart (whose_probe.py),
#            and the FP8 THD paged cases of the probe again
#   frame    the first frame again (after a change to the launch)
set -u
step=$1
ROOT=$PWD
export T0=${T0:-$(date +%s)}
# unpacked once per archive: the suite running in the background reads it while later steps run
stamp=$(md5sum h200-head.tgz | cut -c1-32)
if [ "$(cat /tmp/proj/.stamp 2>/dev/null)" != "$stamp" ]; then
  [ -e /tmp/suite.pid ] && [ ! -e /tmp/suite.done ] && { echo "the suite runs from /tmp/proj: not replaced"; exit 3; }
  rm -rf /tmp/proj && mkdir -p /tmp/proj && tar xzf h200-head.tgz -C /tmp/proj && echo "$stamp" > /tmp/proj/.stamp
fi
export PYTHONPATH=/tmp/site:/tmp/site/nvidia_cutlass_dsl/dsl_packages:/tmp/proj
export PATH=/tmp/site/bin:$PATH PYTHONUNBUFFERED=1
unset PYTHONDONTWRITEBYTECODE  # the H200 sets it: each launch would compile every module again
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
cd /tmp/proj
case $step in
install)
  (cd /tmp/big && for p in *.part.00; do w=${p%.part.00}; cat "$w".part.* > "$w" && rm "$w".part.*; done)
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
    "$ROOT"/.whl/*.whl $(ls /tmp/big/*.whl | grep -v flashinfer) 2>&1 | grep -v WARN | tail -3
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/fi /tmp/big/flashinfer*.whl 2>&1 | grep -v WARN | tail -3
  # the H200's python runs with PYTHONDONTWRITEBYTECODE=1, so with --no-compile every launch compiled
  # every module again (first frame 1.19-1.56 s); compiled once, as pip and uv installs leave them
  python3 -m compileall -q -j 8 /tmp/site /tmp/proj > /dev/null 2>&1
  python3 -c "import cutlass, flash_attn.cute; print('CuTe DSL and FA4 import')"
  python3 -m tui env 2>&1 | tee "$OUT"/env.txt | tail -20
  [ "${2:-}" = quick ] && exit 0  # the wheels only: no first frame, no smoke
  python3 -m benchmarks.first_paint --repeat 5 -- python3 -m tui 2>&1 | tee "$OUT"/frame.txt | tail -4
  python3 -m benchmarks.first_paint --profile "$OUT"/frame.prof --sort tottime 2>&1 | head -45 > "$OUT"/frame_profile.txt
  python3 -m benchmarks.first_paint --profile "$OUT"/frame_cum.prof --sort cumulative 2>&1 | head -60 > "$OUT"/frame_cum.txt
  python3 -X importtime -c "import tui.app.app" 2> "$OUT"/importtime.txt; sort -t'|' -k2 -n "$OUT"/importtime.txt | tail -25
  ( time timeout 150 python3 -m tui check --no-history --replays 5 --preset gpt2-dropout --preset llama3-8b-decode \
      --preset llama3-8b-train --preset paligemma-prefix-lm ) > "$OUT"/smoke.txt 2>&1; echo "smoke rc=$?"; tail -12 "$OUT"/smoke.txt ;;
suite)
  rm -f /tmp/suite.done; echo $$ > /tmp/suite.pid
  PYTHONPATH=/tmp/fi:$PYTHONPATH setsid bash -c 'cd /tmp/proj && timeout 1500 python3 -m pytest -n 0 -m gpu -q -rfEs --durations=40 \
      -p no:cacheprovider tests > /tmp/suite.log 2>&1; echo "rc=$?" >> /tmp/suite.log; touch /tmp/suite.done' \
      < /dev/null > /dev/null 2>&1 &
  PYTHONPATH=/tmp/fi:$PYTHONPATH setsid timeout 900 python3 -m benchmarks.flashinfer_loop --calls 30 --no-tool \
      < /dev/null > /tmp/fi_warm.txt 2>&1 &
  sleep 20; tail -3 /tmp/suite.log ;;
wait)
  end=$((SECONDS + ${2:-560})); while [ ! -e /tmp/suite.done ] && [ $SECONDS -lt $end ]; do sleep 5; done
  cp /tmp/suite.log "$OUT"/suite.txt; cp /tmp/fi_warm.txt "$OUT"/ 2>/dev/null; tail -70 /tmp/suite.log
  [ -e /tmp/suite.done ] && echo "SUITE DONE" || echo "suite still running" ;;
frame)
  python3 -m benchmarks.first_paint --repeat 5 -- python3 -m tui 2>&1 | tee "$OUT"/frame.txt | tail -4 ;;
sweep)
  # the chart of docs/sweep-h200.svg: rows written as each point ends (so a cut run keeps its points),
  # drawn here by `merge --plot` (matplotlib is not on the H200)
  ( time timeout ${2:-400} python3 -m tui sweep --preset llama3-8b-prefill --vary s=1024,2048,4096,8192,16384,32768 \
      --autotune --peers fa4,flash,flex --no-history --out "$OUT"/sweep_h200.jsonl ) > "$OUT"/sweep.txt 2>&1
  tail -14 "$OUT"/sweep.txt ;;
readme)
  # the README's commands as written (`python3 -m tui` for `uv run sdpa-explorer`), each timed
  for c in "run --b 1 --s 256" "run --b 2 --h-q 32 --h-kv 8 --s 4096 --d 128 --dtype bf16" \
      "run --preset llama3-8b-decode --peers all" "check" "sweep --vary s=1024..16384x2 --out s.jsonl" "explain --d 65"; do
    echo "\$ python3 -m tui $c"; { time timeout 200 python3 -m tui $c; echo "rc=$?"; } 2>&1 | grep -v -e nanobind -e '^ - leaked' -e '^ - \.\.\. skipped'
  done > "$OUT"/readme.txt; cp s.jsonl "$OUT"/readme_s.jsonl; grep -E '^\$|^rc=|^real' "$OUT"/readme.txt ;;
bundles)
  # a short hunt, then each bundle's repro.py run from its own folder in a fresh process
  ( time timeout $((${2:-90} + 60)) python3 -m tui hunt --budget ${2:-90}s --seed 1 --out "$OUT"/bundles ) > "$OUT"/bundles.txt 2>&1
  for b in "$OUT"/bundles/*/; do [ -e "$b"repro.py ] || continue
    (cd "$b" && PYTHONPATH=/tmp/site:/tmp/site/nvidia_cutlass_dsl/dsl_packages timeout 120 python3 repro.py > ran.txt 2>&1; echo "$(basename "$b") rc=$? $(grep RESULT ran.txt | cut -c1-200)")
  done | tee -a "$OUT"/bundles.txt; tail -25 "$OUT"/bundles.txt ;;
subset)
  # the GPU tests of what changed since the last whole suite ($2: a pytest -k expression)
  PYTHONPATH=/tmp/fi:$PYTHONPATH timeout 300 python3 -m pytest -n 0 -m gpu -q -rfE -p no:cacheprovider tests -k "$2" \
    2>&1 | grep -v -e nanobind -e '^ - leaked' -e '^ - \.\.\. skipped' | tee "$OUT"/subset.txt | tail -8 ;;
findings) timeout 500 python3 -m benchmarks.finding_scripts --out "$OUT"/findings 2>&1 | tee "$OUT"/findings.txt ;;
check)
  ( time timeout 400 python3 -m tui check --peers fa4,flash,flex --json --no-history > "$OUT"/check.json ) 2> "$OUT"/check.err
  tail -4 "$OUT"/check.err; python3 -m benchmarks.peers_table "$OUT"/check.json | tee "$OUT"/peers_table.md | tail -40
  left=$((565 - $(date +%s) + T0))
  timeout $left python3 -m benchmarks.variants_probe --json "$OUT"/variants.json > "$OUT"/variants.md 2> "$OUT"/variants.err
  tail -20 "$OUT"/variants.md ;;
hunt)
  (PYTHONPATH=/tmp/fi:$PYTHONPATH timeout 500 python3 -m benchmarks.flashinfer_loop --calls 30 --no-tool > "$OUT"/fi_warm.txt 2>&1) &
  for seed in 1 2; do
    (s0=$SECONDS; python3 -m tui hunt --budget 6m --seed $seed --out "$OUT"/hunt$seed > "$OUT"/hunt$seed.txt 2> "$OUT"/hunt$seed.err
     echo "rc=$? wall $((SECONDS - s0)) s" >> "$OUT"/hunt$seed.err) &
  done
  wait
  tar czf "$OUT"/hunts.tgz -C "$OUT" hunt1 hunt2 && rm -rf "$OUT"/hunt1 "$OUT"/hunt2
  cat "$OUT"/hunt1.txt "$OUT"/hunt2.txt; tail -2 "$OUT"/hunt1.err "$OUT"/hunt2.err ;;
whose)
  timeout 300 python3 -m benchmarks.whose_probe 2>&1 | tee "$OUT"/whose.txt | grep -v leaked
  timeout 200 python3 -m benchmarks.hunt_probe --only "fp8 THD paged2" --only "fp8 d16 THD paged2" 2>&1 \
    | tee "$OUT"/thd_paged.txt | grep -v leaked ;;
probe) timeout 400 python3 -m benchmarks.hunt_probe 2>&1 | tee "$OUT"/hunt_probe.txt | grep -v leaked ;;
dropout) timeout 300 python3 -m benchmarks.dropout_probe 2>&1 | tee "$OUT"/dropout.txt | grep -v leaked ;;
fi) PYTHONPATH=/tmp/fi:$PYTHONPATH timeout 500 python3 -m benchmarks.flashinfer_loop --calls 30 2>&1 | tee "$OUT"/fi.txt | tail -20 ;;
*) echo "steps: install suite wait sweep readme bundles subset check findings hunt fi frame dropout probe whose"; exit 2 ;;
esac
