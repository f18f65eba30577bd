#!/usr/bin/env bash
# ptxcheck.sh checks the committed kernels in ptx/ against their sources: it checks the
# megakernel's generated kernel table against the Go kernel registry (tools/mkgen), installs (or
# reuses) the CUDA toolchain with tools/cudaenv.sh, regenerates every PTX file, every cubin (sm_37
# by nvcc from the sources; sm_80 and sm_90 by ptxas from the PTX) and ptx/manifest.go in memory,
# and fails if any differs byte for byte from the committed one (or if a .ptx or .cubin is no
# longer generated). It prints what was built: the cubins per architecture, any kernel they
# leave out, the megakernel's registers, shared memory and spills as ptxas reports them, and the
# slowest compilations. It then recomputes the static performance model's facts from the sm_80
# and sm_90 cubins (tools/kernelfacts: nvdisasm, cuobjdump -res-usage; device/perf/facts_sm*.json
# and the probe kernels' testdata) and fails if they differ from the committed ones. The
# toolchain tree is cached in $VERITY_CUDA (default .cache/cuda), so a machine that runs it
# again skips the download.
set -euo pipefail
cd "$(dirname "$0")/.."

t0=$(date +%s.%N)
tools/cudaenv.sh --quiet
t1=$(date +%s.%N)
go run ./tools/mkgen -dir ptx -check
go run ./tools/ptxgen -dir ptx -check
t2=$(date +%s.%N)
go run ./tools/kernelfacts -dir ptx -check
t3=$(date +%s.%N)
awk -v a="$t0" -v b="$t1" -v c="$t2" -v d="$t3" 'BEGIN { printf "ptxcheck: PTX, cubins and performance facts up to date (toolchain %.1f s, regenerate %.1f s, facts %.1f s)\n", b - a, c - b, d - c }'
