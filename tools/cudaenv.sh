#!/usr/bin/env bash
# cudaenv.sh installs the CUDA compiler tools Verity's kernels are built with into $VERITY_CUDA
# (default <repo>/.cache/cuda, git-ignored), and prints their versions:
#
#   bin/nvcc, bin/nvcc.profile   nvcc -ptx (the profile makes the tree relocatable)
#   nvvm/bin/cicc, nvvm/libdevice
#   bin/ptxas, bin/fatbinary, bin/cuobjdump
#   bin/nvdisasm                 the SASS disassembler (cuobjdump -sass runs it): the static
#                                performance model's facts are read from its output
#   include/                     the CUDA headers (cuda.h, cuda_runtime.h, crt/, cuda_bf16.h, …)
#   lib64/stubs/libcuda.so       a link stub (SONAME libcuda.so.1) for cgo code that calls the
#                                driver API: every function cuda.h declares returns
#                                CUDA_ERROR_STUB_LIBRARY; the real driver is found at run time
#   env.sh                       `. env.sh` puts bin/ on PATH and sets CUDA_HOME, CGO_CFLAGS and
#                                CGO_LDFLAGS for this tree
#
# The files come from Debian bookworm's non-free CUDA 11.8 packages (nvidia-cuda-toolkit,
# nvidia-cuda-dev), fetched with apt-get download through a private apt list of bookworm's
# contrib and non-free components (the machine's apt configuration is left alone), and only the
# files above are unpacked (about 85 MB instead of the 5.5 GB a full install takes). They are
# NVIDIA-licensed: they live in the cache, never in the repository.
#
# nvcc runs the host C++ preprocessor even for -ptx. CUDA 11.8 supports gcc up to 11: if g++-11
# is installed it is used; otherwise the system's g++ is used with nvcc's host compiler version
# check turned off (what -allow-unsupported-compiler does), which gives byte-identical PTX.
# Without any g++, running as root installs Debian's g++ package.
#
# Idempotent: a complete tree is kept and reused (delete it, or pass --force, to reinstall). A
# tree of the previous layout (verity-cudaenv-2, without nvdisasm) is brought up to date in place:
# only the toolkit package is fetched and only nvdisasm unpacked into it; nothing else changes.
# Concurrent runs wait for each other. Needs bash, apt-get, dpkg-deb, tar, flock and gcc, and
# network access to a Debian mirror: $VERITY_DEBIAN_MIRROR, else the one the machine's apt
# sources name for bookworm, else deb.debian.org.
#
# Usage: tools/cudaenv.sh [--force] [--quiet]   (--quiet: print nothing when the tree exists)
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
dest=${VERITY_CUDA:-$repo/.cache/cuda}
keyring=/usr/share/keyrings/debian-archive-keyring.gpg
layout=verity-cudaenv-3 # bump when the tree's layout or contents change
previous=verity-cudaenv-2 # the layout before, which lacked only bin/nvdisasm

force=0
quiet=0
for arg in "$@"; do
	case $arg in
	--force) force=1 ;;
	--quiet) quiet=1 ;;
	*)
		echo "usage: $0 [--force] [--quiet]" >&2
		exit 2
		;;
	esac
done

say() { [ "$quiet" = 1 ] || printf '%s\n' "$*" >&2; }
die() {
	printf 'cudaenv: %s\n' "$*" >&2
	exit 1
}

start=$(date +%s.%N)

# system_mirror prints the Debian mirror the machine's apt sources use for bookworm, if any.
system_mirror() {
	local f m
	for f in /etc/apt/sources.list.d/*.sources; do
		[ -r "$f" ] || continue
		m=$(awk 'BEGIN { RS = "" }
			/(^|\n)Types:[^\n]*deb([ \t]|\n|$)/ && /(^|\n)Suites:[^\n]*[ \t]bookworm([ \t]|\n|$)/ {
				if (match($0, /(^|\n)URIs:[ \t]*[^ \t\n]+/)) {
					s = substr($0, RSTART, RLENGTH); sub(/^\n?URIs:[ \t]*/, "", s); print s; exit
				}
			}' "$f")
		[ -n "$m" ] && echo "$m" && return
	done
	for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
		[ -r "$f" ] || continue
		m=$(awk '$1 == "deb" { i = 2; if ($i ~ /^\[/) { while (i < NF && $i !~ /\]$/) i++; i++ }
			if ($(i + 1) == "bookworm") { print $i; exit } }' "$f")
		[ -n "$m" ] && echo "$m" && return
	done
	return 0
}

