#!/bin/sh
# Regenerate configure and Makefile.in from configure.ac / Makefile.am.
set -e
cd "$(dirname "$0")"
mkdir -p m4 build-aux
autoreconf -fi
