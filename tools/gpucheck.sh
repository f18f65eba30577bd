#!/usr/bin/env bash
# gpucheck.sh prepares a GPU check for a machine that has a CUDA driver and a GPU but no Go.
# Here (with Go and the toolchain tools/cudaenv.sh installs) it builds, stripped of symbols and
# packed into .gpu/bin.tar.gz (a fresh .gpu/, git-ignored) to travel light:
#
#   cuda.test        go test -c -tags cuda ./device/cuda: the CUDA backend's tests (driver
#                    probe, module loads, memory, staging, graphs, every kernel against its
#                    CPU twin at small and real model sizes, whole forward passes, the fixtures'
#                    golden hashes eager, through the megakernel and split across contexts, the
#                    JIT against the cubins, a deliberate fault) and its measurements (copy and
#                    matvec bandwidth, host link, launch overhead, hand-offs)
#   test2json        Go's test2json, to turn the test output into JSON there
#   gpureport        tools/gpureport: builds report.json and the summary table
#   verity           the CLI built with the cuda tag: fixtures and whole-model benchmarks
#
# beside .gpu/run.sh, the runner (tools/gpurun.sh; its header says what it does), which unpacks
# them into .gpu/ when it starts (well under a second).
#
# and checks that what a call to the GPU machine carries — the repository's files (tracked, and
# untracked but not ignored) and .gpu/ — fits the 64 MiB the device tool takes, printing both
# sizes; it fails if they do not. On the GPU machine, from a copy of the repository with .gpu/
# in it, run
#
#   .gpu/run.sh [--deadline SECONDS] [OUTDIR]      (OUTDIR defaults to $OUT, else .gpu/out)
#
# The binaries link against libcuda.so.1 (found at run time) and need glibc 2.34 or newer;
# tools/torchref.py, the PyTorch peer, needs python3 with torch there.
set -euo pipefail
cd "$(dirname "$0")/.."

limit=$((64 << 20)) # the device tool's limit on what one call carries

tools/cudaenv.sh --quiet
# shellcheck disable=SC1091
source .cache/cuda/env.sh
rm -rf .gpu
mkdir -p .gpu
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
strip=(-trimpath -ldflags=-s\ -w)
go test -c -tags cuda "${strip[@]}" -o "$stage/cuda.test" ./device/cuda
go build "${strip[@]}" -o "$stage/test2json" cmd/test2json
go build "${strip[@]}" -o "$stage/gpureport" ./tools/gpureport
go build -tags cuda "${strip[@]}" -o "$stage/verity" ./tools/verity
ls -l "$stage"
tar -czf .gpu/bin.tar.gz -C "$stage" cuda.test test2json gpureport verity
cp tools/gpurun.sh .gpu/run.sh
chmod +x .gpu/run.sh
ls -l .gpu

gpu=$(du -sb .gpu | cut -f1)
tree=$(git ls-files -z --cached --others --exclude-standard | xargs -0 -r stat -c %s -- 2>/dev/null | awk '{ s += $1 } END { print s + 0 }')
printf 'gpucheck: .gpu/ %.1f MiB + the repository %.1f MiB = %.1f MiB of the %d MiB a call carries\n' \
	"$(echo "$gpu" | awk '{ print $1 / 1048576 }')" "$(echo "$tree" | awk '{ print $1 / 1048576 }')" \
	"$(echo "$gpu $tree" | awk '{ print ($1 + $2) / 1048576 }')" $((limit >> 20))
if [ $((gpu + tree)) -gt "$limit" ]; then
	echo "gpucheck: too large for one call: carry less (strip more, embed less) before the GPU run" >&2
	exit 1
fi
echo "gpucheck: built .gpu/; run .gpu/run.sh on the GPU machine"
