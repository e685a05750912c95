"""Packaging for ultra_multr: the metadata is in pyproject.toml; this file adds one thing.

Besides the package, an install puts ``ultra_multr_startup.pth`` into
site-packages.  That one-line file runs ``ultra_multr.compat.startup`` when the
interpreter starts, which lets ULTRA_pytorch's unmodified ``main.py`` import
``ultra`` on machines without TensorFlow (see that module's docstring).  The
two command overrides below put the file in place for a normal install
(``build_py``) and a PEP 660 editable install (``editable_wheel``, setuptools
>= 64, which pyproject.toml requires).  Because pyproject.toml names the build
back end, pip never falls back to the legacy ``setup.py develop``, which with
setuptools >= 80 starts an isolated build (downloading setuptools: fails
offline).
"""
import os

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.command.editable_wheel import editable_wheel

STARTUP_PTH = "ultra_multr_startup.pth"


def _write_startup_pth(directory):
    with open(os.path.join(directory, STARTUP_PTH), "w") as handle:
        handle.write("import ultra_multr.compat.startup\n")


class BuildPyWithStartupHook(build_py):
    def run(self):
        super().run()
        _write_startup_pth(self.build_lib)


class EditableWheelWithStartupHook(editable_wheel):
    # Files written next to the dist-info end up at the root of the
    # editable wheel, i.e. directly in site-packages.
    def _install_namespaces(self, installation_dir, pth_prefix):
        super()._install_namespaces(installation_dir, pth_prefix)
        _write_startup_pth(installation_dir)


setup(cmdclass={"build_py": BuildPyWithStartupHook, "editable_wheel": EditableWheelWithStartupHook})
