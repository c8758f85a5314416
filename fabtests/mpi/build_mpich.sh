#!/usr/bin/env bash
# build_mpich.sh [PREFIX]: builds MPICH with the ch4:ofi device over the
# system's libfabric into PREFIX (default /opt/mpich-ofi), for run_mpi.sh's
# MPICH pass and bench_mpi.sh. Debian 12's own MPICH (package mpich,
# 4.0.2) is built with ch4:ucx and cannot use a libfabric provider, so the
# same source (apt-get source mpich) is configured again:
#
#   ch4:ofi, --with-libfabric=/usr   the provider is chosen at run time
#                                    (FI_PROVIDER=dpdk)
#   --with-datatype-engine=dataloop  skips the embedded yaksa, whose
#                                    generated sources are most of the build
#   no Fortran, C++ bindings, ROMIO   not needed by fabtests/mpi
#
# Needs root (apt-get), dpkg-dev and libhwloc-dev; about 25 minutes on 2
# busy cores. Adds a deb-src entry for the duration of the download only.
if [ -z "${BASH_VERSION:-}" ]; then exec bash "$0" "$@"; fi
set -eu

prefix=${1:-/opt/mpich-ofi}
work=$(mktemp -d "${TMPDIR:-/tmp}/build_mpich.XXXXXX")
src_list=/etc/apt/sources.list.d/build-mpich-src.sources
trap 'rm -rf "$work"; rm -f "$src_list"' EXIT

apt-get install -y dpkg-dev libhwloc-dev libfabric-dev >/dev/null
# Source entries mirroring the system's binary ones (deb822 or one-line).
if ls /etc/apt/sources.list.d/*.sources >/dev/null 2>&1; then
	sed 's/^Types: deb$/Types: deb-src/' /etc/apt/sources.list.d/*.sources >"$work/src.sources"
	mv "$work/src.sources" "$src_list"
else
	src_list=/etc/apt/sources.list.d/build-mpich-src.list
	sed -n 's/^deb /deb-src /p' /etc/apt/sources.list >"$src_list"
fi
apt-get update >/dev/null
(cd "$work" && apt-get source --download-only mpich >/dev/null)
rm -f "$src_list"
tar -C "$work" -xf "$work"/mpich_*.orig.tar.*
cd "$work"/mpich-*/
./configure --prefix="$prefix" --with-device=ch4:ofi --with-libfabric=/usr \
	--with-datatype-engine=dataloop --disable-fortran --disable-cxx --disable-romio \
	--with-hwloc=/usr --enable-g=none --enable-fast=O2 --disable-doc --with-pm=hydra >configure.log
# configure copies libfabric's static dependencies (psm, psm2, rdmacm,
# verbs, efa) into the link lines; a shared link needs none of them, and
# Debian installs none of them with libfabric-dev.
for lib in $(sed -n 's/^external_libs = //p' Makefile); do
	case $lib in -l*) ;; *) continue ;; esac
	if ! echo 'int main(void){return 0;}' | gcc -x c - "$lib" -o /dev/null 2>/dev/null; then
		sed -i "s/ $lib\b//g" Makefile src/env/mpicc src/env/mpicc.sh src/env/mpicc.bash \
			src/packaging/pkgconfig/mpich.pc 2>/dev/null || true
	fi
done
make -j"$(nproc)" >make.log
make install >install.log
"$prefix/bin/mpichversion" | grep -E 'Version|Device'
