"""Build the compiled kernel: every ``.pyx`` under ``dmondrian/`` is one extension.

Cython translates the modules to C and the machine's C compiler builds them
when the package is installed (``pip install -e .`` included), so no code is
compiled when a user first calls the engine or when a Dask worker starts.
OpenMP parallelizes the kernel's independent subtrees and column passes; a
compiler without it (Apple's clang, say) still builds a correct, serial
kernel.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from setuptools import Extension, setup

ROOT = Path(__file__).parent


def _openmp_flags() -> list[str]:
    """``["-fopenmp"]`` when the C compiler builds and links an OpenMP program."""
    if sys.platform == "win32":
        return ["/openmp"]
    cc = os.environ.get("CC", "cc")
    if shutil.which(cc.split()[0]) is None:
        return []
    source = "#include <omp.h>\nint main(void) { return omp_get_max_threads() < 1; }\n"
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp, "probe.c")
        path.write_text(source)
        done = subprocess.run([*cc.split(), "-fopenmp", str(path), "-o", str(Path(tmp, "probe"))],
                              capture_output=True)
    if done.returncode != 0:
        print("dmondrian: the C compiler has no OpenMP; building a serial kernel",
              file=sys.stderr)
        return []
    return ["-fopenmp"]


def _extensions() -> list[Extension]:
    import numpy as np
    from Cython.Build import cythonize

    openmp = _openmp_flags()
    # -fwrapv: signed overflow wraps, as the kernel's key arithmetic assumes
    # (a cut just below the smallest int64 key, say), instead of being
    # undefined behaviour the optimizer may exploit.
    compile_args = [] if sys.platform == "win32" else ["-O3", "-fwrapv"]
    only = {m for m in os.environ.get("DMONDRIAN_BUILD_ONLY", "").split(",") if m}
    modules = []
    for pyx in sorted(ROOT.glob("dmondrian/**/*.pyx")):
        name = ".".join(pyx.relative_to(ROOT).with_suffix("").parts)
        if only and name.rsplit(".", 1)[-1] not in only:
            continue
        modules.append(Extension(
            name, [str(pyx.relative_to(ROOT))],
            include_dirs=[np.get_include()],
            define_macros=[("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION")],
            extra_compile_args=compile_args + openmp,
            extra_link_args=openmp,
        ))
    return cythonize(modules, language_level=3, compiler_directives={
        "boundscheck": False, "wraparound": False, "cdivision": True,
        "initializedcheck": False, "nonecheck": False, "embedsignature": True,
    })


setup(ext_modules=_extensions())
