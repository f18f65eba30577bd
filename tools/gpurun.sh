#!/usr/bin/env bash
# gpurun.sh is the GPU check's runner: tools/gpucheck.sh copies it to .gpu/run.sh beside the
# binaries it runs (cuda.test, verity, gpureport, test2json), packed in .gpu/bin.tar.gz, which
# it unpacks first. On the GPU machine, from the repository root:
#
#   .gpu/run.sh [--deadline SECONDS] [OUTDIR]
#
# The deadline (default: $VERITY_DEADLINE, else 540) is in seconds from the runner's start: every
# phase is given at most the time left before it (less a reserve for the report), a phase that
# cannot have the time it needs is skipped with a line in the summary, and the summary is
# printed last, before the deadline, whatever a phase does. OUTDIR (default $OUT, else
# .gpu/out) receives three files, rewritten after every phase: summary.txt (the table),
# report.json (everything gpureport gathered) and gpucheck.tar.gz (every log and result).
#
# At its start the runner begins generating the bench fixtures in the background (the CPUs
# are idle while the GPU tests run) into .gpu/cache, which every bench reuses; each fixture
# appears whole or not at all. Then each phase runs as a process of its own, so that a kernel
# that faults (which leaves the process unable to use the device) or hangs costs only its
# phase:
#
#   smoke        driver probe, device properties, memory, errors, staging, capture, the
#                timeline, and every module loaded once (the megakernel's last), timed
#   conformance  every kernel against its twin at small shapes (stops at a fault, naming it)
#   goldens      the fixtures' golden hashes, eager
#   forward      whole forward passes against the twin; graphs against eager launches
#   bandwidth    copy and matvec bandwidth, the host link
#   megakernel   the goldens through the megakernel
#   bench-*      verity bench --backend cuda: the design's target first (llama-1b-q4_k_m, an
#                8-node verify after 2048 positions, eager with the per-op profile, then the
#                megakernel), llama-1b-bf16 at that depth (beside PyTorch's), then the cost
#                curves, speculative and batched decoding on the small models and at 128
#   seed001-*    verity bench --protocol seed001 at its full shape (Llama-3.2-1B, bf16, 8-node
#                trees after 2048 positions; weights drawn in memory, no fixture): µs per
#                call, the seed's grade and wrong variants, every node against its path's
#                decoding; the megakernel, then the eager executor
#   torchref     tools/torchref.py: PyTorch on the same model shape and GPU, the peer
#   split        the goldens split across two contexts and across the GPU and the twin
#   real-sizes   every kernel against its twin at real model sizes
#   jit          every module through the driver's JIT, and its bits against the cubins'
#   megakernel-stall  a stream whose wait can never end: the megakernel gives up, traps, and its
#                status words name the block, the instruction and the counter
#   fault        a deliberate illegal address: the fault is reported and sticky
#
# A megakernel bench is skipped when the megakernel phase did not end (a stuck megakernel);
# every later phase is skipped when the test binary dies before its first test in the smoke
# phase (no driver, cuInit failing). The exit status is 0 when every phase that ran passed,
# else 1. VERITY_BENCH=0 skips the benches, VERITY_TORCHREF=0 the peer; VERITY_PYTHON names
# the Python to run the peer with (default python3). VERITY_TIME_DIVISOR=N divides every
# phase's limit and the runner's own margins by N (the dry-run tests, with stand-in binaries).
set -uo pipefail
export LC_ALL=C

usage() {
	echo "usage: run.sh [--deadline SECONDS] [OUTDIR]" >&2
	exit 2
}
deadline=${VERITY_DEADLINE:-540}
outdir=
while [ $# -gt 0 ]; do
	case $1 in
	--deadline)
		[ $# -ge 2 ] || usage
		deadline=$2
		shift 2
		;;
	--deadline=*)
		deadline=${1#*=}
		shift
		;;
	-*) usage ;;
	*)
		[ -z "$outdir" ] || usage
		outdir=$1
		shift
		;;
	esac
done
case $deadline in
'' | *[!0-9]*)
	echo "run.sh: deadline $deadline: want whole seconds" >&2
	exit 2
	;;
