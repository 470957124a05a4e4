#!/bin/bash
# Run a command on a GPU machine with SGLang 0.5.23 from the offline bundle (../shared/gpu/README.md),
# the project and the GPU tests' test-only plugin (tests/gpu/testing_plugin) installed. From the
# repository root:
#
#   bash tools/gpu_bundle.sh BUNDLE_DIR COMMAND [ARGS...]
#
# BUNDLE_DIR holds sglang-0.5.23-gpu-site-cp312.tar.xz and shim/sitecustomize.py (a copy of
# ../shared/gpu/sitecustomize.py). The bundle is unpacked once into $SGL_SITE (default /tmp/sgl-site).
# A PYTHONPATH already set (wheels the bundle lacks, such as the PD tests' transfer engine and
# router) stays on the path after the bundle.
set -eo pipefail
if [ $# -lt 2 ]; then
    sed -n 2,9p "$0"
    exit 2
fi
bundle=$(cd "$1" && pwd)
shift
site=${SGL_SITE:-/tmp/sgl-site}
if [ ! -d "$site/site23" ]; then
    mkdir -p "$site"
    tar -xJf "$bundle/sglang-0.5.23-gpu-site-cp312.tar.xz" -C "$site"
fi
# The GPU suite is not the older releases' business: no SGLang-code measurement (tests/conftest.py).
export EAGLE3_EMBED_SGLANG_TOUCH=0
export PYTHONPATH="$bundle/shim:$site/site23${PYTHONPATH:+:$PYTHONPATH}" SGLANG_SKIP_SGL_KERNEL_VERSION_CHECK=1 PYTHONUNBUFFERED=1
python3 -m pip install -q --no-deps --no-build-isolation . tests/gpu/testing_plugin >/dev/null 2>&1 ||
    python3 -m pip install --no-deps --no-build-isolation . tests/gpu/testing_plugin
exec "$@"
