# Sourced by run_on_gpu.sh and gpu_session.sh (from the repository root, on the GPU machine): makes
# the mxdiff package importable (PYTHONPATH, LD_LIBRARY_PATH) and checks torch and Triton; returns
# 2 where it cannot. The package carried in python/gpu/prebuilt/ (python/gpu/build_for_gpu.sh, run
# where the C++ build works) is used with this tree's Python side; without it, pip builds it here
# (--no-build-isolation --no-deps: no network; it needs absl, fmt and nlohmann-json headers).
prebuilt=python/gpu/prebuilt
if [ -f "$prebuilt/site/mxdiff/__init__.py" ]; then
  if [ -f "$prebuilt/SOURCES" ] && ! sha1sum --quiet --check "$prebuilt/SOURCES" >/dev/null 2>&1; then
    echo "gpu_env: $prebuilt was built from other C++ sources than this tree's python/src (rebuild it:" \
         "python/gpu/build_for_gpu.sh, and carry it again)" >&2
    return 2
  fi
  cp python/mxdiff/*.py "$prebuilt/site/mxdiff/"  # this tree's Python side
  export PYTHONPATH="$PWD/$prebuilt/site${PYTHONPATH:+:$PYTHONPATH}"
  export LD_LIBRARY_PATH="$PWD/$prebuilt/runtime-libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  echo "gpu_env: the carried package in $prebuilt"
else
  site=python/gpu/site
  echo "gpu_env: building the package from python/ into $site"
  python3 -m pip install --quiet --no-build-isolation --no-deps --upgrade --target "$site" ./python || {
    echo "gpu_env: the package did not build here; build it where the C++ build works (python/gpu/build_for_gpu.sh) and carry python/gpu/prebuilt" >&2
    return 2
  }
  export PYTHONPATH="$PWD/$site${PYTHONPATH:+:$PYTHONPATH}"
fi
python3 -c 'import sys, mxdiff, torch, triton
gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "no GPU visible"
print(f"gpu_env: python {sys.version.split()[0]}, torch {torch.__version__}, triton {triton.__version__}, {gpu}, "
      f"admitted scales {mxdiff.fold_admitted_set()}")' || return 2