esac

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
out=${outdir:-${OUT:-$here/out}}
work=$here/work  # everything the check writes; published to $out after every phase
cache=$here/cache # the bench fixtures, kept between calls on the same machine
div=${VERITY_TIME_DIVISOR:-1}
sc() { echo $((($1 + div - 1) / div)); } # a time in seconds, divided (rounded up)
reserve=$(sc 15)  # seconds kept for the last report (at least 4: starting gpureport and tar on a busy machine)
[ "$reserve" -ge 4 ] || reserve=4
kill_after=$(sc 5)
margin=$(sc 10)   # seconds kept for the kills a timeout sends: its TERM at the limit, KILL kill_after later
[ "$margin" -ge $((2 * kill_after)) ] || margin=$((2 * kill_after))
t0=$EPOCHREALTIME

if [ -f "$here/bin.tar.gz" ]; then
	tar -xzf "$here/bin.tar.gz" -C "$here" || {
		echo "run.sh: cannot unpack $here/bin.tar.gz" >&2
		exit 1
	}
fi
mkdir -p "$out" "$cache" || exit 1
rm -rf "$work"
mkdir -p "$work" || exit 1
: >"$work/phases.jsonl"
: >"$work/cuda.json"
: >"$work/cuda.log"
: >"$work/results.jsonl"
: >"$work/fixtures.jsonl"
echo "$deadline" >"$work/deadline"

