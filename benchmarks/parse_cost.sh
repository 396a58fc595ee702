#!/bin/bash
# Instructions per listed object in the inventory process (benchmarks/parse_cost.py):
# callgrind over the lists and the first build only, N objects minus 0, over N.
#   benchmarks/parse_cost.sh CHECKOUT DIR_N N DIR_0 [KIND...]
set -euo pipefail
checkout=$1 many=$2 n=$3 none=$4
shift 4
kinds=${*:-node nrt numatopology pod}
count() {  # DIR KIND -> instructions
    local out fifo pid
    out=$(mktemp) fifo=$(mktemp -u)
    mkfifo "$fifo"
    valgrind --tool=callgrind --instr-atstart=no --callgrind-out-file="$out" \
        "$checkout/.venv/bin/python" "$checkout/benchmarks/parse_cost.py" run "$1" --kind "$2" --hold \
        < "$fifo" > "$out.log" 2>&1 &
    pid=$!
    exec 3> "$fifo"
    until grep -q holding "$out.log"; do sleep 0.5; done
    callgrind_control -i on "$pid" > /dev/null 2>&1
    echo >&3
    exec 3>&-
    wait "$pid"
    grep -E '^(summary|totals):' "$out" | head -1 | awk '{print $2}'
    rm -f "$out" "$out.log" "$fifo"
}
for kind in $kinds; do
    base=$(count "$none" "$kind")
    all=$(count "$many" "$kind")
    echo "$kind $(( (all - base) / n )) instructions per object ($all - $base over $n)"
done
