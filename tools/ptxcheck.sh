#!/usr/bin/env bash
# ptxcheck.sh checks the committed PTX in ptx/ against its sources: it installs (or reuses) the
# CUDA toolchain with tools/cudaenv.sh, regenerates every PTX file and ptx/manifest.go into a
# scratch directory and fails if any differs from the committed one (or if a .ptx has no
# source), and assembles every PTX file with ptxas for each target architecture (sm_80, sm_90;
# output discarded). The toolchain tree is cached in $VERITY_CUDA (default .cache/cuda), so a
# machine that runs it again skips the download.
set -euo pipefail
cd "$(dirname "$0")/.."

t0=$(date +%s.%N)
tools/cudaenv.sh --quiet
t1=$(date +%s.%N)
go run ./tools/ptxgen -dir ptx -check -ptxas
t2=$(date +%s.%N)
awk -v a="$t0" -v b="$t1" -v c="$t2" 'BEGIN { printf "ptxcheck: PTX up to date and assembled for sm_80, sm_90 (toolchain %.1f s, regenerate and assemble %.1f s)\n", b - a, c - b }'