# now_us sets us to the microseconds since the runner started and left_s to the whole seconds
# left before the report, without a subshell: the skips of a run out of time must cost
# nothing (a fork each is a measurable share of the report's reserve on a busy machine).
now_us() {
	local n=${EPOCHREALTIME/./} s=${t0/./}
	us=$((10#$n - 10#$s))
	left_s=$((deadline - (us + 999999) / 1000000 - reserve))
}
# usec prints microseconds since the runner started; elapsed, whole seconds begun.
usec() {
	now_us
	echo $us
}
elapsed() { echo $((($(usec) + 999999) / 1000000)); }
# secs_to VAR US sets VAR to US microseconds as seconds with one decimal (no subshell);
# secs US prints them.
secs_to() { printf -v "$1" '%d.%d' $(($2 / 1000000)) $((($2 % 1000000) / 100000)); }
secs() {
	local s
	secs_to s "$1"
	echo "$s"
}
left() {
	now_us
	echo $left_s
}

# The driver's library may live outside the loader's search path (e.g. /usr/local/nvidia).
if ! ldconfig -p 2>/dev/null | grep 'libcuda\.so\.1' >/dev/null; then
	for d in /usr/local/nvidia/lib64 /usr/local/nvidia/lib /usr/lib/x86_64-linux-gnu/nvidia; do
		[ -e "$d/libcuda.so.1" ] && export LD_LIBRARY_PATH="$d${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
	done
fi
# Modules without a cubin for this GPU are JIT-compiled; the driver's compute cache makes
# every compilation after the first (the smoke phase's) a lookup.
export CUDA_CACHE_PATH=${CUDA_CACHE_PATH:-$here/jitcache} CUDA_CACHE_MAXSIZE=${CUDA_CACHE_MAXSIZE:-1073741824}
export VERITY_CUDA_TRACE=1 VERITY_CACHE=$cache

# --- the background fixture generation ---
gen_pid=
gen_fixtures() {
	local f s rc
	for f in "$@"; do
		s=$(usec)
		nice -n 10 "$here/verity" fixture "$f" >"$work/gen-$f.log" 2>&1 &
		echo $! >"$work/gen.pid"
		wait $!
		rc=$?
		if [ $rc = 0 ]; then touch "$work/gen-$f.ok"; else touch "$work/gen-$f.failed"; fi
		printf '{"fixture":"%s","exit":%d,"seconds":%s,"started_s":%s}\n' "$f" $rc "$(secs $(($(usec) - s)))" "$(secs "$s")" >>"$work/fixtures.jsonl"
	done
	rm -f "$work/gen.pid"
}
if [ "${VERITY_BENCH:-1}" != 0 ]; then
	gen_fixtures llama-1b-q4_k_m small-llama-q4_k_m small-q35moe-q4_k_m llama-1b-bf16 &
	gen_pid=$!
fi

# --- publishing ---
publish() {
	local rc=0
	"$here/gpureport" -dir "$work" -wall "$(secs "$(usec)")" -deadline "$deadline" >"$work/summary.tmp" 2>"$work/gpureport.err" || rc=$?
	if [ $rc != 0 ] || [ ! -s "$work/summary.tmp" ]; then
		{
			echo "== GPU check: gpureport failed (exit $rc) after $(secs "$(usec)") s:"
			tail -n 20 "$work/gpureport.err"
			echo "phases:"
			cat "$work/phases.jsonl"
		} >"$work/summary.tmp"
	fi
	mv "$work/summary.tmp" "$work/summary.txt"
	[ "$(cd "$out" && pwd)" = "$work" ] && return
	cp "$work/summary.txt" "$out/.summary.tmp" && mv "$out/.summary.tmp" "$out/summary.txt"
	[ -f "$work/report.json" ] && cp "$work/report.json" "$out/.report.tmp" && mv "$out/.report.tmp" "$out/report.json"
	tar -czf "$out/.gpucheck.tmp" -C "$work" . 2>/dev/null
	# The device tool returns files of at most 16 MiB: leave the test2json events out if need be.
	if [ "$(stat -c %s "$out/.gpucheck.tmp" 2>/dev/null || echo 0)" -gt $((15 << 20)) ]; then
		tar -czf "$out/.gpucheck.tmp" -C "$work" --exclude=cuda.json --exclude='*.raw' . 2>/dev/null
	fi
	mv "$out/.gpucheck.tmp" "$out/gpucheck.tar.gz"
}

# --- the end, however it comes ---
cur=
stop_children() {
	[ -n "$cur" ] && kill -TERM "$cur" 2>/dev/null
	if [ -n "$gen_pid" ]; then
		[ -f "$work/gen.pid" ] && kill -TERM "$(cat "$work/gen.pid")" 2>/dev/null
		kill -TERM "$gen_pid" 2>/dev/null
	fi
	wait 2>/dev/null
}
finish() {
	stop_children
	publish
	echo
	cat "$work/summary.txt"
	echo "(files: $out/summary.txt, report.json, gpucheck.tar.gz)"
}
trap 'echo "run.sh: stopped by a signal after $(elapsed) s" >>"$work/notes.txt"; finish; exit 143' TERM INT HUP

# phase_line NAME KIND STATUS RC WALL_US LIMIT START_US REASON: one line of phases.jsonl (the
# reason's quotes, backslashes and control characters made harmless to JSON).
phase_line() {
	local why=${8:-}
	why=${why//\\//}
	why=${why//\"/\'}
	why=${why//[$'\001'-$'\037']/}
	local wall started
	secs_to wall "$5"
	secs_to started "${7:-0}"
	printf '{"name":"%s","kind":"%s","status":"%s","exit":%d,"wall_s":%s,"limit_s":%d,"started_s":%s,"reason":"%s"}\n' \
		"$1" "$2" "$3" "$4" "$wall" "$6" "$started" "$why" >>"$work/phases.jsonl"
}
skip() { # NAME KIND REASON
	echo "== $1: skipped: $3"
	now_us
	phase_line "$1" "$2" skipped 0 0 0 "$us" "$3"
}

# budget NAME KIND LIMIT MIN: sets lim to the seconds the phase may take (its limit, or less
# when the deadline is near, at least MIN), or skips the phase and fails. A margin is kept for
# the kills a timeout sends.
lim=0
budget() {
	now_us
	local avail=$((left_s - margin))
	if [ "$avail" -lt "$4" ]; then
		skip "$1" "$2" "deadline: $left_s s left before the report, the phase needs $4"
		return 1
	fi
	lim=$((avail < $3 ? avail : $3))
}

# in_dir DIR CMD...: CMD, run in DIR (for run_bg).
in_dir() {
	cd "$1" || exit 1
	shift
	exec "$@"
}

# run_bg LOG CMD...: runs CMD in the background with its output in LOG and waits for it, so
# that a signal reaches the trap at once; prints nothing, returns CMD's status.
run_bg() {
	local log=$1
	shift
	"$@" >"$log" 2>&1 &
	cur=$!
	wait $cur
	local rc=$?
	cur=
	return $rc
}

failed=0
dead= # set when the test binary died before its first test: nothing on the device will run

# test_phase NAME LIMIT PATTERN [ENV=VALUE... --] [FLAGS...]: one process of cuda.test.
test_phase() {
	local name=$1 limit pattern=$3
	limit=$(sc "$2")
	shift 3
	local envs=()
	while [ $# -gt 0 ] && [[ $1 == *=* ]]; do
		envs+=("$1")
		shift
	done
	if [ -n "$dead" ]; then
		skip "$name" test "$dead"
		return
	fi
	budget "$name" test "$limit" "$(sc 20)" || return
	echo "== $name: cuda.test -test.run '$pattern' (at most $lim s; $(elapsed) s gone)"
	local s rc
	s=$(usec)
	run_bg "$work/$name.raw" in_dir "$repo/device/cuda" env VERITY_RESULTS="$work/results.jsonl" "${envs[@]}" \
		timeout -k "$kill_after" $((lim + kill_after)) "$here/cuda.test" -test.v=test2json -test.run="$pattern" -test.timeout="${lim}s" \
		-test.count=1 -goldens="$repo/fixtures/testdata/goldens.json" "$@"
	rc=$?
	local wall=$(($(usec) - s)) status=pass
	"$here/test2json" -t -p "$name" <"$work/$name.raw" >>"$work/cuda.json" 2>/dev/null
	tr -d '\026' <"$work/$name.raw" >"$work/$name.log"
	rm -f "$work/$name.raw"
	[ $rc = 0 ] || status=fail
	grep -q '^panic: test timed out' "$work/$name.log" && status=timeout
	[ $rc = 124 ] || [ $rc = 137 ] && status=killed
	[ $rc = 0 ] || failed=1
	{
		echo "== phase $name: exit $rc after $(secs $wall) s"
		cat "$work/$name.log"
	} >>"$work/cuda.log"
	phase_line "$name" test "$status" $rc $wall "$lim" "$s" ""
	if [ "$name" = smoke ] && ! grep -q '^=== RUN' "$work/$name.log"; then
		dead="the test binary died before its first test in the smoke phase (exit $rc)"
	fi
	grep -E '^\s*--- FAIL|^panic: |^FAIL$' "$work/$name.log" | sed -n 1,12p || true
	echo "== $name: exit $rc in $(secs $wall) s"
	publish
}

# wait_fixture NAME LIMIT: waits for the background generation of fixture NAME; fails when it
# failed, stopped, or would leave the bench less than LIMIT seconds.
wait_fixture() {
	local f=$1 limit=$2
	while :; do
		[ -e "$work/gen-$f.ok" ] && return 0
		[ -e "$work/gen-$f.failed" ] && {
			why="generating $f failed: $(tail -n 1 "$work/gen-$f.log" 2>/dev/null)"
			return 1
		}
		[ -n "$gen_pid" ] && kill -0 "$gen_pid" 2>/dev/null || {
			why="the generation of $f is not running"
			return 1
		}
		[ $(($(left) - margin)) -ge "$limit" ] || {
			why="deadline: $(left) s left while $f was still being generated, the bench needs $limit"
			return 1
		}
		sleep 1
	done
}

# bench_phase NAME LIMIT FIXTURES -- ARGS...: verity bench on the GPU, after its fixtures
# (comma-separated) exist. A bench must have its whole limit: it prints nothing until it ends.
bench_phase() {
	local name=$1 limit fixtures=$3
	limit=$(sc "$2")
	shift 4
	if [ "${VERITY_BENCH:-1}" = 0 ]; then
		skip "$name" bench "VERITY_BENCH=0"
		return
	fi
	if [ -n "$dead" ]; then
		skip "$name" bench "$dead"
		return
	fi
	if [[ " $* " == *" --megakernel "* ]] && [ -n "$mk_bad" ]; then
		skip "$name" bench "$mk_bad"
		return
	fi
	local f why=
	for f in ${fixtures//,/ }; do
		if ! wait_fixture "$f" "$limit"; then
			skip "$name" bench "$why"
			return
		fi
	done
	budget "$name" bench "$limit" "$limit" || return
	echo "== $name: verity bench --backend cuda $* (at most $lim s; $(elapsed) s gone)"
	local s rc
	s=$(usec)
	run_bg "$work/$name.txt" timeout -k "$kill_after" "$lim" "$here/verity" bench --backend cuda "$@" --json-out "$work/$name.json"
	rc=$?
	local wall=$(($(usec) - s)) status=pass
	[ $rc = 0 ] || status=fail
	[ $rc = 124 ] || [ $rc = 137 ] && status=killed
	[ $rc = 0 ] || failed=1
	phase_line "$name" bench "$status" $rc $wall "$lim" "$s" ""
	tail -n 3 "$work/$name.txt"
	echo "== $name: exit $rc in $(secs $wall) s"
	publish
}

# peer_phase NAME LIMIT: PyTorch on the same GPU (tools/torchref.py).
peer_phase() {
	local name=$1 limit
	limit=$(sc "$2")
	if [ "${VERITY_TORCHREF:-1}" = 0 ]; then
		skip "$name" peer "VERITY_TORCHREF=0"
		return
	fi
	budget "$name" peer "$limit" "$(sc 30)" || return
	echo "== $name: ${VERITY_PYTHON:-python3} tools/torchref.py (at most $lim s; $(elapsed) s gone)"
	local s rc
	s=$(usec)
	run_bg "$work/$name.log" env PYTHONUNBUFFERED=1 timeout -k "$kill_after" "$lim" "${VERITY_PYTHON:-python3}" "$repo/tools/torchref.py" \
		--out "$work/torchref.json" --deadline $((lim - margin))
	rc=$?
	local wall=$(($(usec) - s)) status=pass
	[ $rc = 0 ] || status=fail
	[ $rc = 3 ] && status=unavailable
	[ $rc = 124 ] || [ $rc = 137 ] && status=killed
	[ $rc = 0 ] || [ $rc = 3 ] || failed=1
	phase_line "$name" peer "$status" $rc $wall "$lim" "$s" ""
	tail -n 2 "$work/$name.log" | cut -c1-200
	echo "== $name: exit $rc in $(secs $wall) s"
	publish
}

# --- the probe ---
{
	echo "== host: $(uname -srm); $(ldd --version 2>&1 | sed -n 1p); $(nproc) CPUs; deadline ${deadline} s"
	echo "== libcuda:"
	ldconfig -p 2>/dev/null | grep -E 'libcuda\.so' || echo "(libcuda.so.1 not in the loader cache; LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-})"
	echo "== nvidia-smi:"
	if command -v nvidia-smi >/dev/null; then
		timeout 20 nvidia-smi --query-gpu=name,driver_version,compute_cap,memory.total,memory.used,clocks.sm,clocks.max.sm,clocks.max.mem,temperature.gpu,power.draw --format=csv 2>&1 ||
			timeout 20 nvidia-smi 2>&1
	else
		echo "(nvidia-smi not found)"
	fi
	echo "== python: $(${VERITY_PYTHON:-python3} --version 2>&1)"
} 2>&1 | tee "$work/probe.txt"

# --- the phases, most important first ---
mk_bad=
test_phase smoke 45 '^(TestProbe|TestInfo|TestOpenBadOrdinal|TestMemory|TestDriverErrorNames|TestSharedMemoryOptIn|TestStagedTransfers|TestCaptureRefusesOtherCalls|TestTimeline|TestModules)$'
test_phase conformance 60 '^TestConformance$'
test_phase goldens 60 '^TestGoldens$'
test_phase forward 45 '^(TestForwardMatchesTwin|TestGraphMatchesEager)$'
test_phase bandwidth 60 '^(TestBandwidth|TestHostTransfer)$'
test_phase megakernel 60 '^TestMegakernelGoldens$'
if ! grep -q '"name":"megakernel","kind":"test","status":"\(pass\|fail\)"' "$work/phases.jsonl"; then
	mk_bad="the megakernel phase did not run to its end"
fi
# cheap, and in a process of its own: the megakernel's give-up (its trap ends only that process)
test_phase megakernel-stall 20 '^TestMegakernelGivesUp$' VERITY_MEGAKERNEL_STALL=1
bench_phase seed001-megakernel 100 "" -- --protocol seed001 --megakernel --calls 4
bench_phase bench-target 90 llama-1b-q4_k_m -- --model llama-1b-q4_k_m --prompt 2048 --ops 16
bench_phase bench-target-megakernel 60 llama-1b-q4_k_m -- --megakernel --model llama-1b-q4_k_m --prompt 2048
peer_phase torchref 75
bench_phase bench-bf16 60 llama-1b-bf16 -- --model llama-1b-bf16 --prompt 2048 -r 2
bench_phase bench-bf16-megakernel 45 llama-1b-bf16 -- --megakernel --model llama-1b-bf16 --prompt 2048 -r 2
bench_phase seed001 100 "" -- --protocol seed001 --calls 2
test_phase jit 60 '^TestJIT$' CUDA_CACHE_DISABLE=1
bench_phase bench-1b 75 llama-1b-q4_k_m -- --model llama-1b-q4_k_m --widths 1,2,4,8,16,32,64 --spec 0.9,0.8,0.7,0.6,0.5 --batch 1,8,64
bench_phase bench-small 60 small-llama-q4_k_m,small-q35moe-q4_k_m -- --model small-llama-q4_k_m --model small-q35moe-q4_k_m \
	--widths 1,8,64 --ops 16 --spec 0.9,0.8,0.7 --batch 1,8
bench_phase bench-small-megakernel 45 small-llama-q4_k_m -- --megakernel --model small-llama-q4_k_m --widths 1,8,64
test_phase split 75 '^TestGoldensSplit$'
test_phase real-sizes 90 '^TestConformanceRealSizes$'
test_phase fault 20 '^TestFaultIsSticky$' -fault

finish
exit $failed
