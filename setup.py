"""Packaging for ultra_multr.

Besides the package, an install puts ``ultra_multr_startup.pth`` into
site-packages.  That one-line file runs ``ultra_multr.compat.startup`` when the
interpreter starts, which lets ULTRA_pytorch's unmodified ``main.py`` import
``ultra`` on machines without TensorFlow (see that module's docstring).  The
three command overrides below put the file in place for a normal install
(``build_py``), a PEP 660 editable install (``editable_wheel``) and a legacy
``setup.py develop`` editable install (``develop``).
"""
import os
import shutil

from setuptools import find_packages, setup
from setuptools.command.build_py import build_py
from setuptools.command.develop import develop

HERE = os.path.dirname(os.path.abspath(__file__))
STARTUP_PTH = "ultra_multr_startup.pth"


def _write_startup_pth(directory):
    with open(os.path.join(directory, STARTUP_PTH), "w") as handle:
        handle.write("import ultra_multr.compat.startup\n")


class BuildPyWithStartupHook(build_py):
    def run(self):
        super().run()
        _write_startup_pth(self.build_lib)


class DevelopWithStartupHook(develop):
    def run(self):
        super().run()
        _write_startup_pth(self.install_dir)


cmdclass = {"build_py": BuildPyWithStartupHook, "develop": DevelopWithStartupHook}

try:  # setuptools >= 64
    from setuptools.command.editable_wheel import editable_wheel

    class EditableWheelWithStartupHook(editable_wheel):
        # Files written next to the dist-info end up at the root of the
        # editable wheel, i.e. directly in site-packages.
        def _install_namespaces(self, installation_dir, pth_prefix):
            super()._install_namespaces(installation_dir, pth_prefix)
            _write_startup_pth(installation_dir)

    cmdclass["editable_wheel"] = EditableWheelWithStartupHook
except ImportError:  # pragma: no cover - old setuptools uses `develop`
    pass


def _read(name):
    with open(os.path.join(HERE, name), encoding="utf-8") as handle:
        return handle.read()


setup(
    name="ultra_multr",
    version="0.1.0",
    description="MULTR (Model-based Unbiased Learning to Rank, WSDM 2023) as a ULTRA_pytorch plugin",
    long_description=_read("README.md"),
    long_description_content_type="text/markdown",
    license="Apache-2.0",
    packages=find_packages(include=["ultra_multr", "ultra_multr.*"]),
    python_requires=">=3.8",
    install_requires=["torch>=1.13", "numpy>=1.21", "six>=1.10"],
    extras_require={
        # ULTRA itself comes from git (see README); its main.py also needs these.
        "ultra": ["tensorboard", "scipy"],
        "experiments": ["scikit-learn>=1.0", "matplotlib>=3.3", "tqdm>=4.0"],
        "test": ["pytest>=7", "scikit-learn>=1.0", "matplotlib>=3.3", "tqdm>=4.0", "tensorboard", "scipy"],
    },
    cmdclass=cmdclass,
    entry_points={
        "console_scripts": [
            "ultra-multr-prepare=ultra_multr.data.prepare:main",
            "ultra-multr-run=ultra_multr.experiments.runner:main",
            "ultra-multr-simulator-report=ultra_multr.simulator_report:main",
        ]
    },
)
