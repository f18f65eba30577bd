#!/usr/bin/env bash
# gpucheck.sh prepares a GPU check for a machine that has a CUDA driver and a GPU but no Go.
# Here (with Go and the toolchain tools/cudaenv.sh installs) it builds into .gpu/ (git-ignored):
#
#   .gpu/cuda.test   go test -c -tags cuda ./device/cuda: the CUDA backend's tests (driver
#                    probe, memory, staging, graphs, every kernel against its CPU twin at small
#                    and real model sizes, whole forward passes, the fixtures' golden hashes)
#                    and its measurements (copy and matvec bandwidth, host link, launch overhead)
#   .gpu/test2json   Go's test2json, to turn the test output into JSON there
#   .gpu/gpureport   tools/gpureport: builds report.json and the summary table
#   .gpu/verity      the CLI built with the cuda tag: whole-model benchmarks on the GPU
#   .gpu/run.sh      the runner
#
# On the GPU machine, from a copy of the repository with .gpu/ in it, run
#
#   .gpu/run.sh [OUTDIR]        (OUTDIR defaults to $OUT, else .gpu/out)
#
# It prints the driver and device probe and the verbose test log, then a short table of the
# results, last. It writes under OUTDIR: probe.txt, cuda.log (verbose test output), cuda.json
# (test2json events), results.jsonl (the tests' RESULT records), report.json (probe, per-test
# results, copy bandwidth, the matvec bandwidth table, host link, conformance counts, goldens)
# and summary.txt (the table). Its exit status is the test binary's. The binary links against
# libcuda.so.1 (found at run time) and needs glibc 2.34 or newer. The tests run in five processes
# (smoke, conformance, bandwidth, real sizes, megakernel) limited to 60, 120, 90, 100 and 60 s,
# about two minutes in all expected on an H200; then the whole-model benches, eager and
# megakernel, at 128 and at 2048 positions, limited to 90, 60, 90 and 60 s, each skipped when
# it could end past 570 s from the start (VERITY_DEADLINE), so all ends within 9 min 40 s.
set -euo pipefail
cd "$(dirname "$0")/.."

tools/cudaenv.sh --quiet
# shellcheck disable=SC1091
source .cache/cuda/env.sh
mkdir -p .gpu
go test -c -tags cuda -o .gpu/cuda.test ./device/cuda
go build -o .gpu/test2json cmd/test2json
go build -o .gpu/gpureport ./tools/gpureport
go build -tags cuda -o .gpu/verity ./tools/verity

cat >.gpu/run.sh <<'EOF'
#!/usr/bin/env bash
# Runs Verity's CUDA backend tests and measurements on a GPU machine; written by
# tools/gpucheck.sh.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
out=${1:-${OUT:-$here/out}}
mkdir -p "$out"
rm -f "$out/results.jsonl"

# The driver's library may live outside the loader's search path (e.g. /usr/local/nvidia).
if ! ldconfig -p 2>/dev/null | grep -q 'libcuda\.so\.1'; then
	for d in /usr/local/nvidia/lib64 /usr/local/nvidia/lib /usr/lib/x86_64-linux-gnu/nvidia; do
		[ -e "$d/libcuda.so.1" ] && export LD_LIBRARY_PATH="$d${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
	done
fi

# Each test opens its own context and JIT-compiles the PTX modules it uses; the driver's
# compute cache makes every compilation after the first a lookup.
export CUDA_CACHE_PATH=${CUDA_CACHE_PATH:-$here/jitcache} CUDA_CACHE_MAXSIZE=${CUDA_CACHE_MAXSIZE:-1073741824}

{
	echo "== host: $(uname -srm); $(ldd --version 2>&1 | head -1); $(nproc) CPUs"
	echo "== libcuda:"
	ldconfig -p 2>/dev/null | grep -E 'libcuda\.so' || echo "(libcuda.so.1 not in the loader cache; LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-})"
	echo "== nvidia-smi:"
	if command -v nvidia-smi >/dev/null; then
		nvidia-smi --query-gpu=name,driver_version,compute_cap,memory.total,clocks.max.sm,clocks.max.mem --format=csv 2>&1
	else
		echo "(nvidia-smi not found)"
	fi
} | tee "$out/probe.txt"