# versions prints what the tree holds.
versions() {
	local d=$1
	echo "CUDA tree:      $d ($(du -sm "$d" | cut -f1) MB)"
	echo "nvcc:           $("$d/bin/nvcc" --version | sed -n 's/^Cuda compilation tools, //p')"
	echo "ptxas:          $("$d/bin/ptxas" --version | sed -n 's/^Cuda compilation tools, //p')"
	echo "nvdisasm:       $("$d/bin/nvdisasm" --version | sed -n 's/^Cuda compilation tools, //p')"
	echo "cuda.h:         CUDA_VERSION $(sed -n 's/^#define CUDA_VERSION \([0-9]*\).*/\1/p' "$d/include/cuda.h")"
	echo "packages:       $(paste -sd" " "$d/PACKAGES")"
	echo "host compiler:  $(cat "$d/HOST_COMPILER")"
}

# make_stub TREE SCRATCH writes TREE/lib64/stubs/libcuda.so, the link stub: one function per
# driver entry point cuda.h declares (with and without the per-thread default stream names),
# each returning CUDA_ERROR_STUB_LIBRARY (34). The preprocessed header is joined into one line
# first, because a declaration may put its return type and its name on different lines.
stub_version=2 # bump when the stub's contents change: existing trees regenerate it
make_stub() {
	local tree=$1 scratch=$2 ptds
	for ptds in '' -DCUDA_API_PER_THREAD_DEFAULT_STREAM; do
		gcc -E -P -x c $ptds -I"$tree/include" "$tree/include/cuda.h"
	done | tr '\n' ' ' | grep -oE '\bCUresult +cu[A-Za-z0-9_]+ *\(' | sed -E 's/^CUresult +//; s/ *\($//' | sort -u |
		awk '{ printf "int %s(void) { return 34; }\n", $1 }' >"$scratch/stub.c"
	[ "$(wc -l <"$scratch/stub.c")" -gt 300 ] || die "found too few driver functions in cuda.h for the stub"
	gcc -shared -fPIC -O1 -Wl,-soname,libcuda.so.1 -o "$tree/lib64/stubs/libcuda.so.tmp" "$scratch/stub.c"
	mv "$tree/lib64/stubs/libcuda.so.tmp" "$tree/lib64/stubs/libcuda.so"
	echo "$stub_version" >"$tree/lib64/stubs/STUB_VERSION"
}

at_layout() { [ -f "$1/.complete" ] && [ "$(cat "$1/.complete")" = "$2" ] && "$1/bin/nvcc" --version >/dev/null 2>&1; }
complete() { at_layout "$1" "$layout"; }

