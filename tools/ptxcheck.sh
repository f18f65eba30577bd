#!/usr/bin/env bash
# ptxcheck.sh checks the committed kernels in ptx/ against their sources: it checks the
# megakernel's generated kernel table against the Go kernel registry (tools/mkgen), installs (or reuses)
# the CUDA toolchain with tools/cudaenv.sh, regenerates every PTX file, every sm_37 cubin and
# ptx/manifest.go in memory and fails if any differs byte for byte from the committed one (or if
# a .ptx or .cubin is no longer generated), and assembles every PTX file with ptxas for each
# target architecture (sm_80, sm_90; output discarded). It prints what was assembled: the PTX
# for sm_80 and sm_90, and the sm_37 cubins with any kernel they leave out. The toolchain tree
# is cached in $VERITY_CUDA (default .cache/cuda), so a machine that runs it again skips the
# download.
set -euo pipefail
cd "$(dirname "$0")/.."

t0=$(date +%s.%N)
tools/cudaenv.sh --quiet
t1=$(date +%s.%N)
go run ./tools/mkgen -dir ptx -check
go run ./tools/ptxgen -dir ptx -check -ptxas
t2=$(date +%s.%N)
awk -v a="$t0" -v b="$t1" -v c="$t2" 'BEGIN { printf "ptxcheck: PTX and cubins up to date (toolchain %.1f s, regenerate and assemble %.1f s)\n", b - a, c - b }'