# The tests run in five processes, lightest first, each with its own time limit: a kernel
# that faults leaves the context unusable, and one that hangs uses up its phase's limit, not
# the whole run. The report is written and printed as soon as the tests end (and if the runner
# is killed), then once more with the whole-model bench appended.
start=$(date +%s.%N)
rc=0
: >"$out/cuda.json"
: >"$out/cuda.log"
report() {
	wall=$(awk -v s="$start" -v e="$(date +%s.%N)" 'BEGIN { printf "%.1f", e - s }')
	if ! "$here/gpureport" -dir "$out" -exit "$rc" -wall "$wall" >"$out/summary.txt"; then
		echo "gpureport failed; test binary exit $rc after ${wall}s" >>"$out/summary.txt"
	fi
}
trap 'report; cat "$out/summary.txt"; exit 143' TERM INT
phase() { # name, -test.run pattern, seconds
	echo "== device/cuda tests: $1"
	(cd "$repo/device/cuda" && VERITY_RESULTS="$out/results.jsonl" timeout -k 10 $(($3 + 15)) "$here/cuda.test" \
		-test.v=test2json -test.run="$2" -test.timeout="$3s" -test.count=1 \
		-goldens="$repo/fixtures/testdata/goldens.json") >"$out/phase.raw" 2>&1
	local prc=$?
	[ "$rc" -ne 0 ] || rc=$prc
	"$here/test2json" -t -p verity/device/cuda <"$out/phase.raw" >>"$out/cuda.json"
	# the plain verbose log: test2json's framing bytes (^V) removed
	tr -d '\026' <"$out/phase.raw" | tee -a "$out/cuda.log"
	rm -f "$out/phase.raw"
}
phase smoke '^(TestProbe|TestInfo|TestOpenBadOrdinal|TestMemory|TestDriverErrorNames|TestSharedMemoryOptIn|TestStagedTransfers|TestCaptureRefusesOtherCalls|TestTimeline)$' 60
phase conformance '^(TestConformance|TestForwardMatchesTwin|TestGraphMatchesEager|TestGoldens)$' 120
phase bandwidth '^(TestBandwidth|TestHostTransfer)$' 90
phase real-sizes '^TestConformanceRealSizes$' 100
phase megakernel '^TestMegakernelGoldens$' 60
report
echo
cat "$out/summary.txt"

# Whole-model decode, prefill, tree verify and the verify cost curve on the GPU: the eager
# executor (one launch per op), then the megakernel (one launch per step); the fixtures are
# generated on this machine's CPUs and cached beside the binaries. VERITY_BENCH=0 skips it.
bench() { # file, seconds, extra flags…
	local file=$1 secs=$2
	shift 2
	# A bench that could run past the call's budget (VERITY_DEADLINE seconds from the start,
	# default 570) is skipped, so that the summary is always printed.
	if ((SECONDS + secs > ${VERITY_DEADLINE:-570})); then
		echo "whole-model bench (verity bench --backend cuda $*): skipped, ${SECONDS} s gone" | tee -a "$out/summary.txt"
		return
	fi
	echo "== verity bench --backend cuda $*"
	VERITY_CACHE="$here/cache" timeout -k 5 "$secs" "$here/verity" bench --backend cuda "$@" >"$out/$file" 2>&1
	local brc=$?
	cat "$out/$file"
	{
		echo "whole-model bench (verity bench --backend cuda $*, exit $brc; verify cost curves and the per-op profile in $file):"
		awk '/^$/ { exit } { print }' "$out/$file" | tail -n 6
		tail -n 1 "$out/$file"
	} >>"$out/summary.txt"
}
if [ "${VERITY_BENCH:-1}" != 0 ]; then
	bench bench.txt 90 --model small-llama-q4_k_m --model small-q35moe-q4_k_m --model llama-1b-q4_k_m \
		--widths 1,2,4,8,16,32,64 --ops 16 --spec 0.9,0.8,0.7,0.6,0.5 --batch 1,8,64
	bench bench-megakernel.txt 60 --megakernel --model small-llama-q4_k_m --model llama-1b-q4_k_m --widths 1,8,64
	# The design's target: an 8-node verify after 2048 positions (and the per-op profile of a
	# decode at that depth, where attention's time shows), eager and as one megakernel launch.
	bench bench-depth.txt 90 --model llama-1b-q4_k_m --prompt 2048 --ops 16
	bench bench-megakernel-depth.txt 60 --megakernel --model llama-1b-q4_k_m --prompt 2048
	echo
	cat "$out/summary.txt"
fi
exit "$rc"
EOF
chmod +x .gpu/run.sh
ls -l .gpu/cuda.test .gpu/test2json .gpu/gpureport .gpu/verity .gpu/run.sh
echo "gpucheck: built .gpu/; run .gpu/run.sh on the GPU machine"