# private_apt DIR sets up apt (the array apt) with a private state under DIR: bookworm contrib +
# non-free only, from $VERITY_DEBIAN_MIRROR or the mirror the machine's sources use
# (deb.debian.org if none), with the system's keyring and apt.conf; and runs apt-get update.
private_apt() {
	local d=$1 mirror
	command -v apt-get >/dev/null || die "apt-get not found: this script needs Debian (or a derivative) with apt"
	command -v dpkg-deb >/dev/null || die "dpkg-deb not found"
	[ -r "$keyring" ] || die "$keyring not found (package debian-archive-keyring)"
	mkdir -p "$d/apt/lists/partial" "$d/apt/archives/partial" "$d/deb"
	mirror=${VERITY_DEBIAN_MIRROR:-$(system_mirror)}
	mirror=${mirror:-http://deb.debian.org/debian}
	echo "deb [signed-by=$keyring] $mirror bookworm contrib non-free" >"$d/apt/sources.list"
	apt=(apt-get -q
		-o "Dir::Etc::SourceList=$d/apt/sources.list"
		-o "Dir::Etc::SourceParts=$d/apt/none"
		-o "Dir::State::Lists=$d/apt/lists"
		-o "Dir::Cache::Archives=$d/apt/archives"
		-o "Dir::Cache::pkgcache=" -o "Dir::Cache::srcpkgcache=")
	[ "$(id -u)" = 0 ] && apt+=(-o APT::Sandbox::User=root)
	say "cudaenv: apt-get update (bookworm contrib non-free, private list)"
	"${apt[@]}" update >&2
}

# toolkit_files lists the members of nvidia-cuda-toolkit's data archive the tree holds.
toolkit_files=(./usr/bin/ptxas ./usr/bin/fatbinary ./usr/bin/cuobjdump ./usr/bin/nvdisasm
	./usr/lib/nvidia-cuda-toolkit/bin/nvcc ./usr/lib/nvidia-cuda-toolkit/bin/cicc
	./usr/lib/nvidia-cuda-toolkit/libdevice/libdevice.10.bc)

mkdir -p "$(dirname "$dest")"
exec 9>"$dest.lock"
flock 9

if [ "$force" = 0 ] && complete "$dest"; then
	if [ "$(cat "$dest/lib64/stubs/STUB_VERSION" 2>/dev/null)" != "$stub_version" ]; then
		say "cudaenv: regenerating the libcuda.so link stub"
		scratch=$(mktemp -d "$(dirname "$dest")/cudaenv.XXXXXX")
		make_stub "$dest" "$scratch"
		rm -rf "$scratch"
	fi
	[ "$quiet" = 1 ] || versions "$dest"
	exit 0
fi

# A tree of the previous layout gets nvdisasm from the same toolkit version it holds.
if [ "$force" = 0 ] && at_layout "$dest" "$previous"; then
	say "cudaenv: adding nvdisasm to the CUDA tree in $dest"
	work=$(mktemp -d "$(dirname "$dest")/cudaenv.XXXXXX")
	trap 'rm -rf "$work"' EXIT
	private_apt "$work"
	want=$(sed -n 's/^nvidia-cuda-toolkit=//p' "$dest/PACKAGES")
	[ -n "$want" ] || die "$dest/PACKAGES names no nvidia-cuda-toolkit version"
	(cd "$work/deb" && "${apt[@]}" download "nvidia-cuda-toolkit=$want" >&2)
	toolkit=$(echo "$work"/deb/nvidia-cuda-toolkit_*.deb)
	[ -f "$toolkit" ] || die "download failed"
	dpkg-deb --fsys-tarfile "$toolkit" | tar -x -C "$work" ./usr/bin/nvdisasm
	mv "$work/usr/bin/nvdisasm" "$dest/bin/nvdisasm.tmp"
	mv "$dest/bin/nvdisasm.tmp" "$dest/bin/nvdisasm"
	"$dest/bin/nvdisasm" --version >/dev/null || die "nvdisasm does not run"
	echo "$layout" >"$dest/.complete"
	[ "$quiet" = 1 ] || versions "$dest"
	exit 0
fi

# The host C++ preprocessor nvcc runs (cc1plus comes with g++).
host_ok() { echo 'int x;' | "$1" -x c++ -E - >/dev/null 2>&1; }
if host_ok g++-11; then
	host=11
elif host_ok g++; then
	host=system
else
	[ "$(id -u)" = 0 ] || die "no working g++ (nvcc needs a host C++ preprocessor): install g++, or run as root"
	say "cudaenv: installing g++ (nvcc needs a host C++ preprocessor)"
	apt-get -q update >&2
	DEBIAN_FRONTEND=noninteractive apt-get -q install -y --no-install-recommends g++ >&2
	host_ok g++ || die "g++ still does not work after installing it"
	host=system
fi

work=$(mktemp -d "$(dirname "$dest")/cudaenv.XXXXXX")
trap 'rm -rf "$work"' EXIT
stage=$work/cuda
mkdir -p "$stage/bin" "$stage/nvvm/bin" "$stage/nvvm/libdevice" "$stage/lib64/stubs"
private_apt "$work"
say "cudaenv: apt-get download nvidia-cuda-toolkit nvidia-cuda-dev (about 860 MB)"
(cd "$work/deb" && "${apt[@]}" download nvidia-cuda-toolkit nvidia-cuda-dev >&2)
toolkit=$(echo "$work"/deb/nvidia-cuda-toolkit_*.deb)
dev=$(echo "$work"/deb/nvidia-cuda-dev_*.deb)
[ -f "$toolkit" ] && [ -f "$dev" ] || die "download failed"
for d in "$toolkit" "$dev"; do
	dpkg-deb -f "$d" Package Version | paste -sd= - | sed 's/^Package: //; s/=Version: /=/'
done >"$stage/PACKAGES"

say "cudaenv: unpacking nvcc, cicc, libdevice, ptxas, fatbinary, cuobjdump, nvdisasm"
x=$work/x
mkdir -p "$x"
dpkg-deb --fsys-tarfile "$toolkit" | tar -x -C "$x" "${toolkit_files[@]}"
mv "$x/usr/bin/ptxas" "$x/usr/bin/fatbinary" "$x/usr/bin/cuobjdump" "$x/usr/bin/nvdisasm" \
	"$x/usr/lib/nvidia-cuda-toolkit/bin/nvcc" "$stage/bin/"
mv "$x/usr/lib/nvidia-cuda-toolkit/bin/cicc" "$stage/nvvm/bin/"
mv "$x/usr/lib/nvidia-cuda-toolkit/libdevice/libdevice.10.bc" "$stage/nvvm/libdevice/"

# The headers are the first members of nvidia-cuda-dev's data archive, ahead of 2.8 GB of static
# libraries: stop reading at the first member past /usr/include (tar then dies of SIGPIPE). If
# the order ever changes this only makes it slower.
say "cudaenv: unpacking the CUDA headers"
set +o pipefail
dpkg-deb --fsys-tarfile "$dev" 2>/dev/null |
	tar -xv -C "$x" --wildcards './usr/include/*' './usr/lib/*' 2>/dev/null |
	while read -r f; do case $f in ./usr/lib/*) break ;; esac done
set -o pipefail
for h in cuda.h cuda_runtime.h crt/host_config.h cuda_fp16.h cuda_bf16.h; do
	[ -f "$x/usr/include/$h" ] || die "nvidia-cuda-dev has no usr/include/$h"
done
mv "$x/usr/include" "$stage/include"

# Host compiler and relocatable profile.
# With g++-11, nvcc finds gcc and g++ wrappers in hostcc/ (kept out of bin/, which env.sh puts
# on everyone's PATH).
if [ "$host" = 11 ]; then
	mkdir -p "$stage/hostcc"
	printf '#!/bin/sh\nexec gcc-11 "$@"\n' >"$stage/hostcc/gcc"
	printf '#!/bin/sh\nexec g++-11 "$@"\n' >"$stage/hostcc/g++"
	chmod +x "$stage/hostcc/gcc" "$stage/hostcc/g++"
	check=
	gcc-11 --version | sed -n 1p >"$stage/HOST_COMPILER"
else
	check='-D__NV_NO_HOST_COMPILER_CHECK=1'
	echo "$(g++ --version | sed -n 1p) (version check off)" >"$stage/HOST_COMPILER"
fi
cat >"$stage/bin/nvcc.profile" <<EOF
# Written by tools/cudaenv.sh: paths relative to this directory, so the tree can move.
TOP = \$(_HERE_)/..
NVVMIR_LIBRARY_DIR = \$(TOP)/\$(_NVVM_BRANCH_)/libdevice
PATH += \$(TOP)/\$(_NVVM_BRANCH_)/bin:\$(TOP)/hostcc:\$(_HERE_):
INCLUDES += "-I\$(TOP)/include" $check \$(_SPACE_)
LIBRARIES =+ \$(_SPACE_) "-L\$(TOP)/lib64/stubs"
EOF

say "cudaenv: generating the libcuda.so link stub"
make_stub "$stage" "$work"

cat >"$stage/env.sh" <<'EOF'
# Source this file (bash) to use the CUDA tree it sits in. Written by tools/cudaenv.sh.
_verity_cuda=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
export CUDA_HOME=$_verity_cuda
export PATH=$_verity_cuda/bin:$PATH
export CGO_CFLAGS="-I$_verity_cuda/include${CGO_CFLAGS:+ $CGO_CFLAGS}"
export CGO_LDFLAGS="-L$_verity_cuda/lib64/stubs${CGO_LDFLAGS:+ $CGO_LDFLAGS}"
unset _verity_cuda
EOF

# Smoke test: a kernel through nvcc -ptx and ptxas, and a driver call linked against the stub.
say "cudaenv: checking the tree"
cat >"$work/smoke.cu" <<'EOF'
#include <cuda_bf16.h>
extern "C" __global__ void smoke(float *y, const __nv_bfloat16 *x, int n) {
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n) y[i] = __fadd_rn(y[i], __shfl_xor_sync(0xffffffffu, __bfloat162float(x[i]), 1));
}
EOF
"$stage/bin/nvcc" -ptx -arch=compute_80 -o "$work/smoke.ptx" "$work/smoke.cu"
"$stage/bin/ptxas" -arch=sm_90 -o /dev/null "$work/smoke.ptx"
printf '#include <cuda.h>\nint main(void) { return cuInit(0) == CUDA_SUCCESS; }\n' >"$work/smoke.c"
gcc -I"$stage/include" -o "$work/smoke" "$work/smoke.c" -L"$stage/lib64/stubs" -lcuda

echo "$layout" >"$stage/.complete"
rm -rf "$dest"
mv "$stage" "$dest"
versions "$dest"
echo "installed in:   $(awk -v s="$start" -v e="$(date +%s.%N)" 'BEGIN { printf "%.1f s", e - s }')"
