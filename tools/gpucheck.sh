#!/usr/bin/env bash
# gpucheck.sh prepares a GPU check for a machine that has a CUDA driver and a GPU but no Go.
# Here (with Go and the toolchain tools/cudaenv.sh installs) it builds into .gpu/ (git-ignored):
#
#   .gpu/cuda.test   go test -c -tags cuda ./device/cuda: the CUDA backend's tests (driver
#                    probe, memory, every kernel against its CPU twin, whole forward passes)
#   .gpu/test2json   Go's test2json, to turn the test output into JSON there
#   .gpu/run.sh      the runner
#
# On the GPU machine, from the repository root (with .gpu/ carried along), run
#
#   .gpu/run.sh [OUTDIR]        (OUTDIR defaults to $OUT, else .gpu/out)
#
# It prints the driver and device probe, runs the test binary verbosely, and writes under
# OUTDIR: probe.txt, cuda.log (verbose test output), cuda.json (test2json events), summary.txt
# (one line per test: result, seconds, name) and report.json (probe, exit status, counts).
# Its exit status is the test binary's. The binary links against libcuda.so.1 (found at run
# time) and needs glibc 2.34 or newer.
set -euo pipefail
cd "$(dirname "$0")/.."

tools/cudaenv.sh --quiet
# shellcheck disable=SC1091
source .cache/cuda/env.sh
mkdir -p .gpu
go test -c -tags cuda -o .gpu/cuda.test ./device/cuda
go build -o .gpu/test2json cmd/test2json

cat >.gpu/run.sh <<'EOF'
#!/usr/bin/env bash
# Runs Verity's CUDA backend tests on a GPU machine; written by tools/gpucheck.sh.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=${1:-${OUT:-$here/out}}
mkdir -p "$out"

{
	echo "== host: $(uname -srm); $(ldd --version 2>&1 | head -1)"
	echo "== libcuda:"
	ldconfig -p 2>/dev/null | grep -E 'libcuda\.so' || echo "(libcuda.so.1 not in the loader cache)"
	echo "== nvidia-smi:"
	if command -v nvidia-smi >/dev/null; then
		nvidia-smi --query-gpu=name,driver_version,compute_cap,memory.total,clocks.max.sm --format=csv 2>&1
	else
		echo "(nvidia-smi not found)"
	fi
} | tee "$out/probe.txt"

echo "== device/cuda tests"
start=$(date +%s.%N)
"$here/cuda.test" -test.v=test2json -test.timeout=300s -test.count=1 >"$out/cuda.raw" 2>&1
rc=$?
wall=$(awk -v s="$start" -v e="$(date +%s.%N)" 'BEGIN { printf "%.1f", e - s }')
"$here/test2json" -t -p verity/device/cuda <"$out/cuda.raw" >"$out/cuda.json"
# The plain verbose log: test2json's framing bytes (^V) removed.
tr -d '\026' <"$out/cuda.raw" >"$out/cuda.log"
rm -f "$out/cuda.raw"
cat "$out/cuda.log"

# summary.txt: result, seconds and name of every test (and the package line).
sed -nE 's/.*"Action":"(pass|fail|skip)","Package":"[^"]*","Test":"([^"]*)","Elapsed":([0-9.]+).*/\1 \3 \2/p;
	s/.*"Action":"(pass|fail|skip)","Package":"([^"]*)","Elapsed":([0-9.]+).*/\1 \3 package \2/p' "$out/cuda.json" |
	awk '{ n = $3; for (i = 4; i <= NF; i++) n = n " " $i; printf "%-5s %8.2fs  %s\n", $1, $2, n }' >"$out/summary.txt"
count() { grep -c "^$1 " "$out/summary.txt" || true; }
pass=$(count pass)
fail=$(count fail)
skip=$(count skip)
lines=$(cat "$out/summary.txt")
{
	echo "== summary (exit $rc, ${wall}s): $pass passed, $fail failed, $skip skipped"
	[ -z "$lines" ] || echo "$lines"
} | tee "$out/summary.txt"

esc() { sed -e 's/\\/\\\\/g' -e 's/"/\\"/g' -e 's/\t/\\t/g' | awk '{ printf "%s\\n", $0 }'; }
cat >"$out/report.json" <<JSON
{
  "package": "verity/device/cuda",
  "exit": $rc,
  "wall_s": $wall,
  "passed": $pass,
  "failed": $fail,
  "skipped": $skip,
  "probe": "$(esc <"$out/probe.txt")",
  "events": "cuda.json",
  "log": "cuda.log"
}
JSON
exit "$rc"
EOF
chmod +x .gpu/run.sh
ls -l .gpu/cuda.test .gpu/test2json .gpu/run.sh
echo "gpucheck: built .gpu/; run .gpu/run.sh on the GPU machine"
